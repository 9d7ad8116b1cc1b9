"""The fit verdict in words: placement names, the llama-server / Llama() advice, text and markdown tables.

Shared by `llamabench fit` and `llamabench report`; prose about a fit lives here only.
"""

from __future__ import annotations

from ..cache_types import ggml_type_id
from ..fit.result import FitResult
from ..fit.search import FitRow, Placement, PlacementKind, recommend
from ..units import GIB, MIB
from .table import render_markdown, render_table

HEADERS = ["K/V", "placement", "weights", "KV", "recurrent", "compute", "reserve", "total", "fits", "max n_ctx"]
ALIGN = "llrrrrrrlr"


def describe_placement(p: Placement, n_layer_all: int) -> str:
    if p.kind is PlacementKind.ALL:
        return "all layers on the card"
    if p.kind is PlacementKind.RAM:
        return "everything in system RAM"
    if p.kind is PlacementKind.N_CPU_MOE:
        return f"experts of layers 0-{p.value - 1} in RAM (--n-cpu-moe {p.value})"
    if p.value > n_layer_all:
        return f"all {n_layer_all + 1} layers on the card (-ngl {p.value})"
    return f"{p.value} of {n_layer_all + 1} layers on the card (-ngl {p.value})"


def short_placement(p: Placement) -> str:
    """For plot labels: the flag alone."""
    return {PlacementKind.ALL: "all on card", PlacementKind.RAM: "all in RAM",
            PlacementKind.N_CPU_MOE: f"--n-cpu-moe {p.value}", PlacementKind.NGL: f"-ngl {p.value}"}[p.kind]


def _gib(n: int) -> str:
    return f"{n / GIB:.2f}"


def fits_text(row: FitRow) -> str:
    if row.fits:
        return "yes"
    short = row.short_by
    return f"no (-{_gib(short)})" if short >= GIB // 100 else f"no (-{short / MIB:.2f} MiB)"


def llama_cpp_command(result: FitResult, row: FitRow) -> str:
    s, p = row.settings, row.placement
    ngl = "99" if p.kind in (PlacementKind.ALL, PlacementKind.N_CPU_MOE) else str(p.value)
    cmd = f"llama-server -m {result.model_hint} -c {s.n_ctx} -ngl {ngl} -fa {'on' if s.flash_attn else 'off'}"
    cmd += f" -ctk {s.type_k} -ctv {s.type_v}"
    if p.kind is PlacementKind.N_CPU_MOE:
        cmd += f" --n-cpu-moe {p.value}"
    return " ".join([cmd, *result.server_args])


def python_call(result: FitResult, row: FitRow) -> str:
    if row.placement.kind is PlacementKind.N_CPU_MOE:
        # Llama() has no tensor buffer overrides, so it cannot keep experts in RAM: offer the -ngl row
        alt = [x for x in result.rows if x.budget_label == row.budget_label and x.settings == row.settings
               and x.placement.kind is PlacementKind.NGL and x.fits]
        if not alt:
            return "# llama_cpp.Llama() cannot keep experts in RAM (no tensor buffer overrides): use llama-server"
        return python_call(result, alt[0]) + "  # Llama() cannot keep experts in RAM: fewer layers on the card instead"
    s, p = row.settings, row.placement
    ngl = {PlacementKind.ALL: "-1", PlacementKind.RAM: "0"}.get(p.kind, str(p.value))
    return (f'llama_cpp.Llama(model_path="{result.model_hint}", n_ctx={s.n_ctx}, n_gpu_layers={ngl}, '
            f"flash_attn={s.flash_attn}, type_k={ggml_type_id(s.type_k)}, type_v={ggml_type_id(s.type_v)}, "
            f"swa_full=False)")


def _columns(rows: list[FitRow]) -> tuple[list[str], str]:
    """The table's headers: an mmproj column only when a projector is on the card."""
    if any(r.parts.projector for r in rows):
        return HEADERS[:7] + ["mmproj"] + HEADERS[7:], ALIGN[:7] + "r" + ALIGN[7:]
    return HEADERS, ALIGN


def _table_rows(result: FitResult, rows: list[FitRow]) -> list[list[str]]:
    projector = any(r.parts.projector for r in rows)
    return [[f"{r.settings.type_k}/{r.settings.type_v}", describe_placement(r.placement, result.n_layer_all),
             _gib(r.parts.weights), _gib(r.parts.kv), _gib(r.parts.recurrent), _gib(r.parts.compute),
             _gib(r.parts.reserve)] + ([_gib(r.parts.projector)] if projector else [])
            + [_gib(r.parts.total), fits_text(r), str(r.max_n_ctx) if r.max_n_ctx else "none"] for r in rows]


