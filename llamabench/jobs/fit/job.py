"""The `fit` job: gather the four parts (weights, KV + state, compute, reserve) and search.

The I/O side of `search.py`: picks the file llama.cpp sizes (the GGUF itself, or a full-size shape
twin for a catalog id), reads its tensor infos for the weights and runs the dry runs that give the
compute buffer. `run_fit` runs one checked `FitRequest` (options.py): resolve, open, evaluate, verify.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ...core.errors import LlamabenchError, Stalled, UsageError
from ...core.units import GIB, MIB
from ...llama import ggml_devices, rpc
from ...memory import speculative
from ...memory.backends import VULKAN_RANGE_ENV, BackendRules, emulates, rules_for
from ...memory.fit_result import FitResult
from ...memory.placement import Placement, PlacementKind
from ...memory.runtimes import RuntimeConfig
from ...model.architectures import no_rule_reason
from ...model.geometry import ModelGeometry
from ...model.layout import geometry_from_metadata, has_layout_rule, measured_geometry
from ...model.metadata import ModelMetadata
from ...model.projector import Projector, projector_from_metadata
from ...model.quants import imatrix_note
from ...model.validate import check_for_llama
from ...model.weights import WeightsBreakdown, breakdown
from ...records.fit import FitVerification
from ...settings.budget import Budget
from ...settings.params import Params
from ...settings.tensor_overrides import LoadMode, Placer, overrides_of
from ...world import remote as remote_reader
from ...world import sysinfo
from ..source import ModelSource, read_any, resolve
from ..twin.shape import file_in_quant, published_weights
from .basis import fit_basis, pool_basis, spec_words
from .options import FitRequest
from .overrides import matched, placement_words
from .probe import ComputeProbe
from .search import Fitter
from .speed import with_speeds
from .verify import verify_fit


@dataclass(frozen=True)
class FitAnswer:
    """What one fit found: the model it resolved, the answer, and --verify's comparison (None without it)."""

    source: ModelSource
    result: FitResult
    verification: FitVerification | None = None


def run_fit(request: FitRequest, source: ModelSource | None = None) -> FitAnswer:
    """Resolve the model (unless `source` is it, read already), open a session on it, add the projector and
    evaluate every budget, context, KV pair and placement; with --verify, create the answer for real and compare."""
    source = source or resolve(request.location)
    if source.url and request.verify:
        raise UsageError(f"--verify creates the model for real: download {source.url} (llamabench read only its "
                         "header) and give the file, or verify a catalog id on its twin")
    start = time.perf_counter()
    session = FitSession.open(source, flash_attn=request.flash_attn, n_ubatch=request.n_ubatch,
                              reserve=request.reserve, verify=request.verify, ram_mode=request.cpu_only,
                              runtime=request.runtime, ram=None if request.cpu_only else request.ram,
                              remote=request.dry_run_hosts, n_cards=request.n_cards,
                              tensor_split=request.tensor_split, local_offset=request.local_offset,
                              emulate=request.emulate, backend=request.backend, op_offload=request.op_offload,
                              quant=request.quant,
                              spec_params=request.speculative, spec_given=request.spec_given,
                              draft=request.draft is not None)
    session.maps_file = request.maps_file
    session.place_tensors(request.tensor_overrides, request.cpu_moe, request.load_mode)
    if any(b.pool is not None for b in request.budgets):
        session.basis.update(pool_basis(request.budgets))
    if request.draft is not None:
        session.add_draft(request.draft, request.draft_ngl, request.draft_devices)
    if request.progress is not None:
        session.tell(request.progress)
    server_args = request.server_args + session_args(request, source, session)
    session.model_words = source.llama_words()
    if session.model_words[:1] == ("-hf",) and not request.mmproj:
        session.model_words += ("--no-mmproj",)  # -hf loads the repository's projector too, unless told not to
    if any(p.kind is PlacementKind.N_CPU_MOE for p in request.placements) and not session.weights.has_experts():
        raise UsageError(f"{request.model} has no routed experts: --n-cpu-moe does not apply")
    result = session.evaluate(list(request.budgets), trained_contexts(request.contexts, session.geometry),
                              list(request.pairs),
                              list(request.placements) or None, server_args=server_args)
    result = replace(result, seconds=time.perf_counter() - start)
    verification = verify_fit(result, session, given=bool(request.placements)) if request.verify else None
    return FitAnswer(source, result, verification)


