"""The fit verdict in words: one field list for its rows (text, markdown, CSV), the advice, the verification.

Shared by `llamabench fit` and `llamabench report`; prose about a fit lives here only.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.safe_text import escaped
from ..core.units import GIB, MIB
from ..jobs.fit.advice import describe_row
from ..jobs.fit.search import RAM_ADVICE_LLAMA, RAM_FLAGS
from ..memory.allocations import COMPUTE_TOLERANCE_WORDS, PARTS, RAM_TOLERANCE_WORDS
from ..memory.backends import BACKENDS
from ..memory.fit_result import FitResult
from ..memory.placement import FitRow, bounds_that_fit, quality, recommend
from ..records.fit import FitVerification
from ..runtimes.registry import run_line
from ..settings.tensor_overrides import LoadMode
from .fields import Field, table


def _gib(n: int) -> str:
    return f"{n / GIB:.2f}"


def _short(n: int) -> str:
    return f"-{_gib(n)} GiB" if n >= GIB // 100 else f"-{n / MIB:.2f} MiB"


def fits_text(row: FitRow) -> str:
    if row.fits:
        return "yes"
    if not row.card_fits and row.multi:
        worst = max(range(len(row.devices)), key=lambda i: row.devices[i].short_by)
        return f"no (c{worst} {_short(row.devices[worst].short_by)})"
    if not row.card_fits:
        limit = f"{row.budget.pool.ceiling_name} " if row.pooled else ""
        return f"no ({limit}{_short(row.short_by)})"
    return f"RAM no ({_short(row.ram_short_by)})"


def ram_now(row: FitRow) -> int:
    """What system RAM holds at start: the host's part (with --cpu-only everything, the card's parts too)."""
    return row.card_total - row.host.growing if row.ram_mode else row.host.at_start


def ram_total(row: FitRow) -> int:
    """What system RAM grows to: the host's part and its growing bounds (with --cpu-only the card's parts too)."""
    return row.card_total if row.ram_mode else row.host.total


def host_text(row: FitRow) -> str:
    """What system RAM grows to: the resident part and the runtime's upper bounds (+: no bound)."""
    return _gib(ram_total(row)) + ("+" if row.host.prompt_cache_unlimited else "")


def max_ctx_text(row: FitRow, n_ctx_train: int) -> str:
    """The largest n_ctx that fits; "(trained)" where the search stopped at the trained context, not the card."""
    if not row.max_n_ctx:
        return "none (RAM)" if row.card_fits else "none"
    if n_ctx_train and row.max_n_ctx > n_ctx_train:  # the search went to the asked n_ctx, past the trained one
        return f"{row.max_n_ctx} (asked)"
    return f"{row.max_n_ctx} (trained)" if n_ctx_train and row.max_n_ctx == n_ctx_train else str(row.max_n_ctx)


def row_fields(result: FitResult, *, projector: bool) -> tuple[Field, ...]:
    """The columns of a fit table; the mmproj column only where a projector is on the card (CSV: always)."""
    mm = frozenset({"table"}) if projector else frozenset()
    speed = frozenset({"table"}) if any(r.decode_ts for r in result.rows) else frozenset()
    return (
        Field("budget", "card", lambda r: r.budget_label, views=frozenset()),
        Field("budget_bytes", "budget", lambda r: r.budget_bytes, views=frozenset()),
        Field("n_ctx", "n_ctx", lambda r: r.settings.n_ctx, views=frozenset()),
        Field("cache_types", "K/V", lambda r: f"{r.settings.type_k}/{r.settings.type_v}"),
        Field("spec_type", "speculative", lambda r: spec_label(r.settings.spec_type),
              views=frozenset({"table"}) if len(result.spec_types) > 1 else frozenset()),
        Field("placement", "placement", lambda r: describe_row(r, result.n_layer_all)),
        Field("weights_bytes", "weights", lambda r: r.parts.weights, _gib, "r"),
        Field("kv_bytes", "KV", lambda r: r.parts.kv, _gib, "r"),
        Field("recurrent_bytes", "recurrent", lambda r: r.parts.recurrent, _gib, "r"),
        Field("compute_bytes", "compute", lambda r: r.parts.compute, _gib, "r"),
        Field("reserve_bytes", "reserve", lambda r: r.parts.reserve, _gib, "r"),
        Field("projector_bytes", "mmproj", lambda r: r.parts.projector, _gib, "r", mm),
        Field("total_bytes", "total", lambda r: r.parts.total, _gib, "r"),
        Field("host_bytes", "host RAM", ram_total, views=frozenset()),
        Field("host_now_bytes", "RAM now", ram_now, _gib, "r"),
        Field("host", "RAM grows to", host_text, align="r", csv=False),
        Field("host_growing_bytes", "host growing", lambda r: r.host.growing, _gib, "r", frozenset()),
        Field("fits", "fits", fits_text),
        Field("max_n_ctx_text", "max n_ctx", lambda r: max_ctx_text(r, result.n_ctx_train), align="r", csv=False),
        Field("max_n_ctx", "max n_ctx", lambda r: r.max_n_ctx or None, views=frozenset()),
        Field("decode_ts", "tg t/s (est.)", lambda r: r.decode_ts, lambda v: f"{v:.1f}", "r", speed),
        Field("command", "command", lambda r: run_line(result, r), views=frozenset()),
    )


