"""The one module that talks to llama_cpp (llama-cpp-python's low-level ctypes API).

Everything it returns is plain data; no ctypes pointer leaves this module.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ..core import cache_types
from ..core.errors import EngineError
from ..memory import speculative
from ..memory.allocations import Allocations, parse_allocations
from ..memory.backends import emulates, rules_for
from ..settings.params import Params
from ..settings.values import rpc_endpoints
from . import breakdown, pinned_norms
from .devices import Device, is_endpoint, is_rpc_name

_lock = threading.Lock()
_buffer: list[str] | None = None
_error_lines: list[str] = []  # ERROR-level lines of the current capture
GGML_LOG_LEVEL_ERROR = 4  # ggml's levels: DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
_callback = None  # keep a reference: llama.cpp holds the raw pointer
_backend_ready = False


def _llama():
    import llama_cpp

    return llama_cpp


def lib_path(name: str) -> Path:
    """A shared library llama-cpp-python ships (libggml-cpu.so, libggml-rpc.so...)."""
    return Path(_llama().__file__).parent / "lib" / f"lib{name}.so"


def ggml_lib(name: str):
    """One of llama-cpp-python's ggml libraries, for the functions its binding does not cover."""
    path = lib_path(name)
    if not path.exists():
        hint = " with CMAKE_ARGS=-DGGML_RPC=on (make install does)" if name == "ggml-rpc" else ""
        raise EngineError(f"this llama-cpp-python build has no {path.name}: reinstall it{hint}")
    return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def _ensure_logging() -> None:
    """Route llama.cpp's log (every level) into our buffer, and nothing to stderr."""
    global _callback, _backend_ready
    if _callback is not None:
        return
    lc = _llama()

    def on_log(level, text, user_data):
        if _buffer is not None and text:
            decoded = text.decode("utf-8", errors="replace")
            _buffer.append(decoded)
            if level == GGML_LOG_LEVEL_ERROR:
                _error_lines.append(decoded.strip())

    _callback = lc.llama_log_callback(on_log)
    lc.llama_log_set(_callback, ctypes.c_void_p(0))
    if not _backend_ready:
        lc.llama_backend_init()
        _backend_ready = True


@contextmanager
def captured_log():
    """Collect llama.cpp's log text while the block runs; yields the list it fills."""
    global _buffer
    _ensure_logging()
    with _lock:
        lines: list[str] = []
        _buffer = lines
        _error_lines.clear()
        try:
            yield lines
        finally:
            _buffer = None


GGML_BACKEND_DEVICE_TYPE_CPU = 0  # ggml-backend.h: CPU 0, GPU 1, IGPU 2, ACCEL 3
GGML_BACKEND_DEVICE_TYPE_GPU = 1
GGML_BACKEND_DEVICE_TYPE_IGPU = 2


def _ggml():
    """libggml as llama_cpp loaded it, with the device-enumeration functions it does not bind."""
    from llama_cpp._ggml import libggml

    if not getattr(libggml, "_llamabench_typed", False):
        libggml.ggml_backend_dev_count.restype = ctypes.c_size_t
        libggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        libggml.ggml_backend_dev_get.restype = ctypes.c_void_p
        libggml.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        libggml.ggml_backend_dev_type.restype = ctypes.c_int
        libggml.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
        libggml.ggml_backend_dev_name.restype = ctypes.c_char_p
        libggml.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
        libggml.ggml_backend_dev_description.restype = ctypes.c_char_p
        libggml.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                                    ctypes.POINTER(ctypes.c_size_t)]
        libggml.ggml_backend_dev_memory.restype = None
        libggml._llamabench_typed = True
    return libggml


def gpu_devices() -> list[str]:
    """Names of the GPU devices this llama.cpp build sees (CUDA, Vulkan, Metal...); RPC servers are not counted.

    `llama_supports_gpu_offload` is true for any build with the RPC backend, GPU or not, so it cannot tell.
    """
    _ensure_logging()  # llama_backend_init: the backends are registered
    lib = _ggml()
    names = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        if lib.ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU:
            name = lib.ggml_backend_dev_name(dev).decode("utf-8", errors="replace")
            if not is_rpc_name(name):
                names.append(name)
    return names