def trained_contexts(contexts: tuple[int, ...], geometry: ModelGeometry) -> list[int]:
    """-c 0 is the trained context, as llama.cpp reads it (n_ctx 0: n_ctx_train), each context once."""
    if 0 in contexts and not geometry.n_ctx_train:
        raise UsageError(f"n_ctx 0 is the trained context, and {geometry.architecture}'s file states none: give -c")
    return list(dict.fromkeys(c or geometry.n_ctx_train for c in contexts))


def session_args(request: FitRequest, source: ModelSource, session: "FitSession") -> tuple[str, ...]:
    """The llama-server flags the session adds: -dev none (--cpu-only on a GPU build) and the projector
    (--mmproj, read and added to the session: on the card, or in system RAM with --no-mmproj-offload)."""
    out: tuple[str, ...] = ()
    mmproj = request.mmproj
    if mmproj == "published":
        if not (source.entry and source.entry.mmproj):
            raise UsageError(f"{request.model}: the catalog names no published projector for it")
        mmproj = "hf://" + source.entry.mmproj
    if request.cpu_only and session.gpu_build and request.runtime.is_server:
        out += ("-dev", "none")  # no device, as sized: no GPU buffers for offloaded ops
    if mmproj:
        session.add_projector(projector_from_metadata(read_any(mmproj)), offload=not request.no_mmproj_offload)
        shown = remote_reader.redact(mmproj) if remote_reader.is_remote(mmproj) else mmproj  # printed: no password
        out += ("--mmproj", shown) + (("--no-mmproj-offload",) if request.no_mmproj_offload else ())
    return out


def fit_geometry(meta: ModelMetadata) -> ModelGeometry:
    """The layout fit sizes the caches with: the architecture's rule, checked for what would make llama.cpp abort;
    without a rule, llama.cpp's own caches from the dry run at every n_ctx tried (`measured_geometry`)."""
    if not has_layout_rule(meta):
        return measured_geometry(meta, no_rule_reason(meta.architecture))
    geometry = geometry_from_metadata(meta)
    check_for_llama(meta, geometry)
    return geometry


def spec_variants(geometry: ModelGeometry, meta: ModelMetadata, runtime: RuntimeConfig,
                  given: str | None, *, draft_model: bool = False) -> tuple[str, ...]:
    """The --spec-type choices sized side by side: none always; draft-mtp beside it where the model carries an MTP
    layer (or it was asked for), or the asked ngram type. A choice this model or llamabench cannot size is a
    UsageError."""
    if not runtime.is_server or given == speculative.NONE:
        return (speculative.NONE,)
    if given is not None:
        speculative.check(geometry, Params(spec_type=given), meta.source, draft_model=draft_model)
    mtp_in_file = bool(geometry.mtp_layers) and bool(_mtp_tensors(meta, geometry))
    if given == speculative.MTP and not mtp_in_file:
        raise UsageError(f"{meta.source}: the file carries no tensors of its MTP layer "
                         f"(blk.{geometry.mtp_layers[0].index}.*: converted without it): --spec-type draft-mtp "
                         "cannot load it", hint="leave out --spec-type")
    if given is None:
        return (speculative.NONE, speculative.MTP) if mtp_in_file else (speculative.NONE,)
    return (speculative.NONE, given)


def _mtp_tensors(meta: ModelMetadata, geometry: ModelGeometry) -> set[str]:
    """The file's tensors of the NextN layers the MTP context runs (loaded only with --spec-type draft-mtp)."""
    prefixes = tuple(f"blk.{il}." for il in speculative.mtp_layer_indices(geometry))
    return {t.name for t in meta.tensors if t.name.startswith(prefixes)} if prefixes else set()


def loaded_tensors(meta: ModelMetadata, geometry: ModelGeometry, spec: str) -> tuple:
    """The tensors llama-server loads with this --spec-type: the NextN layers' only with draft-mtp (TENSOR_SKIP
    otherwise: src/models/qwen35moe.cpp:41, src/models/glm4-moe.cpp:38-40; common/common.cpp:1625 load_mtp)."""
    skipped = set() if spec == speculative.MTP else _mtp_tensors(meta, geometry)
    return tuple(t for t in meta.tensors if t.name not in skipped)


def file_weights(file: "_WeightsFile", geometry: ModelGeometry, loaded: tuple) -> WeightsBreakdown:
    """The weights of these tensors of the file, layer by layer (a published size: their share of it)."""
    recurrent = {layer.index for layer in geometry.layers if layer.has_recurrent_state}
    return breakdown(loaded, geometry.n_layer, recurrent, basis=file.basis, scale_to_bytes=_share(file, loaded),
                     by_bytes=file.by_bytes)