def card_fields(n_cards: int, *, views=frozenset({"table"})) -> tuple[Field, ...]:
    """One column group per card of a machine (c0 first, in device order): its layers, weights, KV +
    recurrent, compute and total against its own budget."""
    out: list[Field] = []
    for i in range(n_cards):
        def card(r, i=i):
            return r.devices[i] if i < len(r.devices) else None
        out += [
            Field(f"card{i}_layers", f"c{i} layers", lambda r, c=card: c(r) and c(r).layers, align="r", views=views),
            Field(f"card{i}_weights_bytes", f"c{i} weights", lambda r, c=card: c(r) and c(r).parts.weights, _gib,
                  "r", views),
            Field(f"card{i}_kv_bytes", f"c{i} KV+rec", lambda r, c=card: c(r) and c(r).parts.kv + c(r).parts.recurrent,
                  _gib, "r", views),
            Field(f"card{i}_compute_bytes", f"c{i} compute", lambda r, c=card: c(r) and c(r).parts.compute, _gib, "r",
                  views),
            Field(f"card{i}_total_bytes", f"c{i} total", lambda r, c=card: c(r) and c(r).parts.total, _gib, "r", views),
        ]
    return tuple(out)


def multi_fields(result: FitResult, n_cards: int) -> tuple[Field, ...]:
    """The columns of a machine with several cards: placement, a group per card, the host and the verdict."""
    keep = {"budget", "budget_bytes", "n_ctx", "cache_types", "placement"}
    base = row_fields(result, projector=False)
    head = tuple(f for f in base if f.name in keep)
    tail = tuple(f for f in base if f.name in {"host_bytes", "host_now_bytes", "host", "host_growing_bytes", "fits",
                                                "max_n_ctx_text", "max_n_ctx", "command"})
    return head + card_fields(n_cards) + tail


def cards_line(rows: list[FitRow]) -> str:
    row = rows[0]
    names = ", ".join(f"c{i} = {c.name}" + (f" ({_gib(c.budget)} GiB free, remote)" if c.endpoint else "")
                      + (f", reserve {c.parts.reserve / MIB:.0f} MiB" if c.parts.reserve else "")
                      for i, c in enumerate(row.devices))
    return f"cards in device order: {names}; c0 layers come first, the last card holds the output layer"


def _rows_table(result: FitResult, rows: list[FitRow], fmt: str) -> str:
    n_cards = max(len(r.devices) for r in rows)
    if n_cards > 1:
        return cards_line(rows) + "\n" + table(rows, multi_fields(result, n_cards), fmt)
    return table(rows, row_fields(result, projector=any(r.parts.projector for r in rows)), fmt)


