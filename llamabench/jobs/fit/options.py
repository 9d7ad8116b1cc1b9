"""fit's arguments, checked against each other and parsed into one `FitRequest` before any model is read.

Every check of `lb.fit` (and so of `llamabench fit`) is here, in the order they have always been made:
the schema's parameters, the budgets (--vram, --ram, --reserve, the --rpc hosts in front of the cards),
the runtime and what it can do, -sm none / -mg, and the size of the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from ...core.errors import UsageError
from ...core.units import GIB, MIB
from ...llama import rpc as rpc_backend
from ...llama.ggml_devices import METAL_NAMES
from ...llama.worker import device_memory
from ...memory.backends import DEFAULT_BACKEND
from ...memory.placement import Placement, PlacementKind
from ...memory.runtimes import RuntimeConfig, parse_runtime
from ...settings.budget import DEFAULT_OS_RESERVE, Budget, Card, UnifiedPool, unified_budget, with_wired_limit
from ...settings.cards import find_card
from ...settings.params import SCHEMA, Params
from ...settings.sweep import MAX_FIT_CELLS, cache_pairs, check_plan_size, parse_value
from ...settings.tensor_overrides import overrides_of, target
from ...settings.values import device_positions
from ...world import catalog, sysinfo
from ..arguments import call_values

FIT_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_ubatch", "n_gpu_layers", "n_cpu_moe", "tensor_split",
              "split_mode", "main_gpu", "spec_type", "spec_draft_n_max", "type_k_draft", "type_v_draft", "op_offload",
              "tensor_overrides", "cpu_moe", "load_mode")
FIT_LISTS = ("n_ctx", "type_k", "type_v", "n_gpu_layers", "n_cpu_moe")
FIT_DEFAULTS = {"type_k": ("f16", "q8_0", "q4_0"), "type_v": ("f16", "q8_0", "q4_0")}


@dataclass(frozen=True)
class FitRequest:
    """One fit, checked: the model to resolve, what to evaluate on which budgets, and how the session is opened."""

    model: str  # as given (error messages name it)
    location: str  # what to resolve: the model, or a catalog model's published quant (--remote)
    budgets: tuple[Budget, ...]  # as evaluated (--cpu-only: the RAM budget)
    machines: tuple[Budget, ...]  # as planned, the --rpc hosts in front (before --cpu-only's RAM budget)
    contexts: tuple[int, ...]
    pairs: tuple[tuple[str, str], ...]
    placements: tuple[Placement, ...]  # () : searched
    flash_attn: bool
    n_ubatch: int
    op_offload: bool  # llama.cpp's op offload of host weights (off: llama-server's --no-op-offload)
    reserve: int | tuple[int, ...]
    ram: Budget | None  # --ram
    runtime: RuntimeConfig
    cpu_only: bool = False
    emulate: bool = False
    backend: str | None = None  # the GPU backend emulated cards answer as (--backend, or the cards' own); None: none
    verify: bool = False
    rpc_hosts: tuple[str, ...] = ()
    dry_run_hosts: tuple[str, ...] = ()  # the --rpc hosts the dry runs use (-sm none: the -mg one, if remote)
    local_offset: int = 0  # -sm none -mg N: this machine's devices from the chosen one on
    tensor_split: tuple[float, ...] = ()
    server_args: tuple[str, ...] = ()  # --rpc, -sm none -mg N: llama-server flags the answer needs
    mmproj: str | None = None
    no_mmproj_offload: bool = False
    quant: str | None = None  # a catalog model's published quant whose file size the weights take
    # speculative decoding (llama-server): the --spec-type asked for (None: none, and draft-mtp beside it where the
    # model carries an MTP layer), its draft tokens and the draft context's cache types; spec_type is left "none"
    speculative: Params = Params()
    spec_given: str | None = None
    draft: str | None = None  # -md: llama-server's draft model (draft-simple), a GGUF file
    draft_ngl: int | None = None  # -ngld; None: all its layers on the card
    draft_devices: "tuple[str, tuple[int, ...]] | None" = None  # -devd: its names, and their places among the cards
    progress: "Callable[[str], None] | None" = None  # told a line at each dry run llama.cpp answers
    # llama.cpp's placement and load flags, as given: -ot's REGEX=BUFFER pieces, --cpu-moe, --load-mode
    tensor_overrides: tuple[str, ...] = ()
    cpu_moe: bool = False
    load_mode: str = "auto"

    @property
    def n_cards(self) -> int:
        """The most devices of one machine: what the session's dry runs are set up for."""
        return max(len(b.devices) for b in self.machines)

    @property
    def maps_file(self) -> bool:
        """A Mac: the device buffer maps the file (UnifiedPool.maps_file)."""
        return any(b.pool is not None and b.pool.maps_file for b in self.budgets)