def _share(file: "_WeightsFile", loaded: tuple) -> int | None:
    """A published file size, the share of it these tensors hold (by their bytes in a typed twin, else by element
    count): the whole file's tensors carry it, and a --spec-type that skips some loads less."""
    if file.scale is None:
        return None
    weight = {t.name: t.n_bytes if file.by_bytes else int(np.prod(t.shape, dtype=np.int64)) for t in file.meta.tensors}
    every = sum(weight.values()) or 1
    return round(file.scale * sum(weight[t.name] for t in loaded) / every)


@dataclass(frozen=True)
class _Devices:
    """What a session sizes on: this build's GPUs, emulated cards or system RAM, and that in words."""

    gpu_devices: tuple[str, ...]
    emulate: bool
    cards: str  # the devices, in words
    backend: str  # where the compute buffers are sized, in words (the cards, how they answer, system RAM)
    rules: BackendRules | None = None  # the GPU backend the emulated cards answer as (None: no emulated card)

    @property
    def gpu_build(self) -> bool:
        return bool(self.gpu_devices)


def _devices(*, n_cards: int, remote: tuple[str, ...], ram_mode: bool, emulate: bool, backend: str | None = None,
             op_offload: bool = True) -> _Devices:
    gpu_devices = tuple(ggml_devices.gpu_devices())
    gpu_build = bool(gpu_devices)
    n_local = max(0, n_cards - len(remote))
    if n_cards > 1 and not ram_mode and not rpc.available() and n_local > len(gpu_devices):
        raise LlamabenchError(f"{n_cards} cards need llama.cpp's RPC backend to be emulated here (this build has "
                              f"{len(gpu_devices)} GPU(s)): reinstall llama-cpp-python with CMAKE_ARGS=-DGGML_RPC=on "
                              "(make install does)")
    # a GPU build sizes on its own GPUs where it has as many as the cards planned; else on emulated cards
    if emulate and not rpc.available():
        raise LlamabenchError("--emulate needs llama.cpp's RPC backend: reinstall llama-cpp-python with "
                              "CMAKE_ARGS=-DGGML_RPC=on (make install does)")
    emulate = not ram_mode and rpc.available() and (emulate or not gpu_build or n_local > len(gpu_devices))
    cards = ("the remote hosts (--rpc) and " if remote else "") + (
        f"{n_local} emulated cards (one llama.cpp RPC device on 127.0.0.1 each)" if n_local > 1 and emulate
        else "an emulated card (llama.cpp's RPC device on 127.0.0.1)" if emulate
        else f"this build's {', '.join(gpu_devices[:max(n_local, 1)])}")
    rules = rules_for(backend, os.environ) if emulate and n_local else None
    answering = "" if rules is None else " " + _answering_as(rules, op_offload)
    words = ("system RAM (CPU)" if ram_mode or not (emulate or gpu_build) else f"{cards}{answering} and system RAM")
    return _Devices(gpu_devices, emulate, cards, words, rules)


def _answering_as(rules: BackendRules, op_offload: bool) -> str:
    """How an emulated card answers for the backend it stands for, in words."""
    if not rules.offloads:
        return "answering as the CPU behind it (--backend cpu: no op offload of host weights)"
    offload = ("op offload of host weights counted (a batch of 32 or more copies them to the card, "
               "ggml_backend_sched)" if op_offload else "op offload off (--no-op-offload)")
    extra = ("; CUDA's room for flash attention of a quantized cache (its K/V converted to f16)"
             if rules.cuda_alloc_size else "; Vulkan's largest tensor and node order" if rules.vulkan_order else "")
    return f"answering as {rules.label} does: {offload}{extra}"


@dataclass(frozen=True)
class _WeightsFile:
    """The file whose tensor infos give the weights (and whose dry runs give the compute buffers)."""

    path: str
    meta: ModelMetadata  # with tensor infos
    basis: str  # where the weights' bytes come from, in words
    hint: str  # the file name the advice lines use
    scale: int | None = None  # a published file size the tensors are scaled to (a catalog id's shape twin)
    by_bytes: bool = False  # spread over the tensors by their bytes in their types (a typed twin), not by count