def pool_line(row: FitRow, server: bool = True) -> str:
    """A unified machine's one pool in words: the device's buffers and the host's (the file's pages once) against
    the RAM less the OS's share, beside the device's own ceiling."""
    pool = row.budget.pool
    shared = row.parts.total - row.parts.reserve + row.host.total - row.pool_bytes
    line = (f"   unified memory: device {_gib(row.card_total)} GiB of its {pool.ceiling_name} {_gib(row.budget.bytes)} "
            f"({'fits' if row.card_fits else 'does NOT fit'}); device + host "
            + (f"- {_gib(shared)} GiB of the file mapped twice " if shared else "")
            + f"= {_gib(row.pool_bytes)} GiB, the prompt cache and checkpoints at their bounds, of {row.ram.label} "
            f"({_gib(row.ram.bytes)} GiB): ")
    if row.ram_fits:
        return line + "fits"
    advice = RAM_FLAGS if server else RAM_ADVICE_LLAMA
    return (line + f"does NOT fit (short {_short(row.ram_short_by).lstrip('-')}); experts or layers \"in RAM\" do not "
            f"free the pool: shrink it with {advice}, a smaller n_ctx or a smaller quant")


# the backends whose device lists a pinned host buffer (CUDA_Host, ROCm's, Vulkan_Host): where the file is not mapped,
# the host's weights are read into it (src/llama-model.cpp:1093-1107 make_cpu_buft_list)
PINNED_HOST_BUFFERS = {"cuda": "CUDA_Host", "rocm": "ROCm_Host", "vulkan": "Vulkan_Host",
                       "vulkan-coopmat2": "Vulkan_Host"}


def host_line(row: FitRow, server: bool = True, machine_ram: int = 0, backend: str = "") -> str:
    """The host part in words: what llama.cpp puts in system RAM at start, and what the runtime grows
    (with --cpu-only everything: the card's parts are system RAM too); a warning where either passes the RAM of
    the machine the fit ran on (`machine_ram`, 0: not known)."""
    h = row.host
    if row.ram_mode:
        parts = [f"weights, KV, recurrent and compute {_gib(row.parts.total)}"]
    else:
        held = LoadMode(row.settings.load_mode).host_weights_words(PINNED_HOST_BUFFERS.get(backend, ""))
        parts = [f"weights {_gib(h.weights)} {held}", f"compute {_gib(h.compute)}"]
    if h.kv or h.recurrent:
        parts.append(f"KV + recurrent of host layers {_gib(h.kv + h.recurrent)}")
    if h.projector:
        parts.append(f"mmproj {_gib(h.projector)}")
    grows = []
    if h.prompt_cache or h.prompt_cache_unlimited:
        grows.append(f"prompt cache >= {_gib(h.prompt_cache)} (no size limit)" if h.prompt_cache_unlimited
                     else f"prompt cache <= {_gib(h.prompt_cache)}")
    if h.checkpoints:
        grows.append(f"checkpoints <= {_gib(h.checkpoints)}")
    total, now = ram_total(row), ram_now(row)
    line = (f"   system RAM: {_gib(now)} GiB at start" + (f", grows to {_gib(total)} GiB" if total != now else "")
            + f" ({', '.join(parts)}" + (f"; grows: {', '.join(grows)}" if grows else "") + ")")
    if machine_ram and row.ram is None and not row.ram_mode:
        if now > machine_ram:
            line += f"; MORE than this machine's {_gib(machine_ram)} GiB of RAM at start"
        elif total > machine_ram:
            line += (f"; can grow past this machine's {_gib(machine_ram)} GiB of RAM"
                     + (f" (shrink it with {RAM_FLAGS})" if server else ""))
    short = row.short_by if row.ram_mode else row.ram_short_by
    if row.ram is not None or row.ram_mode:
        label = row.budget.label if row.ram_mode else row.ram.label
        if not short:
            line += f" of {label}: fits"
        else:
            advice = RAM_FLAGS if server else RAM_ADVICE_LLAMA
            line += f" of {label}: does NOT fit (short {_short(short).lstrip('-')}); shrink it with {advice}"
            if server and 0 < short <= h.prompt_cache and not h.prompt_cache_unlimited:
                line += f" (--cache-ram {(h.prompt_cache - short) // MIB} would fit)"
    return line


def _speed_line(result: FitResult, rows: list[FitRow], best: FitRow) -> list[str]:
    """Why the pick is not the best KV type: the better KV's rows read more weights from system RAM per token."""
    better = min((r for r in rows if r.fits), key=quality)
    if better is best or quality(better)[0] >= quality(best)[0]:
        return []
    return [f"   chosen for speed: each token reads {_gib(best.ram_read_bytes)} GiB of weights from system RAM here, "
            f"{_gib(better.ram_read_bytes)} GiB with {better.settings.type_k}/{better.settings.type_v} KV "
            f"({describe_row(better, result.n_layer_all)}), and system RAM has about a tenth of a "
            "card's bandwidth"]