def gpu_budgets() -> list[Budget]:
    """fit without --vram: on a GPU build, its GPUs' free memory now (ggml_backend_dev_memory, as llama-fit-params
    takes it), one machine of all of them, labelled so; elsewhere the 16 and 24 GiB cards to compare."""
    gpus = [d for d in device_memory() if d.is_local_gpu]
    if not gpus:
        return list(SCHEMA["vram"].default)
    if len(gpus) == 1 and gpus[0].unified:  # a Mac, an iGPU, GB10: one pool with the RAM, the device's own ceiling
        d = gpus[0]
        backend = "metal" if d.name.startswith(METAL_NAMES) else "vulkan" if d.name.startswith("Vulkan") else "cuda"
        return [Budget(f"{d.name} free {d.free_bytes / GIB:.2f}GiB", d.free_bytes,
                       pool=UnifiedPool(sysinfo.total_ram_bytes(), backend, f"{d.name}'s own figure now "
                                        "(ggml_backend_dev_memory: Metal's working set less what is held)"))]
    cards = tuple(Card(f"{d.name} free {d.free_bytes / GIB:.2f}GiB", d.free_bytes) for d in gpus)
    return [Budget("+".join(c.label for c in cards), sum(c.bytes for c in cards), cards if len(cards) > 1 else ())]