def _weights_file(source: ModelSource, verify: bool, quant: str | None = None) -> _WeightsFile:
    """The GGUF itself, a catalog id's geometry twin (--verify runs on it), else a full-size shape twin; --quant is
    a catalog model's published quant, never ignored: refused in one line where it cannot be honoured."""
    if quant is not None and verify:
        raise UsageError(f"--quant {quant} with --verify: verify runs llama.cpp on the geometry twin, whose weights "
                         "are not that quant", hint="leave out --verify, or --quant")
    if quant is not None and (source.path or source.url):  # the file as llama-quantize would write it in that quant
        requant = file_in_quant(source, quant)
        return _WeightsFile(str(source.gguf_for_llama()), requant.meta, requant.basis + "; compute buffers from the "
                            "file as it is (a dry run on its own tensors)", requant.hint)
    if verify or source.path:
        path = str(source.gguf_for_llama())
        meta = source.llama_metadata
        what = ("the GGUF's tensor infos" if source.path
                else "the geometry twin's tensor infos (verify runs on the twin)")
        hint = path if source.path else f"{source.label}-twin.gguf"
        if source.url:  # a remote file: its name in the repository, or its URL (never the header-only cached copy)
            hint = source.repo_file() or source.url
        return _WeightsFile(path, meta, f"{what}: {meta.weights_bytes / GIB:.2f} GiB in the file", hint)
    twin = published_weights(source, quant)  # UsageError for a quant neither published nor a llama.cpp file type
    needs = imatrix_note(quant, None) if twin.quant is None and quant else None
    basis = twin.basis + (f"; {needs}" if needs else "")
    return _WeightsFile(str(twin.path), twin.meta, basis, twin.hint, twin.scale, twin.by_bytes)


def _weights_words(file: _WeightsFile, weights: WeightsBreakdown, devices: _Devices, *, ram_mode: bool,
                   remote: tuple[str, ...]) -> str:
    """The weights' basis: the file, where llama.cpp places them, and whose backend decided what each card takes."""
    on_card = ("; all in system RAM (--ram budget)" if ram_mode else
               "; placed tensor by tensor as llama.cpp does: input embeddings in system RAM, the output matrix "
               "with the output layer" + (" (token_embd loaded a second time: tied embeddings)"
                                           if weights.tied_output_bytes else ""))
    if ram_mode:
        backend_weights = ""
    elif file.scale is not None:  # a published size spread over the shape twin's tensors: not the backend's bytes
        backend_weights = "; assumes a backend that takes every tensor type (no file of that size to dry-run)"
    elif devices.rules is not None and devices.rules.max_tensor_bytes:
        backend_weights = (f"; what each card takes read from llama.cpp's dry run on {devices.cards}"
                           f" refusing, as {devices.rules.label} does, an op on a tensor over "
                           f"{devices.rules.max_tensor_bytes / MIB:,.0f} MiB (maxStorageBufferRange; "
                           f"{VULKAN_RANGE_ENV} sets the target card's)")
    elif remote or (devices.gpu_build and not devices.emulate):
        backend_weights = (f"; what each device takes read from llama.cpp's dry run on {devices.cards} (a backend "
                           "may refuse a tensor's type or size: llama_model::load_tensors asks buft_supported, and "
                           "done_getting_tensors logs it kept on the CPU)")
    else:
        sized_on = (f"{devices.rules.label} does" if devices.rules is not None and emulates(devices.rules.name)
                    else "the emulated card it was sized on does (llama.cpp's RPC backend on this CPU)"
                    if devices.emulate else "this CPU build does")
        backend_weights = (f"; assumes a backend that takes every tensor type, as {sized_on}; a CUDA, Vulkan or "
                           "Metal build may keep some on the CPU, and `fit` run on that build reads them from "
                           "its backend")
    return file.basis + on_card + backend_weights