def device_memory() -> list[Device]:
    """Free and total memory of every device but the CPU (CUDA, Vulkan, Metal, RPC...), as llama.cpp's own fit
    reads it (`ggml_backend_dev_memory`, common/fit.cpp): backend-neutral, where NVML sees NVIDIA cards only."""
    _ensure_logging()
    lib = _ggml()
    out = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        kind = int(lib.ggml_backend_dev_type(dev))
        if kind == GGML_BACKEND_DEVICE_TYPE_CPU:
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        out.append(Device(name=lib.ggml_backend_dev_name(dev).decode("utf-8", errors="replace"),
                          description=(lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", errors="replace"),
                          free_bytes=int(free.value), total_bytes=int(total.value),
                          is_gpu=kind in (GGML_BACKEND_DEVICE_TYPE_GPU, GGML_BACKEND_DEVICE_TYPE_IGPU)))
    return out


def supports_gpu_offload() -> bool:
    """A GPU build with a GPU to offload to (not merely the RPC backend compiled in)."""
    return bool(gpu_devices())


class _BuftOverride(ctypes.Structure):
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


# common/common.h: LLM_FFN_EXPS_REGEX and llm_ffn_block_regex, as --n-cpu-moe builds them
N_CPU_MOE_PATTERN = r"blk\.{il}\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_rpc_devices: dict[str, int] = {}  # endpoint -> ggml_backend_dev_t, registered once per process


def _rpc_device(endpoint: str) -> int:
    """Register an RPC server (an emulated card) with ggml once; its device pointer."""
    if endpoint not in _rpc_devices:
        rpc, ggml = ggml_lib("ggml-rpc"), ggml_lib("ggml")
        rpc.ggml_backend_rpc_add_server.argtypes = [ctypes.c_char_p]
        rpc.ggml_backend_rpc_add_server.restype = ctypes.c_void_p
        ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
        ggml.ggml_backend_reg_dev_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        ggml.ggml_backend_reg_dev_get.restype = ctypes.c_void_p
        reg = rpc.ggml_backend_rpc_add_server(endpoint.encode())
        if not reg:
            raise EngineError(f"llama.cpp could not reach the RPC server at {endpoint}")
        ggml.ggml_backend_register(reg)
        _rpc_devices[endpoint] = ggml.ggml_backend_reg_dev_get(reg, 0)
    return _rpc_devices[endpoint]


_emulated: dict[str, str] = {}  # endpoint -> the GPU backend whose rules that emulated card answers with


def emulate_backend(backend: str | None, endpoints) -> None:
    """From now on in this process, these RPC endpoints (emulated cards) answer as `backend` does where compute
    buffers are sized (memory.backends): op offload, flash attention's room, Vulkan's limit and node order. None
    or "cpu": as they are."""
    for endpoint in list(_emulated):
        if endpoint in _rpc_devices:
            breakdown.emulate_backend(_rpc_devices[endpoint], None)
    _emulated.clear()
    if emulates(backend):
        _emulated.update({e: backend for e in endpoints})


# src/llama-quant.cpp, llama_model_quantize_impl under dry_run: one line a tensor, its new type in parentheses where the
# quantizer changes it ("[  12/ 747] blk.0.attn_qkv.weight - [ 2048, 8192, 1, 1], type =  tq1_0, size = ... (q6_K)")
_RECIPE_LINE = re.compile(r"^\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[[^\]]*\], type =\s*(\S+), size =[^(\n]*(?:\((\S+)\))?",
                          re.MULTILINE)


def quantize_recipe(path: str, ftype: int) -> tuple[tuple[str, str], ...]:
    """Each tensor of the GGUF at `path` and the ggml type llama.cpp's quantizer gives it for the file type `ftype`
    (enum llama_ftype): llama_model_quantize with dry_run (llama_tensor_get_type: the output, embedding and attn_v
    promotions, the fallback types of rows no block divides), nothing written."""
    lc = _llama()
    params = lc.llama_model_quantize_default_params()
    params.ftype, params.dry_run, params.allow_requantize, params.nthread = ftype, True, True, 1
    with captured_log() as lines:
        failed = lc.llama_model_quantize(os.fsencode(path), os.fsencode(os.devnull), ctypes.byref(params))
    if failed:
        raise EngineError(f"{path}: llama.cpp's quantizer refused file type {ftype} "
                          f"({_reason(lines, 'no reason logged')})")
    return tuple((m[1], (m[3] or m[2]).lower()) for m in _RECIPE_LINE.finditer("".join(lines)))


SPLIT_MODE_IDS = {"none": 0, "layer": 1}  # enum llama_split_mode
NO_DEVICE = "none"  # a job's device list ["none"]: the CPU alone, as llama.cpp's `-dev none`, even on a GPU build


def _device(name: str) -> int:
    """A device by what a job names it: an RPC server "HOST:PORT", or a ggml device name (CUDA0, Vulkan0)."""
    if is_endpoint(name):
        dev = _rpc_device(name)
        if name in _emulated:
            breakdown.emulate_backend(dev, rules_for(_emulated[name], os.environ))
        return dev
    lib = _ggml()
    lib.ggml_backend_dev_by_name.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_dev_by_name.restype = ctypes.c_void_p
    dev = lib.ggml_backend_dev_by_name(name.encode())
    if not dev:
        raise EngineError(f"llama.cpp has no device named {name}")
    return dev


def _model_params(p: Params, *, no_alloc: bool, rpc=None, on_progress=None):
    """llama_model_params, and the ctypes objects it points into (keep them alive until the load ends).

    With RPC endpoints the model's devices are exactly those, in that order (as `--rpc` puts RPC servers
    first in llama.cpp's default device list); `tensor_split`, `split_mode` and `main_gpu` as llama.cpp reads them.
    """
    lc = _llama()
    params = lc.llama_model_default_params()
    params.n_gpu_layers = p.n_gpu_layers
    endpoints = rpc_endpoints(rpc)
    # off: no repacked second copy of the weights (AMX, CPU_REPACK); an RPC dry run never repacks
    params.use_extra_bufts = p.repack and not (no_alloc and endpoints)
    params.load_mtp = p.spec_type == MTP  # llama-server loads the NextN layers only for draft-mtp
    params.split_mode = SPLIT_MODE_IDS[p.split_mode]
    params.main_gpu = p.main_gpu
    n_cpu_moe = p.n_cpu_moe
    keep: list = []
    if endpoints == (NO_DEVICE,):
        devices = (ctypes.c_void_p * 1)(None)  # an empty list: no GPU, no op offload to one
        params.devices = ctypes.cast(devices, ctypes.c_void_p)
        keep.append(devices)
    elif endpoints:
        devices = (ctypes.c_void_p * (len(endpoints) + 1))(*[_device(e) for e in endpoints], None)
        params.devices = ctypes.cast(devices, ctypes.c_void_p)
        keep.append(devices)
    if p.tensor_split:
        split = (ctypes.c_float * int(lc.llama_max_devices()))(*p.tensor_split)
        params.tensor_split = ctypes.cast(split, ctypes.POINTER(ctypes.c_float))
        keep.append(split)
    if n_cpu_moe:
        cpu = ggml_lib("ggml-cpu")
        cpu.ggml_backend_cpu_buffer_type.restype = ctypes.c_void_p
        buft = cpu.ggml_backend_cpu_buffer_type()
        patterns = [N_CPU_MOE_PATTERN.replace("{il}", str(il)).encode() for il in range(n_cpu_moe)]
        overrides = (_BuftOverride * (len(patterns) + 1))(*[_BuftOverride(p, buft) for p in patterns],
                                                          _BuftOverride(None, None))
        params.tensor_buft_overrides = ctypes.cast(overrides, ctypes.c_void_p)
        keep += [patterns, overrides]
    if on_progress is not None:  # told the share loaded as llama.cpp loads the weights (True: go on)
        callback = lc.llama_progress_callback(lambda share, _data: on_progress(share) or True)
        params.progress_callback = callback
        keep.append(callback)
    if no_alloc:
        params.no_alloc = True
        params.load_mode = lc.LLAMA_LOAD_MODE_NONE  # mmap asserts under no_alloc
    return params, keep


def _context_params(settings: Params):
    lc = _llama()
    params = lc.llama_context_default_params()
    params.n_ctx = settings.n_ctx
    params.n_batch = settings.n_batch
    params.n_ubatch = settings.n_ubatch
    params.n_seq_max = settings.n_seq
    params.n_rs_seq = settings.n_rs_seq
    params.n_outputs_max = settings.n_outputs_max
    params.n_outputs_max_per_seq = settings.n_outputs_max_per_seq
    params.type_k = cache_types.ggml_type_id(settings.type_k)
    params.type_v = cache_types.ggml_type_id(settings.type_v)
    params.flash_attn_type = (lc.LLAMA_FLASH_ATTN_TYPE_ENABLED if settings.flash_attn
                              else lc.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    params.swa_full = settings.swa_full
    params.kv_unified = settings.kv_unified
    params.op_offload = settings.op_offload  # llama-server's --no-op-offload
    params.no_perf = True
    threads = settings.n_threads or max(1, os.cpu_count() or 1)
    params.n_threads = threads
    params.n_threads_batch = threads
    return params


MTP = speculative.MTP


class SamplerChains:
    """llama-server's draft sampler chains on the device, one a slot (top-k), for the draft context of the types
    that have them (speculative.backend_samplers): given to the context as it is created, which reserves their
    graph as llama-server's re-reservation after `llama_set_sampler` does (src/llama-context.cpp:250-270). The
    chains must outlive the context: `free` them after it."""

    def __init__(self, lc, kind: str, n_seq: int):
        self._lc = lc
        self.chains = []
        self.configs = None
        if not speculative.backend_samplers(kind):
            return
        self.configs = (lc.llama_sampler_seq_config * n_seq)()
        for seq in range(n_seq):
            chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_k(speculative.TOP_K_CHAIN))
            self.configs[seq].seq_id = seq
            self.configs[seq].sampler = ctypes.cast(chain, ctypes.c_void_p)
            self.chains.append(chain)

    def attach(self, params) -> None:
        if self.chains:
            params.samplers = ctypes.cast(self.configs, ctypes.POINTER(self._lc.llama_sampler_seq_config))
            params.n_samplers = len(self.chains)

    def output_surplus(self, model) -> int:
        """What the chains add to the context's output buffer, made with them: room for each slot's sampled
        logits, probabilities, token and candidates (src/llama-context.cpp:2158-2162). llama-server gives the
        chains after the context is made, so its output buffer at start has none of it, and grows by it at the
        first decode; the dry runs report the buffer at start, as llama-server's log does."""
        if not self.chains:
            return 0
        n_vocab = int(self._lc.llama_vocab_n_tokens(self._lc.llama_model_get_vocab(model)))
        return (2 * n_vocab * 4 + (1 + n_vocab) * 4) * len(self.chains)

    def free(self) -> None:
        for chain in self.chains:
            self._lc.llama_sampler_free(chain)
        self.chains = []


def draft_context(lc, model, settings: Params, other, *, mtp: bool = False):
    """A draft context as llama-server creates it (common/speculative.cpp:2514-2580): ctx_other the target's
    context (`other`), which llama.cpp keeps only where the head needs it (src/llama-context.cpp:146-163), ctx_type
    MTP for the MTP context, and the sampler chains of its --spec-type. Returns (context or None, chains to free
    after it)."""
    chains = SamplerChains(lc, MTP if mtp else settings.spec_type, settings.n_seq)
    params = _context_params(settings)
    params.ctx_other = other
    if mtp:
        params.ctx_type = lc.LLAMA_CONTEXT_TYPE_MTP
    chains.attach(params)
    ctx = lc.llama_init_from_model(model, params)
    if not ctx:
        chains.free()
    return ctx, chains


def _mtp_context(lc, model, target, settings: Params):
    """The MTP draft context llama-server creates beside `target` with --spec-type draft-mtp, and its sampler
    chains; (None, None) where the settings ask for none."""
    if settings.spec_type != MTP:
        return None, None
    ctx, chains = draft_context(lc, model, speculative.draft_context(settings), target, mtp=True)
    if not ctx:
        raise EngineError("llama.cpp could not create the MTP draft context (does this architecture run draft-mtp?)")
    return ctx, chains


def at_start(alloc: Allocations, surplus: int) -> Allocations:
    """The allocations with the host output buffer as llama-server has it at start (`surplus`: what the draft
    contexts' sampler chains added to it; SamplerChains.output_surplus)."""
    if not surplus or not alloc.output_buffers_mib:
        return alloc
    outputs = dict(alloc.output_buffers_mib)
    name = max(outputs, key=outputs.get)
    outputs[name] = round(outputs[name] - surplus / 2**20, 2)
    return replace(alloc, output_buffers_mib=outputs)


def _reason(log_lines: list[str], default: str) -> str:
    """The most telling error line llama.cpp logged, for a one-line failure message."""
    errors = [line for line in _error_lines if line]
    if errors:
        return errors[0] if len(errors) == 1 else f"{errors[0]} ({errors[-1]})"
    text = "".join(log_lines).splitlines()
    for needle in ("error", "failed", "unable", "invalid", "not supported", "exception"):
        for line in reversed(text):
            if needle in line.lower():
                return line.strip()
    return default


GGML_MAX_N_THREADS = 512


class _ThreadpoolParams(ctypes.Structure):  # struct ggml_threadpool_params (ggml.h)
    _fields_ = [("cpumask", ctypes.c_bool * GGML_MAX_N_THREADS), ("n_threads", ctypes.c_int), ("prio", ctypes.c_int),
                ("poll", ctypes.c_uint32), ("strict_cpu", ctypes.c_bool), ("paused", ctypes.c_bool)]


def parse_cpu_mask(mask: str) -> list[bool]:
    """common/common.cpp parse_cpu_mask: hex digits, lowest bit = CPU 0, '0x' optional."""
    digits = mask[2:] if mask.lower().startswith("0x") else mask
    digits = digits[:128]
    bits = [False] * GGML_MAX_N_THREADS
    for pos, char in enumerate(reversed(digits)):
        value = int(char, 16)  # ValueError on a character that is not hex
        for b in range(4):
            if value >> b & 1:
                bits[pos * 4 + b] = True
    return bits


def _threadpool(threads: Params):
    """ggml_threadpool_new with llama-bench's settings; the caller frees it after the context."""
    base, cpu = ggml_lib("ggml-base"), ggml_lib("ggml-cpu")
    base.ggml_threadpool_params_init.argtypes = [ctypes.POINTER(_ThreadpoolParams), ctypes.c_int]
    cpu.ggml_threadpool_new.argtypes = [ctypes.POINTER(_ThreadpoolParams)]
    cpu.ggml_threadpool_new.restype = ctypes.c_void_p
    cpu.ggml_threadpool_free.argtypes = [ctypes.c_void_p]
    params = _ThreadpoolParams()
    n_threads = threads.n_threads or max(1, os.cpu_count() or 1)
    base.ggml_threadpool_params_init(ctypes.byref(params), n_threads)
    mask = parse_cpu_mask(threads.cpu_mask)
    for i, bit in enumerate(mask):
        params.cpumask[i] = bit
    params.strict_cpu, params.poll, params.prio = threads.cpu_strict, threads.poll, threads.prio
    pool = cpu.ggml_threadpool_new(ctypes.byref(params))
    if not pool:
        raise EngineError(f"ggml could not create a threadpool of {n_threads} threads")
    return pool, cpu.ggml_threadpool_free


class _Closing:
    """`with` support for the classes below, which free their llama.cpp objects in close()."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass(frozen=True)
class DryRun:
    """llama.cpp's sizes for one context, created with no_alloc (nothing big allocated)."""

    allocations: Allocations
    model_size_bytes: int  # llama_model_size: weights as loaded
    n_params: int
    n_ctx: int
    n_ctx_seq: int
    n_seq_max: int
    log: str


class DryRunModel(_Closing):
    """A model loaded with no_alloc, for many dry-run contexts (about 0.1 s each)."""

    def __init__(self, path: str, placement: Params = Params(), *, rpc=None, target: tuple[str, Params] | None = None):
        lc = _llama()
        self._lc = lc
        self.path = path
        self._target_model = self._target_ctx = None
        if target is not None:  # an EAGLE3 head: its contexts are made against a target's (ctx_other)
            self._load_target(*target, rpc=rpc)
        with captured_log() as lines:
            params, _keep = _model_params(placement, no_alloc=True, rpc=rpc)
            self._model = lc.llama_model_load_from_file(os.fsencode(path), params)
            if not self._model:
                raise EngineError(f"{path}: llama.cpp could not load the model ({_reason(lines, 'no reason logged')})")
            self.load_log = "".join(lines)
        self.size = int(lc.llama_model_size(self._model))
        self.n_params = int(lc.llama_model_n_params(self._model))
        # the weights this placement keeps in system RAM, tensor by tensor (the host layers' and any a device
        # refused): the mapped span llama.cpp reports for them follows from their file offsets
        self.host_tensors = breakdown.host_tensors(self._model)

    def context(self, settings: Params) -> DryRun:
        lc = self._lc
        with captured_log() as lines:
            if self._target_ctx is not None:  # a draft head's context: against its target, with its chains
                ctx, chains = draft_context(lc, self._model, settings, self._target_ctx)
            else:
                ctx, chains = lc.llama_init_from_model(self._model, _context_params(settings)), None
            if not ctx:
                raise EngineError(f"{self.path}: llama.cpp could not create the context "
                                  f"({_reason(lines, 'no reason logged')})")
            mtp = mtp_chains = None
            try:
                try:
                    mtp, mtp_chains = _mtp_context(lc, self._model, ctx, settings)
                except EngineError as exc:
                    raise EngineError(f"{self.path}: {exc} ({_reason(lines, 'no reason logged')})") from None
                n_ctx, n_ctx_seq, n_seq = lc.llama_n_ctx(ctx), lc.llama_n_ctx_seq(ctx), lc.llama_n_seq_max(ctx)
                by_buffer = breakdown.read(ctx)  # the weights each device took: the log prints 0.00 under no_alloc
                if by_buffer is not None and mtp:  # the MTP context's caches and compute beside the target's
                    by_buffer = breakdown.merged(by_buffer, breakdown.read(mtp), contexts_only=True)
                surplus = sum(c.output_surplus(self._model) for c in (chains, mtp_chains) if c is not None)
            finally:
                if mtp:
                    lc.llama_free(mtp)
                lc.llama_free(ctx)
                for used in (mtp_chains, chains):
                    if used is not None:
                        used.free()
            log = self.load_log + "".join(lines)
        allocations = at_start(replace(parse_allocations(log), breakdown=by_buffer or {}), surplus)
        n_layer = int(lc.llama_model_n_layer(self._model))
        all_offloaded = settings.n_gpu_layers < 0 or settings.n_gpu_layers > n_layer
        allocations = pinned_norms.as_allocated(  # the later cards of a split as llama.cpp really reserves them
            allocations, log, all_offloaded=all_offloaded, n_embd=int(lc.llama_model_n_embd(self._model)),
            n_tokens=pinned_norms.prompt_batch_tokens(int(n_ctx), settings.n_ubatch, int(n_seq)))
        return DryRun(allocations, self.size, self.n_params, int(n_ctx), int(n_ctx_seq), int(n_seq), log)

    def _load_target(self, path: str, placement: Params, *, rpc=None) -> None:
        """The target an EAGLE3 head borrows its token embeddings and output from, loaded with no_alloc, and one
        small context of it (the head's graph reads the target's tensors, not its context's sizes). Its log is
        kept apart: none of its buffers are the head's."""
        lc = self._lc
        with captured_log() as lines:
            params, _keep = _model_params(placement, no_alloc=True, rpc=rpc)
            self._target_model = lc.llama_model_load_from_file(os.fsencode(path), params)
            if not self._target_model:
                raise EngineError(f"{path}: llama.cpp could not load the draft head's target "
                                  f"({_reason(lines, 'no reason logged')})")
            small = Params(n_ctx=256, n_batch=256, n_ubatch=256, n_threads=1)
            self._target_ctx = lc.llama_init_from_model(self._target_model, _context_params(small))
            if not self._target_ctx:
                raise EngineError(f"{path}: llama.cpp could not create a context of the draft head's target "
                                  f"({_reason(lines, 'no reason logged')})")

    def close(self) -> None:
        if self._target_ctx:
            self._lc.llama_free(self._target_ctx)
            self._target_ctx = None
        if self._target_model:
            self._lc.llama_model_free(self._target_model)
            self._target_model = None
        if getattr(self, "_model", None):
            self._lc.llama_model_free(self._model)
            self._model = None


class Session(_Closing):
    """A real model and context (weights loaded, KV allocated), for timed decoding in this process."""

    def __init__(self, path: str, settings: Params, *, rpc=None, threadpool: bool = False,
                 draft: tuple[str, Params, "list[str] | None"] | None = None, on_progress=None):
        lc = _llama()
        self._lc = lc
        self.settings = settings
        self._model = None
        self._ctx = None
        self._draft_model = self._draft_ctx = self._draft_chains = None
        with captured_log() as lines:
            params, _keep = _model_params(settings, no_alloc=False, rpc=rpc, on_progress=on_progress)
            self._model = lc.llama_model_load_from_file(os.fsencode(path), params)
            if not self._model:
                raise EngineError(f"llama.cpp could not load {path} ({_reason(lines, 'no reason logged')})")
            self._ctx = lc.llama_init_from_model(self._model, _context_params(settings))
            self._mtp = self._mtp_chains = None
            if not self._ctx:
                reason = _reason(lines, "no reason logged")
                self.close()
                raise EngineError(f"llama.cpp could not create the context: {reason}")
            try:
                self._mtp, self._mtp_chains = _mtp_context(lc, self._model, self._ctx, settings)  # as llama-server
                if draft is not None:  # on its own devices (-devd) where given, else the target's
                    self._load_draft(draft[0], draft[1], rpc=rpc if draft[2] is None else draft[2],
                                     on_progress=on_progress)
            except EngineError as exc:
                self.close()
                raise EngineError(f"{exc}: {_reason(lines, 'no reason logged')}") from None
            self.log = "".join(lines)
        self._threadpool = None
        if threadpool:  # as llama-bench: one threadpool, attached for decode and batch
            self._threadpool, self._free_threadpool = _threadpool(settings)
            lib = lc.llama_cpp._lib
            lib.llama_attach_threadpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            lib.llama_attach_threadpool(self._ctx, self._threadpool, None)
        surplus = sum(c.output_surplus(m) for c, m in ((self._mtp_chains, self._model),
                                                        (self._draft_chains, self._draft_model)) if c is not None)
        self.allocations = at_start(parse_allocations(self.log), surplus)  # llama-server's buffers at its start
        self.n_ctx = int(lc.llama_n_ctx(self._ctx))
        self.n_batch = int(lc.llama_n_batch(self._ctx))
        self.model_size_bytes = int(lc.llama_model_size(self._model))
        self.n_params = int(lc.llama_model_n_params(self._model))
        self.model_desc = self._desc()
        vocab = lc.llama_model_get_vocab(self._model)
        self.n_vocab = int(lc.llama_vocab_n_tokens(vocab))
        self.rolls_back = not (lc.llama_model_is_recurrent(self._model) or lc.llama_model_is_hybrid(self._model))
        self.position = 0
        self._next_token = 0

    def _desc(self) -> str:
        buf = ctypes.create_string_buffer(256)
        self._lc.llama_model_desc(self._model, buf, 256)
        return buf.value.decode("utf-8", errors="replace")

    def _tokens(self, n: int):
        first = 3 if self.n_vocab > 3 else 0
        span = max(1, self.n_vocab - first)
        ids = [first + (self._next_token + i * 7919) % span for i in range(n)]
        self._next_token += n
        return (self._lc.llama_token * n)(*ids)

    def decode(self, n_tokens: int, *, on_chunk=None) -> None:
        """Decode n_tokens of prompt in batches of n_batch (logits for the last token only)."""
        lc = self._lc
        done = 0
        while done < n_tokens:
            n = min(self.n_batch, n_tokens - done)
            tokens = self._tokens(n)  # keep a reference while llama_decode reads it
            rc = lc.llama_decode(self._ctx, lc.llama_batch_get_one(tokens, n))
            if rc != 0:
                raise EngineError(f"llama_decode returned {rc} at position {self.position} "
                                  "(context full or out of memory)")
            done += n
            self.position += n
            if on_chunk:
                on_chunk(n)
        lc.llama_synchronize(self._ctx)

    def generate(self, n_tokens: int) -> None:
        """Decode n_tokens one at a time, as text generation does (sampling left out)."""
        lc = self._lc
        for _ in range(n_tokens):
            token = self._tokens(1)
            rc = lc.llama_decode(self._ctx, lc.llama_batch_get_one(token, 1))
            if rc != 0:
                raise EngineError(f"llama_decode returned {rc} at position {self.position}")
            self.position += 1
        lc.llama_synchronize(self._ctx)

    def snapshot(self):
        """The state of sequence 0 at the current position (KV cells and recurrent state)."""
        lc = self._lc
        if self.rolls_back:
            return self.position
        if self.position == 0:
            return (0, None, 0)
        size = lc.llama_state_seq_get_size(self._ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = lc.llama_state_seq_get_data(self._ctx, buf, size, 0)
        if written != size:
            raise EngineError(f"llama_state_seq_get_data wrote {written} of {size} bytes")
        return (self.position, buf, size)

    def restore(self, snap) -> None:
        lc = self._lc
        if self.rolls_back:
            ok = lc.llama_memory_seq_rm(lc.llama_get_memory(self._ctx), 0, snap, -1)
            if not ok:
                raise EngineError("llama_memory_seq_rm could not roll the sequence back")
            self.position = snap
            return
        position, buf, size = snap
        if position == 0:
            self.clear()
            return
        lc.llama_memory_seq_rm(lc.llama_get_memory(self._ctx), 0, -1, -1)
        if lc.llama_state_seq_set_data(self._ctx, buf, size, 0) == 0:
            raise EngineError("llama_state_seq_set_data failed to restore the sequence")
        self.position = position

    def clear(self) -> None:
        self._lc.llama_memory_clear(self._lc.llama_get_memory(self._ctx), True)
        self.position = 0

    def _load_draft(self, path: str, params: Params, *, rpc=None, on_progress=None) -> None:
        """llama-server's draft model (-md) and its context, on `rpc`'s devices (common/speculative.cpp:2538-2556)."""
        lc = self._lc
        model_params, _keep = _model_params(params, no_alloc=False, rpc=rpc, on_progress=on_progress)
        self._draft_model = lc.llama_model_load_from_file(os.fsencode(path), model_params)
        if not self._draft_model:
            raise EngineError(f"llama.cpp could not load the draft model {path}")
        self._draft_ctx, self._draft_chains = draft_context(lc, self._draft_model, params, self._ctx)
        if not self._draft_ctx:
            raise EngineError("llama.cpp could not create the draft model's context")

    def close(self) -> None:
        if getattr(self, "_draft_ctx", None):
            self._lc.llama_free(self._draft_ctx)
            self._draft_ctx = None
        if getattr(self, "_draft_model", None):
            self._lc.llama_model_free(self._draft_model)
            self._draft_model = None
        if getattr(self, "_mtp", None):
            self._lc.llama_free(self._mtp)
            self._mtp = None
        for name in ("_draft_chains", "_mtp_chains"):  # after their contexts
            if getattr(self, name, None) is not None:
                getattr(self, name).free()
                setattr(self, name, None)
        if self._ctx:
            self._lc.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_threadpool", None):
            self._free_threadpool(self._threadpool)
            self._threadpool = None
        if self._model:
            self._lc.llama_model_free(self._model)
            self._model = None