def fit_request(model: str, params: dict[str, Any], *, vram=None,
                ram=None, cpu_only: bool = False, reserve=None, verify: bool = False, emulate: bool = False,
                mmproj: str | None = None, no_mmproj_offload: bool = False, quant: str | None = None,
                remote: bool = False, runtime=None, n_seq=None, kv_unified=None, cache_ram=None, ctx_checkpoints=None,
                rpc=None, model_draft=None, n_gpu_layers_draft=None, device_draft=None, backend=None,
                unified: bool = False, wired_limit=None, progress=None) -> FitRequest:
    """`lb.fit`'s arguments checked and parsed (`params`: the schema's, by name); without --vram the budgets are
    a GPU build's free memory (`gpu_budgets`)."""
    given = {k: v for k, v in params.items()}
    for name, default in FIT_DEFAULTS.items():
        given.setdefault(name, default)
    values = call_values(given, FIT_PARAMS, FIT_LISTS)
    if vram is not None and not isinstance(vram, str) and hasattr(vram, "__len__") and len(vram) == 0:  # vram=[]
        raise UsageError("vram: empty list: give card sizes, or leave vram out")
    budgets = (list(parse_value("vram", vram, listed=True)) if vram is not None
               else list(SCHEMA["vram"].default) if cpu_only or emulate else gpu_budgets())
    budgets = [b for i, b in enumerate(budgets) if b.label not in {a.label for a in budgets[:i]}]  # once each
    reserve_bytes = parse_value("reserve", reserve, listed=False) if reserve is not None else SCHEMA["reserve"].default
    ram_budget = usable_ram(parse_value("ram", ram, listed=False)) if ram is not None else None
    if cpu_only and ram_budget is None:
        raise UsageError("--cpu-only puts everything in system RAM: give its size with --ram SIZE")
    if cpu_only and (vram is not None or reserve is not None):
        given = " and ".join(name for name, value in (("--vram", vram), ("--reserve", reserve)) if value is not None)
        raise UsageError(f"--cpu-only uses no card: {given} do{'es' if ' and ' not in given else ''} not apply",
                         hint="leave them out; --ram is the one budget")
    config = runtime_config(runtime, n_seq=n_seq, kv_unified=kv_unified or None, cache_ram=cache_ram,
                            ctx_checkpoints=ctx_checkpoints)
    contexts = list(values["n_ctx"])
    pairs = cache_pairs(values["type_k"], values["type_v"])
    placements = _placements(values, params)
    _check_runtime(config, placements, cache_ram is not None or ctx_checkpoints is not None)
    _check_overrides(values, config, cpu_only)
    if not config.is_server and "spec_type" in params and values["spec_type"] != "none":
        raise UsageError(f"--spec-type {values['spec_type']} is llama-server's: Llama() decodes without a draft",
                         hint="use --runtime llama-server, or leave out --spec-type")
    rpc_hosts = _check_devices(cpu_only, emulate, placements, rpc, budgets, config)
    budgets, reserve_bytes = unified_budgets(budgets, unified=unified, wired_limit=wired_limit, reserve=reserve,
                                             reserve_bytes=reserve_bytes, ram=ram_budget, backend=backend,
                                             cpu_only=cpu_only, rpc=rpc_hosts)
    if cpu_only:
        _check_no_card_flags(params, n_gpu_layers_draft, device_draft)
    budgets = with_remote_hosts(budgets, rpc_hosts)
    _check_device_lists(budgets, values["tensor_split"], reserve_bytes, rpc_hosts)
    _check_override_devices(values["tensor_overrides"], budgets, rpc_hosts)
    split = _split_mode(values, budgets, reserve_bytes, rpc_hosts)
    budgets = split.pop("budgets")
    check_plan_size("fit's evaluations", {"budgets": len(budgets), "contexts": len(contexts), "KV types": len(pairs),
                                          "placements": len(placements)}, MAX_FIT_CELLS)
    server_args: tuple[str, ...] = ("--rpc", ",".join(rpc_hosts)) if rpc_hosts else ()
    if values["split_mode"] == "none":
        server_args += ("-sm", "none", "-mg", str(values["main_gpu"]))
    return FitRequest(model, remote_model(model, quant) if remote else model,
                      tuple([ram_budget] if cpu_only else budgets),
                      tuple(budgets), tuple(contexts), tuple(pairs), tuple(placements),
                      values["flash_attn"], values["n_ubatch"], values["op_offload"], ram=ram_budget, runtime=config,
                      cpu_only=cpu_only, emulate=emulate, backend=target_backend(backend, budgets, cpu_only),
                      verify=verify, rpc_hosts=rpc_hosts, server_args=server_args, mmproj=mmproj,
                      no_mmproj_offload=no_mmproj_offload, quant=None if remote else quant,
                      speculative=Params(spec_draft_n_max=values["spec_draft_n_max"],
                                         type_k_draft=values["type_k_draft"], type_v_draft=values["type_v_draft"]),
                      spec_given=_spec_given(values, params, model_draft, config),
                      draft=_draft(model_draft),
                      draft_ngl=None if n_gpu_layers_draft is None else parse_value("n_gpu_layers_draft",
                                                                                     n_gpu_layers_draft, listed=False),
                      draft_devices=_draft_devices(device_draft, model_draft, budgets, rpc_hosts, cpu_only),
                      progress=progress if callable(progress) else None, tensor_overrides=values["tensor_overrides"],
                      cpu_moe=values["cpu_moe"], load_mode=values["load_mode"], **split)