def _largest(result: FitResult, rows: list[FitRow]) -> list[str]:
    """Where nothing fits at the asked n_ctx: the largest context that does, with its KV type and command."""
    row = max(rows, key=lambda r: r.max_n_ctx)
    if not row.max_n_ctx:
        return []
    shorter = replace(row, settings=row.settings.replace(n_ctx=row.max_n_ctx))
    return [f"   the largest context that fits: {row.max_n_ctx:,} with {row.settings.type_k}/{row.settings.type_v} "
            f"KV, {describe_row(row, result.n_layer_all)}:", f"   {run_line(result, shorter)}"]


def _past_trained(result: FitResult, rows: list[FitRow]) -> list[str]:
    """Where the verdict is: a context past the model's trained one (llama.cpp runs it; its answers are untested)."""
    n_ctx, trained = rows[0].settings.n_ctx, result.n_ctx_train
    if not trained or n_ctx <= trained:
        return []
    return [f"-> n_ctx {n_ctx:,} is past the model's trained context {trained:,}: llama.cpp runs it, but what the "
            "model answers past it is untested"]


def _verdict(result: FitResult, rows: list[FitRow]) -> list[str]:
    return _past_trained(result, rows) + _verdict_lines(result, rows)


def _verdict_lines(result: FitResult, rows: list[FitRow]) -> list[str]:
    best = recommend(rows)
    if best:
        return [f"-> fits with {best.settings.type_k}/{best.settings.type_v} KV, "
                f"{describe_row(best, result.n_layer_all)}:",
                f"   {run_line(result, best)}", *_ram_lines(result, best), *_speed_line(result, rows, best)]
    lowerable = [r for r in rows if r.card_fits and _lowered(result, r)]
    if lowerable:  # the row recommended once llama-server's growing bounds are lowered to fit
        best_lowered = recommend([replace(r, ram=None) for r in lowerable])
        return _lowered(result, next(r for r in lowerable if replace(r, ram=None) == best_lowered))
    card_ok = [r for r in rows if r.card_fits]
    closest_overall = min(rows, key=lambda r: r.shortfall)
    if card_ok and not (closest_overall.pooled and not closest_overall.card_fits):
        # the row that would be recommended if the RAM were not checked (a unified machine: only where it is also
        # the closest; a row a few GiB past the working set beats one tens of GiB past the pool)
        best_on_card = recommend([replace(r, ram=None) for r in card_ok])
        row = next(r for r in card_ok if replace(r, ram=None) == best_on_card)
        card = f"the {row.budget.pool.ceiling_name}" if row.pooled else "the card"
        ram = "the RAM of the pool" if row.pooled else "the system RAM"
        return [f"-> fits {card} with {row.settings.type_k}/{row.settings.type_v} KV, "
                f"{describe_row(row, result.n_layer_all)}, but not {ram}:",
                f"   {run_line(result, row)}", *_ram_lines(result, row)]
    closest = min(rows, key=lambda r: r.shortfall)
    largest = max((r.max_n_ctx for r in rows), default=0)
    limit = f" of the {closest.budget.pool.ceiling_name}" if closest.pooled else ""
    # --cpu-only: the RAM is the budget, and the runtime's growing bounds may be what does not fit (say so)
    grows = _ram_lines(result, closest) if closest.ram_mode and closest.host.growing else []
    return [f"-> nothing fits: closest is {closest.settings.type_k}/{closest.settings.type_v} KV, "
            f"{describe_row(closest, result.n_layer_all)}, short{limit} by {_gib(closest.short_by)} "
            "GiB" + (f" and of the RAM by {_gib(closest.ram_short_by)} GiB" if closest.ram_short_by else "") + "; "
            f"largest context that fits: {largest or 'none'}", *_largest(result, rows), *grows,
            *_levers(result, closest)]