def _verdict(result: FitResult, rows: list[FitRow]) -> list[str]:
    best = recommend(rows)
    if best:
        return [f"-> fits with {best.settings.type_k}/{best.settings.type_v} KV, "
                f"{describe_placement(best.placement, result.n_layer_all)}:",
                f"   {llama_cpp_command(result, best)}", f"   {python_call(result, best)}"]
    closest = min(rows, key=lambda r: r.short_by)
    largest = max((r.max_n_ctx for r in rows), default=0)
    return [f"-> nothing fits: closest is {closest.settings.type_k}/{closest.settings.type_v} KV, "
            f"{describe_placement(closest.placement, result.n_layer_all)}, short by {_gib(closest.short_by)} GiB; "
            f"largest context that fits: {largest or 'none'}"]


def render_text(result: FitResult) -> str:
    out = [f"{result.model_name} ({result.architecture}): fit at n_ctx {', '.join(map(str, result.contexts))}"
           + (f"; trained context {result.n_ctx_train:,}" if result.n_ctx_train else "")]
    out += [f"  {k:<10} {v}" for k, v in result.basis.items()]
    for label, budget in result.budgets:
        for n_ctx in result.contexts:
            rows = result.rows_for(label, n_ctx)
            if not rows:
                continue
            out.append("")
            out.append(f"{label} (budget {_gib(budget)} GiB) at n_ctx {n_ctx}, flash attention "
                       f"{'on' if rows[0].settings.flash_attn else 'off'}; parts in GiB")
            headers, align = _columns(rows)
            out.append(render_table(headers, _table_rows(result, rows), align=align))
            out += _verdict(result, rows)
    out += [""] + [f"note: {n}" for n in result.notes]
    out.append(f"({len(result.rows)} rows in {result.seconds:.1f} s)")
    return "\n".join(out)


def render_markdown_report(result: FitResult) -> str:
    out = []
    for label, _ in result.budgets:
        for n_ctx in result.contexts:
            rows = result.rows_for(label, n_ctx)
            if not rows:
                continue
            out.append(f"**{label} card, n_ctx {n_ctx:,}** (GiB)\n")
            headers, align = _columns(rows)
            out.append(render_markdown(headers, _table_rows(result, rows), align=align))
            best = recommend(rows)
            if best:
                out.append(f"\nVerdict: fits. `{llama_cpp_command(result, best)}`\n\n`{python_call(result, best)}`\n")
            else:
                out.append("\nVerdict: nothing fits at this context.\n")
    out.append("Where each part comes from:\n")
    out += [f"- {k}: {v}" for k, v in result.basis.items()]
    out += [f"- note: {n}" for n in result.notes]
    return "\n".join(out)


def render_verification(v: dict) -> str:
    if "error" in v and not v.get("placements"):
        return f"verify: {v['error']}"
    out = []
    for check in v.get("placements", [v]):
        if "error" in check:
            out.append(f"verify: {check['what']}: {check['error']}")
            continue
        out.append(f"verify: created {check['what']} for real on {check['where']}")
        rows = []
        for dev in check["devices"]:
            for part in ("weights", "kv", "recurrent", "compute"):
                p, a = dev["predicted"][part], dev["allocated"][part]
                rows.append([dev["name"], {"kv": "KV"}.get(part, part), f"{p / MIB:.2f}", f"{a / MIB:.2f}",
                             f"{(a - p) / MIB:+.2f}".replace("-0.00", "+0.00"),
                             "ok" if dev["parts_ok"][part] else "MISMATCH"])
        out.append(render_table(["device", "part", "predicted MiB", "llama.cpp MiB", "diff", ""], rows,
                                align="llrrrl"))
        note = (f"compute predicted by llama.cpp's dry run of the same placement; the fit table's compute "
                f"estimate was {check['fit_compute_estimate'] / MIB:.2f} MiB") if not check["where"].startswith("system") else (
                "--ram: the totals must agree within 2 MiB + 0.5% (file mapping)")
        out.append(note)
        extra = f", process RSS grew {check['rss_delta'] / MIB:.2f} MiB"
        if check.get("gpu_delta") is not None:
            extra += f", GPU memory used grew {check['gpu_delta'] / MIB:.2f} MiB (NVML)"
        out.append(f"on the card: {check['card_total'] / MIB:.2f} MiB of a {check['budget'] / MIB:.2f} MiB budget "
                   f"(after the reserve): {'within' if check['within_budget'] else 'OVER'}{extra}; "
                   + ("prediction matches" if check["ok"] else "prediction MISSED"))
    return "\n".join(out)