def usable_ram(ram: Budget) -> Budget:
    """--ram SIZE less what the OS and its programs keep, as a Mac's pool keeps DEFAULT_OS_RESERVE: 4 GiB, or a
    quarter of a RAM under 16 GiB."""
    keep = min(DEFAULT_OS_RESERVE, ram.bytes // 4)
    size = "" if ram.label.endswith("iB") else f" ({ram.bytes / GIB:g} GiB)"  # 64GB: 64 GiB, said once
    kept = f"{keep / GIB:g} GiB" if keep >= GIB else f"{keep / MIB:.0f} MiB"  # 4 GiB; 97 MiB of a 388MiB --ram
    return Budget(f"{ram.label} RAM{size} less {kept} for the OS", ram.bytes - keep)


def unified_budgets(budgets: list[Budget], *, unified: bool, wired_limit, reserve, reserve_bytes, ram: Budget | None,
                    backend, cpu_only: bool, rpc: tuple[str, ...]) -> tuple[list[Budget], "int | tuple[int, ...]"]:
    """Unified machines (a named Mac, --vram SIZE --unified): one pool each, the device's ceiling the budget; the
    reserve is then the OS's share of the RAM, and the card keeps none of its own. A plain card's budgets pass."""
    if unified and cpu_only:
        raise UsageError("--cpu-only uses no GPU: --unified does not apply")
    if unified:
        chosen = parse_value("backend", backend, listed=False) if backend is not None else "metal"
        budgets = [unified_budget(b, chosen) for b in budgets]
    pooled = [b for b in budgets if b.pool is not None]
    if wired_limit is not None:
        if not pooled:
            raise UsageError("--wired-limit is a Mac's GPU ceiling: name one (--vram apple-m4-pro-24gb), or give "
                             "--vram SIZE --unified")
        limit = parse_value("wired_limit", wired_limit, listed=False)
        budgets = [with_wired_limit(b, limit) for b in budgets]
    if not pooled:
        return budgets, reserve_bytes
    _check_pools(budgets, pooled, ram, rpc, reserve_bytes)
    os_reserve = reserve_bytes if reserve is not None else DEFAULT_OS_RESERVE
    out = []
    for b in budgets:
        if os_reserve >= b.pool.ram:
            raise UsageError(f"--reserve {os_reserve / GIB:g} GiB leaves nothing of {b.label}'s RAM")
        chosen = b.pool.backend if backend is None else parse_value("backend", backend, listed=False)
        named = find_card(b.label)
        runs = named.runs if named is not None else (b.pool.backend,)
        if chosen not in runs:
            raise UsageError(f"{b.label} runs llama.cpp's {' or '.join(runs)} backend: --backend {backend} does not "
                             "apply")
        out.append(replace(b, pool=replace(b.pool, os_reserve=os_reserve, backend=chosen)))
    return out, 0


def _check_pools(budgets: list[Budget], pooled: list[Budget], ram: Budget | None, rpc: tuple[str, ...],
                 reserve_bytes) -> None:
    """What a unified machine does not take: a discrete card beside it, --ram, --rpc, a reserve per card."""
    if len(pooled) != len(budgets):
        raise UsageError("a unified machine and a discrete card size differently: compare them in two runs",
                         hint=f"unified here: {', '.join(b.label for b in pooled)}")
    if ram is not None:
        raise UsageError("a unified machine's RAM is its pool: --ram does not apply",
                         hint="its RAM comes with its name, or with --vram SIZE --unified")
    if rpc:
        raise UsageError("--rpc beside a unified machine is not sized: its remote hosts are discrete devices")
    if isinstance(reserve_bytes, tuple):
        raise UsageError("a unified machine has one reserve, the RAM kept for the OS: give one size")


def target_backend(given, budgets: list[Budget], cpu_only: bool) -> str | None:
    """The GPU backend a card sized without it answers as (memory.backends): --backend as given; else what the cards
    named in --vram run (an NVIDIA name CUDA, an AMD name Vulkan); else CUDA, what most who ask run. None with
    --cpu-only (no card)."""
    if cpu_only:
        if given is not None:
            raise UsageError("--cpu-only uses no card: --backend does not apply", hint="leave out --backend")
        return None
    if given is not None:
        return parse_value("backend", given, listed=False)
    named = {card.backend for b in budgets for d in b.devices if (card := find_card(d.label)) is not None}
    named |= {b.pool.backend for b in budgets if b.pool is not None}
    if len(named) > 1:
        raise UsageError(f"the cards named run different backends ({', '.join(sorted(named))}): one llama.cpp build "
                         "sizes one", hint="give --backend cuda|vulkan|rocm")
    return named.pop() if named else DEFAULT_BACKEND


def _spec_given(values: dict[str, Any], params: dict[str, Any], model_draft, config: RuntimeConfig) -> str | None:
    """The --spec-type asked for: as given; draft-simple where only a draft model is (-md); None: not asked."""
    given = values["spec_type"] if "spec_type" in params else None
    if model_draft is not None and not config.is_server:
        raise UsageError("-md is llama-server's draft model: Llama() decodes without one",
                         hint="use --runtime llama-server, or leave out -md")
    if model_draft is not None and given is None:
        return "draft-simple"
    return given


def _draft(model_draft) -> str | None:
    """-md: a GGUF file, a URL or a catalog id (checked when read)."""
    if model_draft is None:
        return None
    text = str(model_draft).strip()
    if not text:
        raise UsageError("-md: give the draft model (a GGUF file, a URL or a catalog id)")
    return text


def _draft_devices(device_draft, model_draft, budgets: list[Budget], rpc_hosts: tuple[str, ...],
                   cpu_only: bool) -> "tuple[str, tuple[int, ...]] | None":
    """-devd: the draft model's devices by llama.cpp's names, and each one's place among the cards (the --rpc hosts
    first, as llama.cpp orders its devices); None: the target's devices."""
    if device_draft is None:
        return None
    if model_draft is None:
        raise UsageError("-devd places the draft model: give it with -md")
    names = parse_value("device_draft", device_draft, listed=False)
    if cpu_only and names != "none":
        raise UsageError(f"-devd {names}: --cpu-only uses no card", hint="leave out -devd")
    positions = device_positions(names, len(rpc_hosts))
    n_cards = max(len(b.devices) for b in budgets)
    for name, position in zip(names.split(","), positions):
        if position >= n_cards:
            raise UsageError(f"-devd {name}: the fit has {n_cards} card(s), llama.cpp's devices 0 to {n_cards - 1} "
                             "(the --rpc hosts first)", hint="name one of them, or none")
    return names, positions


def _placements(values: dict[str, Any], params: dict[str, Any]) -> list[Placement]:
    """-ngl and --n-cpu-moe as given; none given (an empty list), or -ngl auto: fit searches the placements, as
    llama.cpp's -ngl auto fits them to the memory."""
    given = {name: values[name] if params.get(name) not in (None, (), []) else ()
             for name in ("n_gpu_layers", "n_cpu_moe")}
    if str(params.get("n_gpu_layers", "")).strip().lower() == "auto":
        given["n_gpu_layers"] = ()
    return ([Placement(PlacementKind.NGL, n) for n in given["n_gpu_layers"]]
            + [Placement(PlacementKind.N_CPU_MOE, n) for n in given["n_cpu_moe"]])


def _check_runtime(config: RuntimeConfig, placements: list[Placement], server_cache: bool) -> None:
    """What Llama() (llama-cpp-python) cannot do that llama-server can."""
    if not config.is_server and any(p.kind is PlacementKind.N_CPU_MOE for p in placements):
        raise UsageError("Llama() cannot keep experts in RAM (llama-cpp-python has no tensor buffer overrides)",
                         hint="use -ngl, or --runtime llama-server")
    if not config.is_server and server_cache:
        raise UsageError("--cache-ram and --ctx-checkpoints are llama-server's: Llama() keeps neither")


def _check_overrides(values: dict[str, Any], config: RuntimeConfig, cpu_only: bool) -> None:
    """-ot, --cpu-moe and --load-mode against the runtime and --cpu-only: Llama() takes no tensor override, and maps
    or not (use_mmap, use_mlock); with --cpu-only every tensor is in system RAM already."""
    placed = [flag for flag, given in (("-ot", values["tensor_overrides"]), ("--cpu-moe", values["cpu_moe"])) if given]
    if placed and not config.is_server:
        raise UsageError(f"Llama() takes no tensor buffer override (llama-cpp-python 0.3.36): {' and '.join(placed)} "
                         "do not apply", hint="use --runtime llama-server")
    if placed and cpu_only:
        raise UsageError(f"--cpu-only puts every tensor in system RAM: {' and '.join(placed)} do not apply")
    if values["load_mode"] == "dio" and not config.is_server:
        raise UsageError("--load-mode dio: Llama() maps or reads the file (use_mmap, use_mlock), no direct I/O")


def _check_override_devices(tensor_overrides: tuple[str, ...], budgets: list[Budget],
                            rpc_hosts: tuple[str, ...]) -> None:
    """Each device an -ot names is one of every machine's (CUDA1 needs two cards, the --rpc hosts first)."""
    for override in overrides_of(tensor_overrides, False):
        where = target(override, rpc_hosts)
        for b in budgets:
            n = max(1, len(b.devices))
            if where is not None and where >= n:
                raise UsageError(f"-ot {override.text}: {b.label} has {n} device(s), llama.cpp's 0 to {n - 1} (the "
                                 "--rpc hosts first)", hint="name a device of the machine, or CPU")


def _check_devices(cpu_only: bool, emulate: bool, placements: list[Placement], rpc_given, budgets: list[Budget],
                   config: RuntimeConfig) -> tuple[str, ...]:
    """--cpu-only against the options that name devices, and the --rpc hosts (parsed) against the runtime."""
    if cpu_only and emulate:
        raise UsageError("--cpu-only puts everything in system RAM: it does not go with --emulate (a card)")
    if cpu_only and placements:
        raise UsageError("--cpu-only puts everything in system RAM: it does not go with -ngl or --n-cpu-moe")
    rpc_hosts = parse_value("rpc", rpc_given, listed=False) if rpc_given not in (None, "", ()) else ()
    if cpu_only and (rpc_hosts or any(b.multi for b in budgets)):
        raise UsageError("--cpu-only puts everything in system RAM: it does not go with several cards or --rpc")
    if rpc_hosts and not config.is_server:
        raise UsageError("Llama() cannot reach remote hosts (llama-cpp-python 0.3.36 has no --rpc)",
                         hint="use --runtime llama-server")
    return rpc_hosts


def _check_no_card_flags(params: dict[str, Any], n_gpu_layers_draft, device_draft) -> None:
    """--cpu-only with a flag that only places on cards: a contradiction, refused rather than silently dropped."""
    placed = [flag for flag, name in (("-ts", "tensor_split"), ("-sm", "split_mode"), ("-mg", "main_gpu"))
              if params.get(name) not in (None, (), [], "", SCHEMA[name].default, (SCHEMA[name].default,))]
    given = placed + [flag for flag, value, in_ram in (("-ngld", n_gpu_layers_draft, (0, "0")),
                                                       ("-devd", device_draft, ("none",)))
                      if value not in (None, (), [], "", *in_ram)]  # -ngld 0 and -devd none: the draft in RAM too
    if given:
        raise UsageError(f"--cpu-only uses no card: {', '.join(given)} do{'es' if len(given) == 1 else ''} not apply",
                         hint="leave them out, or leave out --cpu-only")


def _check_device_lists(budgets: list[Budget], tensor_split, reserve_bytes, rpc_hosts: tuple[str, ...]) -> None:
    """-ts and a --reserve list give one value per device of every machine."""
    for b in budgets:
        if tensor_split and len(tensor_split) != len(b.devices):
            raise UsageError(f"-ts gives {len(tensor_split)} proportions, but {b.label} has {len(b.devices)} devices")
        if isinstance(reserve_bytes, tuple) and len(reserve_bytes) != len(b.devices):
            raise UsageError(f"--reserve gives {len(reserve_bytes)} sizes, but {b.label} has {len(b.devices)} devices"
                             + (" (the --rpc hosts come first)" if rpc_hosts else ""))


def _split_mode(values: dict[str, Any], budgets: list[Budget], reserve_bytes,
                rpc_hosts: tuple[str, ...]) -> dict[str, Any]:
    """-sm none: one device, the -mg card, with its own reserve and no -ts; else the machines as they are."""
    if values["split_mode"] == "none":
        mg = values["main_gpu"]
        return {"budgets": split_mode_budgets(budgets, "none", mg),
                "reserve": reserve_bytes[mg] if isinstance(reserve_bytes, tuple) else reserve_bytes,
                "tensor_split": (), "dry_run_hosts": (rpc_hosts[mg],) if mg < len(rpc_hosts) else (),
                "local_offset": max(0, mg - len(rpc_hosts))}
    if values["main_gpu"]:
        raise UsageError("-mg picks the device of -sm none: give -sm none with it")
    return {"budgets": budgets, "reserve": reserve_bytes, "tensor_split": values["tensor_split"],
            "dry_run_hosts": rpc_hosts, "local_offset": 0}


def split_mode_budgets(budgets: list[Budget], split_mode: str, main_gpu: int) -> list[Budget]:
    """-sm none: the model on the -mg device alone, so each machine is sized by that one card."""
    if split_mode != "none":
        return budgets
    out = []
    for b in budgets:
        if main_gpu >= len(b.devices):
            raise UsageError(f"-mg {main_gpu}: {b.label} has {len(b.devices)} device(s), numbered from 0")
        card = b.devices[main_gpu]
        out.append(Budget(card.label, card.bytes, (card,) if card.remote else ()))
    return out


def with_remote_hosts(budgets: list[Budget], endpoints: tuple[str, ...]) -> list[Budget]:
    """Each --vram alternative with the --rpc hosts in front (llama.cpp puts RPC servers first), each host's
    budget its free memory as the running ggml-rpc-server reports it."""
    if not endpoints:
        return budgets
    rpc_backend.distinct_servers(tuple(endpoints))
    remote = tuple(Card(ep, rpc_backend.remote_memory(ep)[0], ep) for ep in endpoints)
    out = []
    for b in budgets:
        cards = remote + b.devices
        out.append(Budget("+".join(c.label for c in cards), sum(c.bytes for c in cards), cards))
    return out


def remote_model(model_id: str, quant: str | None) -> str:
    """The hf:// path of a catalog model's published quant."""
    entry = catalog.get_entry(model_id)
    quants = {q.name: q for q in entry.published_quants if q.hf}
    name = quant or "Q4_K_M"
    if name not in quants:
        raise UsageError(f"{model_id}: no Hugging Face location for {name} in the catalog",
                         hint="published with a location: " + (", ".join(quants) or "none"))
    return "hf://" + quants[name].hf


def runtime_config(runtime=None, *, n_seq=None, kv_unified=None, cache_ram=None,
                   ctx_checkpoints=None) -> RuntimeConfig:
    """The runtime a fit sizes, from the keywords as the schema spells them (None: the runtime's default)."""
    def value(name, raw):
        return parse_value(name, raw, listed=False) if raw is not None else SCHEMA[name].default

    return RuntimeConfig(parse_runtime(value("runtime", runtime)),
                         n_parallel=None if n_seq is None else parse_value("n_seq", n_seq, listed=False),
                         kv_unified=None if kv_unified is None else parse_value("kv_unified", kv_unified, listed=False),
                         cache_ram_mib=value("cache_ram", cache_ram),
                         ctx_checkpoints=value("ctx_checkpoints", ctx_checkpoints))