class FitSession:
    def __init__(self, *, name: str, geometry: ModelGeometry, weights: WeightsBreakdown, probe: ComputeProbe,
                 basis: dict, model_hint: str, gpu_build: bool, verify_path: str | None, flash_attn: bool,
                 n_ubatch: int, reserve: int, notes: list[str], runtime: RuntimeConfig, ram: Budget | None):
        self.name, self.geometry, self.weights, self.probe = name, geometry, weights, probe
        self.basis, self.model_hint, self.gpu_build, self.verify_path = basis, model_hint, gpu_build, verify_path
        self.flash_attn, self.n_ubatch, self.reserve, self.notes = flash_attn, n_ubatch, reserve, notes
        self.runtime, self.ram = runtime, ram

    ram_mode = False  # --cpu-only: everything in system RAM, the budget is RAM, no reserve
    maps_file = False  # a Mac: the card's weights are the file's span Metal maps (UnifiedPool.maps_file)

    @classmethod
    def open(cls, source: ModelSource, *, flash_attn: bool, n_ubatch: int, reserve: int, verify: bool,
             ram_mode: bool = False, runtime: RuntimeConfig = RuntimeConfig(),
             ram: Budget | None = None, remote: tuple[str, ...] = (), n_cards: int = 1,
             tensor_split: tuple[float, ...] = (), local_offset: int = 0, emulate: bool = False,
             backend: str | None = None, op_offload: bool = True, quant: str | None = None,
             spec_params: Params = Params(), spec_given: str | None = None, draft: bool = False) -> "FitSession":
        devices = _devices(n_cards=n_cards, remote=remote, ram_mode=ram_mode, emulate=emulate, backend=backend,
                           op_offload=op_offload)
        gpu_devices, gpu_build, emulate = devices.gpu_devices, devices.gpu_build, devices.emulate
        file = _weights_file(source, verify, quant)
        speculative.check_not_a_head(file.meta.architecture, source.label, "fit")
        geometry = fit_geometry(file.meta)
        spec_types = spec_variants(geometry, file.meta, runtime, spec_given, draft_model=draft)
        weights_of = {kind: file_weights(file, geometry, loaded_tensors(file.meta, geometry, kind))
                      for kind in spec_types}
        weights = weights_of[spec_types[0]]
        basis = fit_basis(source, weights=_weights_words(file, weights, devices, ram_mode=ram_mode, remote=remote),
                       geometry=geometry, devices=devices, verify=verify, ram_mode=ram_mode, n_cards=n_cards,
                       reserve=reserve, runtime=runtime, ram=ram)
        if file.scale is not None and not file.by_bytes and devices.rules is not None and devices.rules.offloads \
                and op_offload:  # a compact twin: llama.cpp has no recipe for the quant
            basis["compute"] += ("; the weights a batch copies to the card (op offload, where some stay in system RAM) "
                                 "are the shape twin's, stored in 1.69-bit tq1_0 (no recipe of llama.cpp's for this "
                                 "quant): those copies are under-counted")
        notes = []
        if ram_mode and gpu_build and not runtime.is_server:
            notes.append("Llama() cannot leave this build's GPU out (llama-cpp-python 0.3.36 has no device choice): "
                         "sized as it creates the context, with llama.cpp's compute buffers for offloaded ops, the "
                         "GPU's counted in the RAM budget too")
        if geometry.no_rule:
            notes.append(f"no layout rule for {geometry.architecture}: KV and recurrent state are llama.cpp's own, "
                         "measured by a dry run at each n_ctx tried; llama-server's context checkpoints (which "
                         "layers make them is a layout rule's) are not counted")
        if geometry.has_swa:
            notes.append("SWA layers sized with swa_full off (llama-server's default; Llama(swa_full=False))")
        probe_options = dict(emulate_card=emulate, remote=remote,
                             local_devices=() if ram_mode else gpu_devices[local_offset:],
                             cpu_alone=ram_mode and gpu_build and runtime.is_server,
                             backend=devices.rules.name if devices.rules else None)
        session = cls(name=source.name, geometry=geometry, weights=weights,
                      probe=ComputeProbe(file.path, **probe_options, read_weights=file.scale is None),
                      basis=basis,
                      model_hint=file.hint, gpu_build=gpu_build, verify_path=file.path if verify else None,
                      flash_attn=flash_attn, n_ubatch=n_ubatch, reserve=reserve, notes=notes, runtime=runtime,
                      ram=ram)
        session.ram_mode, session.probe_options = ram_mode, probe_options
        session.spec_types, session.weights_of, session.spec_params = spec_types, weights_of, spec_params
        session.meta = file.meta
        if len(spec_types) > 1:
            session.basis["speculative"] = spec_words(geometry, spec_types, spec_params)
        session.emulate, session.backend, session.op_offload = emulate, devices.rules, op_offload
        if backend is not None and devices.rules is None and not ram_mode and gpu_build:
            notes.append(f"--backend {backend}: not used, this build's own devices were sized (--emulate sizes a card "
                         "you do not have)")
        used, count = file.meta.arch_count("expert_used_count"), file.meta.arch_count("expert_count")
        session.expert_share = used / count if count else 1.0
        session.gpu_devices = gpu_devices[local_offset:]  # -sm none -mg N: from the chosen card on
        session.tensor_split = tensor_split
        session.remote = remote
        return session

    tensor_split: tuple[float, ...] = ()  # -ts given
    model_words: tuple[str, ...] = ()  # -hf OWNER/REPO:QUANT or -mu URL: a remote model as the user named it
    expert_share: float = 1.0  # expert_used_count / expert_count: the routed experts one token reads
    spec_types: tuple[str, ...] = (speculative.NONE,)  # sized side by side: none, and draft-mtp where it applies
    weights_of: dict[str, WeightsBreakdown] = {}  # the weights llama-server loads with each (MTP: the NextN layers)
    spec_params: Params = Params()  # --spec-draft-n-max, -ctkd, -ctvd
    emulate = False  # the cards are emulated (RPC servers of this machine's CPU)
    backend: BackendRules | None = None  # the GPU backend the emulated cards answer as
    op_offload = True  # llama.cpp's op offload (off: --no-op-offload)
    gpu_devices: tuple[str, ...] = ()  # a GPU build's devices, in order
    remote: tuple[str, ...] = ()  # --rpc hosts

    meta = None  # the file's (or the twin's) metadata: what roofline's speed model prices a row's decode from
    probe_options: dict = {}  # the devices the dry runs use, for a draft model's own
    draft: "tuple[Fitter, Placement] | None" = None  # -md: the draft model's fitter and placement (-ngld)
    draft_devices: "tuple[int, ...] | None" = None  # -devd: the cards it is on (): none; None: the target's
    draft_hint: str = ""  # -md as the printed command names it
    draft_device_names: str = ""  # -devd as given

    tensor_overrides: tuple[str, ...] = ()  # -ot as given
    cpu_moe = False
    load_mode = LoadMode.AUTO.value
    placer = Placer()

    def place_tensors(self, tensor_overrides: tuple[str, ...], cpu_moe: bool, load_mode: str) -> None:
        """-ot, --cpu-moe and --load-mode: the tensors the overrides place, and how the host's weights are held."""
        self.tensor_overrides, self.cpu_moe, self.load_mode = tuple(tensor_overrides), cpu_moe, load_mode
        overrides = overrides_of(self.tensor_overrides, cpu_moe)
        names = list(dict.fromkeys([n for w in (self.weights, *self.weights_of.values()) for n in w.tensor_names]
                                   + ["token_embd.weight"]))
        self.placer = matched(Placer.of(overrides, tuple(self.remote)), [o.pattern for o in overrides], names)
        used = set(self.placer.first.values()) if self.placer.first else set()
        notes, words = placement_words(self.name, self.weights, self.tensor_overrides, cpu_moe, LoadMode(load_mode),
                                       used)
        self.notes += notes
        if words:
            self.basis["placement"] = words

    def tell(self, progress: Callable[[str], None]) -> None:
        """A line at each dry run llama.cpp answers (the searches run many: each a context created with no_alloc)."""
        def line(settings: Params, n: int, who: str = "") -> None:
            spec = "" if settings.spec_type == speculative.NONE else f", {settings.spec_type}"
            progress(f"fit: llama.cpp dry run {n}{who}: n_ctx {settings.n_ctx:,}, {settings.type_k}/"
                     f"{settings.type_v}, -ngl {settings.n_gpu_layers}{spec}")

        self.probe.on_dry_run = line
        if self.draft is not None:
            self.draft[0].compute_bytes.on_dry_run = lambda s, n: line(s, n, " of the draft model")

    def add_draft(self, path: str, n_gpu_layers: int | None,
                  devices: "tuple[str, tuple[int, ...]] | None" = None) -> None:
        """llama-server's draft model (-md): its weights by -ngld, its context beside the target's (the target's
        cells and slots, -ctkd/-ctvd) and its own compute, each from its own file and dry runs, on the same
        devices; no prompt cache or checkpoints of its own."""
        source = resolve(path)  # a GGUF file, a URL's header, or a catalog id (its published size on a shape twin)
        file = _weights_file(source, self.verify_path is not None)
        meta = file.meta
        kind = self.spec_types[-1]
        speculative.check_draft(Params(spec_type=kind), meta.architecture, path)
        geometry = fit_geometry(meta)
        weights = file_weights(file, geometry, meta.tensors)
        # an EAGLE3 head's dry runs are made against its target (the file the target's dry runs load)
        target = self.probe.path if kind == speculative.EAGLE3 else None
        names, self.draft_devices = devices if devices is not None else ("", None)
        in_ram = self.draft_devices == ()  # -devd none: no device at all, its dry runs too
        options = dict(self.probe_options, emulate_card=False, remote=(), local_devices=(), cpu_alone=True,
                                           backend=None) \
            if in_ram else self.probe_options
        probe = ComputeProbe(file.path, **options, read_weights=file.scale is None, target_path=target)
        fitter = Fitter(geometry, weights, probe, reserve=0, ram_mode=self.ram_mode or in_ram,
                        runtime=RuntimeConfig(cache_ram_mib=0, ctx_checkpoints=0), maps_file=self.maps_file)
        self.draft = (fitter, Placement(PlacementKind.ALL) if n_gpu_layers is None
                      else Placement(PlacementKind.NGL, n_gpu_layers))
        shown = path if source.path is not None and not source.url else file.hint
        self.draft_hint = str(shown) + ("" if n_gpu_layers is None else f" -ngld {n_gpu_layers}")
        self.draft_device_names = names
        where = ("in system RAM (-devd none)" if in_ram else f"on {names} (-devd)" if names
                 else "on the same devices, split as the target (-ts)")
        self.basis["draft"] = (f"-md {shown}: {geometry.architecture}, {weights.total_bytes / GIB:.2f} GiB of weights "
                               f"({file.basis}), placed by -ngld (all layers by default) {where}; "
                               "its context at the target's cells and slots (-ctkd/-ctvd), KV from its metadata, "
                               "compute from its own dry runs at each n_ctx")

    projector_bytes = 0  # --mmproj on the card: weights + compute (0 without one, or with --no-mmproj-offload)
    host_projector_bytes = 0  # --mmproj kept in system RAM (--no-mmproj-offload)

    def add_projector(self, projector: Projector, *, offload: bool) -> None:
        """A vision projector: on the card as llama-server places it, or in system RAM (--no-mmproj-offload)."""
        self.projector_bytes = projector.total_bytes if offload or self.ram_mode else 0
        self.host_projector_bytes = 0 if offload or self.ram_mode else projector.total_bytes
        self.basis["mmproj"] = projector.basis + ("; on the card" if offload else
                                                  "; kept in system RAM (--no-mmproj-offload): not on the card")

    def evaluate(self, budgets: list[Budget], contexts: list[int], pairs: list[tuple[str, str]],
                 placements: list[Placement] | None = None, *, server_args: tuple[str, ...] = ()) -> FitResult:
        fitters = {spec: self.fitter(spec) for spec in self.spec_types}
        fitter = fitters[self.spec_types[0]]
        n_ctx_train = self.geometry.n_ctx_train
        for n_ctx in contexts:
            if n_ctx > n_ctx_train:
                self.notes.append(f"n_ctx {n_ctx:,} is beyond the trained context {n_ctx_train:,}: llama.cpp allows it "
                                  "but quality past the trained length is not assured")
        rows = []
        cells = [(budget, n_ctx, pair, spec) for budget in budgets for n_ctx in contexts for pair in pairs
                 for spec in self.spec_types]
        try:
            for budget, n_ctx, (type_k, type_v), spec in cells:
                settings = self.runtime.context(self.spec_params.replace(
                    n_ctx=n_ctx, type_k=type_k, type_v=type_v, flash_attn=self.flash_attn, n_ubatch=self.n_ubatch,
                    spec_type=spec, op_offload=self.op_offload, tensor_overrides=self.tensor_overrides,
                    cpu_moe=self.cpu_moe, load_mode=self.load_mode))
                try:
                    found = fitters[spec].rows(budget, settings, placements)
                except Stalled:
                    raise  # a device that stopped answering: every other choice would wait as long
                except LlamabenchError as exc:
                    self.notes.append(f"{type_k}/{type_v}{'' if spec == speculative.NONE else ', ' + spec}: {exc}")
                    continue
                rows += found
                if budget.multi and (type_k, type_v) == pairs[0] and spec == speculative.NONE and not placements:
                    self.one_card_note(fitter, budget, settings, found)
        finally:
            self.probe.close()
            if self.draft is not None:
                self.draft[0].compute_bytes.close()
        if not rows:
            reasons = {note.partition(": ")[2] for note in self.notes if ": " in note}
            if len(reasons) == 1:  # every choice failed alike (llama.cpp could not load the model): said once
                raise LlamabenchError(f"no cache-type choice could be evaluated: {reasons.pop()}")
            raise LlamabenchError("no cache-type choice could be evaluated: " + "; ".join(self.notes))
        rows = with_speeds(rows, self.meta, self.geometry, self.weights_of, self.backend.name if self.backend else None,
                           self.placer)
        self.backend_weights_note(fitter, rows[0])
        refused = {n: why for f in fitters.values() for n, why in f.refused.items()}
        if refused:
            n = min(refused)
            self.notes.append(f"llama.cpp could not create n_ctx {n:,} on these devices ({refused[n]}); the "
                              "max n_ctx search counts such contexts as not fitting")
        if self.runtime.is_server and self.runtime.cache_ram_mib < 0:
            self.notes.append("--cache-ram -1: the prompt cache has no size limit, only a limit of n_ctx tokens; the "
                              "host part counts their KV, and each cached prompt's recurrent state and checkpoints "
                              "can come on top ('+')")
        return FitResult(self.name, self.geometry.architecture, dict(self.basis), tuple(rows), tuple(budgets),
                         tuple(contexts), self.weights.n_layer, self.model_hint, n_ctx_train=n_ctx_train,
                         notes=tuple(self.notes),
                         server_args=self.runtime.server_flags(self.geometry) + tuple(server_args),
                         draft_hint=self.draft_hint, draft_devices=self.draft_device_names,
                         dry_runs=self.probe.calls, runtime=self.runtime, ram=self.ram,
                         machine_ram=sysinfo.total_ram_bytes(), backend=self.backend.name if self.backend else "",
                         model_words=self.model_words)

    def backend_weights_note(self, fitter: Fitter, row) -> None:
        """Where the backend refused tensors the file's layout puts on a card: say how much it kept on the CPU."""
        if self.probe.weights_unread:
            self.notes.append(f"the weights each device takes could not be read from llama.cpp "
                              f"({self.probe.weights_unread}): placed as the file's tensors say, which assumes the "
                              "backend takes every tensor type")
            return
        if self.ram_mode or not self.probe.weights_from_backend:
            return
        theory = fitter.theory_weights(row.placement)
        taken = [c.parts.weights for c in row.devices] if row.devices else [row.parts.weights]
        single = self.gpu_devices[0] if self.gpu_devices and not self.emulate and not self.remote else "the card"
        names = [c.name for c in row.devices] if len(row.devices) > 1 else [single]
        for name, planned, took in zip(names, theory, taken):
            if took < planned:
                self.notes.append(f"{name}: the backend took {took / MIB:.2f} MiB of the {planned / MIB:.2f} MiB of "
                                  f"weights its layers hold; llama.cpp keeps the other {(planned - took) / MIB:.2f} "
                                  "MiB on the CPU (tensor types or sizes this backend does not take), and the fit "
                                  "counts them there")

    def one_card_note(self, fitter: Fitter, budget: Budget, settings: Params, rows: list) -> None:
        """Several cards, the model on the largest alone: does splitting buy context, and what it costs."""
        split_row = rows[0]
        if not split_row.card_fits:
            return
        i = max(range(len(budget.devices)), key=lambda j: budget.devices[j].bytes)
        card = budget.devices[i]
        alone = Fitter(self.geometry, self.weights, self.probe, reserve=fitter.reserve_of(i),
                       projector=self.projector_bytes, host_projector=self.host_projector_bytes,
                       runtime=self.runtime, ram=None)
        if self.weights.on_card(n_gpu_layers=self.weights.n_layer + 1) > card.bytes:
            return
        try:
            row = alone.rows(Budget(card.label, card.bytes), settings, [Placement(PlacementKind.ALL)])[0]
        except LlamabenchError:
            return
        n_ctx, where = settings.n_ctx, f"{budget.label}: card c{i} ({card.label}) alone"
        if not row.card_fits:
            self.notes.append(f"{where} does not hold the model at n_ctx {n_ctx:,} ({settings.type_k}/"
                              f"{settings.type_v} KV): the split is needed")
            return
        gain = split_row.max_n_ctx - row.max_n_ctx
        speed = ("pipelining over the cards costs some speed: each token passes every card in turn, and "
                 + ("the remote hosts add their link's transfer per token" if any(c.remote for c in budget.devices)
                    else "the activations cross PCIe between them"))
        self.notes.append(f"{where} holds the model at n_ctx {n_ctx:,} ({settings.type_k}/{settings.type_v} KV, "
                          f"max n_ctx {row.max_n_ctx:,}); split over {len(budget.devices)} cards max n_ctx "
                          f"{split_row.max_n_ctx:,}: " + (f"splitting buys {gain:,} tokens of context, and " if gain > 0
                                                          else "splitting buys no context, and ") + speed
                          + f" (one card: -ngl 99 -sm none -mg {i})")

    def fitter(self, spec: str = speculative.NONE) -> Fitter:
        weights = self.weights_of.get(spec, self.weights)
        return Fitter(self.geometry, weights, self.probe, reserve=0 if self.ram_mode else self.reserve,
                      ram_mode=self.ram_mode, projector=self.projector_bytes,
                      host_projector=self.host_projector_bytes, runtime=self.runtime, ram=self.ram,
                      tensor_split=self.tensor_split,
                      draft=self.draft if speculative.uses_draft_model(spec) else None,
                      draft_devices=self.draft_devices,
                      expert_share=self.expert_share, maps_file=self.maps_file, placer=self.placer,
                      load_mode=LoadMode(self.load_mode))