def _levers(result: FitResult, row: FitRow) -> list[str]:
    """What would make the closest row fit, where the machine allows it: a Mac's working set raised (--wired-limit,
    where the pool has room for the device's buffers), llama-server's growing bounds lowered, one slot, a smaller
    quant."""
    out = []
    pool = row.budget.pool
    if pool is not None and pool.backend == "metal" and not row.card_fits:
        need_mib = -(-row.card_total // MIB) + 256  # the device's buffers and a little room
        if need_mib * MIB < pool.usable:
            out.append(f"--wired-limit {need_mib} (sudo sysctl iogpu.wired_limit_mb={need_mib}): the working set "
                       f"raised to the device's {_gib(row.card_total)} GiB; the pool of {_gib(pool.usable)} GiB has "
                       "room for it")
    if result.runtime.is_server:
        h = row.host
        if h.prompt_cache or h.checkpoints:
            out.append(f"--cache-ram 0 and --ctx-checkpoints 0: llama-server's prompt cache and checkpoints may grow "
                       f"{_gib(h.growing)} GiB in RAM")
        if result.runtime.slots > 1:
            out.append(f"-np 1: one slot instead of {result.runtime.slots} (its checkpoints and state are per slot)")
    out.append("a smaller quant (fit -hf OWNER/REPO --quant all weighs each), or a smaller n_ctx")
    return ["   what would make it fit: " + out[0], *(f"   or: {x}" for x in out[1:])]


def _lowered(result: FitResult, row: FitRow) -> list[str]:
    """A row that fits the card but not the RAM only through what llama-server lets grow (its prompt cache, its
    checkpoints): the command at the asked context with bounds that fit, the bound that binds named."""
    runtime = result.runtime
    if not runtime.is_server:
        return []
    bounds = bounds_that_fit(row, runtime.cache_ram_mib, runtime.ctx_checkpoints)
    if bounds is None:
        return []
    lowered_runtime = replace(runtime, cache_ram_mib=bounds.cache_ram_mib, ctx_checkpoints=bounds.ctx_checkpoints)
    args = _with_flag(_with_flag(result.server_args, "--cache-ram", str(bounds.cache_ram_mib)), "--ctx-checkpoints",
                      str(bounds.ctx_checkpoints))
    lowered = replace(result, runtime=lowered_runtime, server_args=args)
    h = row.host
    each = h.checkpoints // runtime.ctx_checkpoints if runtime.ctx_checkpoints else 0
    host = replace(h, prompt_cache=bounds.cache_ram_mib * MIB, checkpoints=each * bounds.ctx_checkpoints)
    fitted = replace(row, host=host, pool_bytes=row.pool_bytes - (h.growing - host.growing) if row.pooled else 0)
    ram = "the RAM of the pool" if row.pooled else "the system RAM"
    binds = [f"--cache-ram {runtime.cache_ram_mib} (prompt cache <= {_gib(h.prompt_cache)} GiB)"]
    if bounds.ctx_checkpoints != runtime.ctx_checkpoints:
        binds.append(f"--ctx-checkpoints {runtime.ctx_checkpoints} (<= {_gib(h.checkpoints)} GiB)")
    return [f"-> fits at n_ctx {row.settings.n_ctx:,} with {row.settings.type_k}/{row.settings.type_v} KV, "
            f"{describe_row(row, result.n_layer_all)}, once llama-server's growing RAM is bounded "
            f"lower: what binds is {ram}, not the context: at {' and '.join(binds)} it could grow "
            f"{_gib(bounds.freed)} GiB past it:", f"   {run_line(lowered, fitted)}", *_ram_lines(lowered, fitted)]


def _with_flag(args: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    """The arguments with `flag`'s value set (replaced where given, appended where not)."""
    out = list(args)
    if flag in out:
        i = out.index(flag)
        if i + 1 < len(out):
            out[i + 1] = value
            return tuple(out)
    return (*out, flag, value)


def _ram_lines(result: FitResult, row: FitRow) -> list[str]:
    """The host part in words, and a unified machine's pool."""
    if not row.pooled:
        return [host_line(row, result.runtime.is_server, result.machine_ram, result.backend)]
    return [host_line(replace(row, ram=None), result.runtime.is_server, backend=result.backend),
            pool_line(row, result.runtime.is_server)]


def spec_label(spec_type: str) -> str:
    return {"none": "none", "draft-mtp": "MTP"}.get(spec_type, spec_type)


def _groups(result: FitResult):
    for budget in result.budgets:
        for n_ctx in result.contexts:
            rows = [r for spec in result.spec_types for r in result.rows_for(budget.label, n_ctx, spec)]
            if rows:
                yield budget, n_ctx, rows


def _verdicts(result: FitResult, rows: list[FitRow]) -> list[str]:
    """The verdict of each --spec-type sized, and what speculative decoding costs beside none."""
    kinds = result.spec_types
    if len(kinds) == 1:
        return _verdict(result, rows)
    out = []
    for kind in kinds:
        mine = [r for r in rows if r.settings.spec_type == kind]
        if mine:
            out.append("without speculative decoding:" if kind == "none" else f"with --spec-type {kind}:")
            out += ["  " + line for line in _verdict(result, mine)]
    out += _spec_cost(result, rows)
    return out


def _spec_cost(result: FitResult, rows: list[FitRow]) -> list[str]:
    """The same KV types and placement with and without speculative decoding: what it adds, part by part."""
    plain = {(r.settings.type_k, r.settings.type_v, r.placement): r for r in rows if r.settings.spec_type == "none"}
    lines = []
    for r in rows:
        base = plain.get((r.settings.type_k, r.settings.type_v, r.placement))
        if r.settings.spec_type == "none" or base is None or lines:
            continue
        parts = [(name, getattr(r.parts, name) - getattr(base.parts, name))
                 for name in ("weights", "kv", "recurrent", "compute")]
        extra, where = _gib(r.parts.total - base.parts.total), describe_row(r, result.n_layer_all)
        lines.append(f"{spec_label(r.settings.spec_type)} costs {extra} GiB more on the card{'s' if r.multi else ''} "
                     f"({r.settings.type_k}/{r.settings.type_v} KV, {where}: "
                     + ", ".join(f"{name} +{_gib(d)}" for name, d in parts)
                     + ")" + (f"; max n_ctx {r.max_n_ctx or 'none'} against {base.max_n_ctx or 'none'}"
                              if r.max_n_ctx or base.max_n_ctx else ""))
    return lines


def _sized_for(result: FitResult, row) -> str:
    """The backend an emulated card answered as, and whether op offload of host weights was counted."""
    rules = BACKENDS.get(result.backend)
    if rules is None:
        return ""
    if not rules.offloads:
        return f", sized as {rules.label} (no op offload)"
    return f", sized as {rules.label} (op offload {'counted' if row.settings.op_offload else 'off'})"


def render_text(result: FitResult, fmt: str = "text") -> str:
    if fmt == "csv":
        n_cards = max((len(r.devices) for r in result.rows), default=0)
        fields = row_fields(result, projector=True) + (card_fields(n_cards, views=frozenset()) if n_cards > 1 else ())
        return table(result.rows, fields, "csv")
    name = escaped(str(result.model_name))  # a file's general.name, or its path
    out = [f"{name} ({result.architecture}): fit at n_ctx {', '.join(map(str, result.contexts))}"
           + (f"; trained context {result.n_ctx_train:,}" if result.n_ctx_train else "")]
    for budget, n_ctx, rows in _groups(result):
        out.append("")
        size = (f"{budget.pool.ceiling_name} {_gib(budget.bytes)} GiB, {_gib(budget.pool.ram)} GiB of RAM less "
                f"{_gib(budget.pool.os_reserve)} for the OS" if budget.pool else f"budget {_gib(budget.bytes)} GiB")
        out.append(f"{budget.label} ({size}) at n_ctx {n_ctx}, flash attention "
                   f"{'on' if rows[0].settings.flash_attn else 'off'}{_sized_for(result, rows[0])}; parts in GiB")
        out.append(_rows_table(result, rows, fmt))
        out += _verdicts(result, rows)
    out += ["", "where each number comes from:"]  # below the answer: what a reader looks for first is the table
    out += [f"  {k:<10} {escaped(str(v))}" for k, v in result.basis.items()]  # -md and --mmproj name files
    out += [""] + [f"note: {escaped(str(n))}" for n in result.notes]  # a note can quote an error that names a file
    out.append(f"({len(result.rows)} row{'' if len(result.rows) == 1 else 's'} in {result.seconds:.1f} s)")
    return "\n".join(out)


def markdown_report(result: FitResult) -> str:
    out = [f"Sized for {result.runtime.describe()}: the context the printed command creates.\n"]
    for budget, n_ctx, rows in _groups(result):
        out.append(f"**{budget.label} {'cards' if budget.multi else 'card'}, n_ctx {n_ctx:,}** (GiB)\n")
        out.append(_rows_table(result, rows, "md"))
        verdict = _verdict(result, rows)  # the same words as the text view
        out.append("\nVerdict: " + verdict[0].removeprefix("-> "))
        if len(verdict) > 2:
            out.append(f"\n`{verdict[1].strip()}`\n\n{verdict[2].strip()}\n")
    out.append("Where each part comes from:\n")
    out += [f"- {k}: {escaped(str(v))}" for k, v in result.basis.items()]
    out += [f"- note: {escaped(str(n))}" for n in result.notes]
    return "\n".join(out)


PART_NAMES = {"kv": "KV"}


def _mib(n: int) -> str:
    return f"{n / MIB:.2f}"


def render_verification(v: FitVerification) -> str:
    if v.error and not v.placements:
        return f"verify: {escaped(str(v.error))}"
    out = []
    for check in v.placements:
        if check.error:
            out.append(f"verify: {check.what}: {escaped(str(check.error))}")
            continue
        out.append(f"verify: created {check.what} for real on {check.where}")
        rows = [(dev, part) for dev in check.devices for part in PARTS]
        fields = (
            Field("device", "device", lambda x: x[0].name),
            Field("part", "part", lambda x: PART_NAMES.get(x[1], x[1])),
            Field("predicted", "predicted MiB", lambda x: getattr(x[0].predicted, x[1]), _mib, "r"),
            Field("allocated", "llama.cpp MiB", lambda x: getattr(x[0].allocated, x[1]), _mib, "r"),
            Field("diff", "diff", lambda x: getattr(x[0].allocated, x[1]) - getattr(x[0].predicted, x[1]),
                  lambda b: f"{b / MIB:+.2f}".replace("-0.00", "+0.00"), "r"),
            Field("ok", "", lambda x: "ok" if x[0].part_ok(x[1]) else "MISMATCH"),
        )
        out.append(table(rows, fields, "text"))
        out.append(f"--cpu-only: the totals must agree within {RAM_TOLERANCE_WORDS} (file mapping)"
                   if check.ram_mode else
                   "predicted: the fit's own rows (compute from llama.cpp's dry run of the same placement and "
                   "context over the same kind of devices)")
        extra = f", process RSS grew {check.rss_delta / MIB:.2f} MiB" if check.rss_delta is not None else ""
        if check.gpu_delta is not None:
            extra += f", GPU memory used grew {check.gpu_delta / MIB:.2f} MiB (NVML)"
        cards = sum(1 for d in check.devices if d.name.startswith("card "))
        where = f"on the {cards} cards" if cards > 1 else "on the card"
        state = ("within" if check.within_budget else
                 f"OVER on {', '.join(check.cards_over_budget)}" if check.cards_over_budget else "OVER")
        out.append(f"{where}: {check.card_total / MIB:.2f} MiB of a {check.budget / MIB:.2f} MiB budget "
                   f"(after the reserve{'s, each card against its own' if cards > 1 else ''}): {state}{extra}; "
                   + ("prediction matches" if check.ok else "prediction MISSED")
                   + (f"; compute per card within {COMPUTE_TOLERANCE_WORDS} (llama.cpp's no_alloc projection keeps "
                      "its first prompt-graph reservation)" if cards > 1 else ""))
        if check.pool is not None:
            pool = check.pool
            out.append(f"unified memory: {pool.device} {pool.device_bytes / MIB:.2f} MiB of its ceiling "
                       f"{pool.ceiling_bytes / MIB:.2f} MiB ({'within' if pool.within_ceiling else 'OVER'}); with the "
                       f"host's {pool.host_bytes / MIB:.2f} MiB, {pool.pool_bytes / MIB:.2f} MiB of the RAM less the "
                       f"OS's share, {pool.ram_bytes / MIB:.2f} MiB ({'within' if pool.within_ram else 'OVER'})")
    return "\n".join(out)
