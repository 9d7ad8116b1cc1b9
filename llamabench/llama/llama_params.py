"""llama.cpp's parameter structs filled from a `Params`: `llama_model_params` (devices, tensor split, --n-cpu-moe
overrides, no_alloc for a dry run), `llama_context_params`, and llama-bench's ggml threadpool.
"""

from __future__ import annotations

import ctypes
import os

from ..core import cache_types
from ..core.errors import EngineError
from ..memory import speculative
from ..settings.params import Params
from ..settings.values import rpc_endpoints
from .binding import ggml_lib, llama_module
from .ggml_devices import NO_DEVICE, find_device

MTP = speculative.MTP
LOAD_MODES = {"auto": "LLAMA_LOAD_MODE_AUTO", "none": "LLAMA_LOAD_MODE_NONE", "mmap": "LLAMA_LOAD_MODE_MMAP",
              "mlock": "LLAMA_LOAD_MODE_MLOCK", "mmap+mlock": "LLAMA_LOAD_MODE_MMAP_MLOCK",
              "dio": "LLAMA_LOAD_MODE_DIRECT_IO"}  # include/llama.h:206-213
SPLIT_MODE_IDS = {"none": 0, "layer": 1}  # enum llama_split_mode


class _BuftOverride(ctypes.Structure):
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


# common/common.h: LLM_FFN_EXPS_REGEX and llm_ffn_block_regex, as --n-cpu-moe builds them
N_CPU_MOE_PATTERN = r"blk\.{il}\.ffn_(up|down|gate|gate_up)_(ch|)exps"


def model_params(p: Params, *, no_alloc: bool, rpc=None, on_progress=None):
    """llama_model_params, and the ctypes objects it points into (keep them alive until the load ends).

    With RPC endpoints the model's devices are exactly those, in that order (as `--rpc` puts RPC servers
    first in llama.cpp's default device list); `tensor_split`, `split_mode` and `main_gpu` as llama.cpp reads them.
    """
    lc = llama_module()
    params = lc.llama_model_default_params()
    params.n_gpu_layers = p.n_gpu_layers
    endpoints = rpc_endpoints(rpc)
    # off: no repacked second copy of the weights (AMX, CPU_REPACK); an RPC dry run never repacks
    params.use_extra_bufts = p.repack and not (no_alloc and endpoints)
    params.load_mtp = p.spec_type == MTP  # llama-server loads the NextN layers only for draft-mtp
    params.split_mode = SPLIT_MODE_IDS[p.split_mode]
    params.main_gpu = p.main_gpu
    keep: list = []
    if endpoints == (NO_DEVICE,):
        devices = (ctypes.c_void_p * 1)(None)  # an empty list: no GPU, no op offload to one
        params.devices = ctypes.cast(devices, ctypes.c_void_p)
        keep.append(devices)
    elif endpoints:
        devices = (ctypes.c_void_p * (len(endpoints) + 1))(*[find_device(e) for e in endpoints], None)
        params.devices = ctypes.cast(devices, ctypes.c_void_p)
        keep.append(devices)
    if p.tensor_split:
        split = (ctypes.c_float * int(lc.llama_max_devices()))(*p.tensor_split)
        params.tensor_split = ctypes.cast(split, ctypes.POINTER(ctypes.c_float))
        keep.append(split)
    pairs = _overrides(p, endpoints)
    if pairs:
        patterns = [pattern for pattern, _ in pairs]
        overrides = (_BuftOverride * (len(pairs) + 1))(*[_BuftOverride(pattern, buft) for pattern, buft in pairs],
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
    else:  # --load-mode as llama.cpp's src/llama.cpp:69-75 names them
        params.load_mode = getattr(lc, LOAD_MODES[p.load_mode])
    return params, keep


def _overrides(p: Params, endpoints: tuple[str, ...]) -> list[tuple[bytes, int]]:
    """(pattern, buffer type) of every override, in llama.cpp's order: -ot's (each `REGEX=CPU`, `REGEX=X_Host`, or
    `REGEX=@N`: the N-th device of this load, as jobs.fit.probe writes a device's), then --n-cpu-moe's per block."""
    out: list[tuple[bytes, int]] = []
    cpu = None
    for piece in p.tensor_overrides:
        pattern, _, where = piece.partition("=")
        if where.startswith("@"):
            position = int(where[1:])
            if position >= len(endpoints) or endpoints == (NO_DEVICE,):
                raise EngineError(f"-ot {piece}: this load has {len(endpoints)} device(s)")
            lib = ggml_lib("ggml-base")
            lib.ggml_backend_dev_buffer_type.argtypes = [ctypes.c_void_p]
            lib.ggml_backend_dev_buffer_type.restype = ctypes.c_void_p
            out.append((pattern.encode(), lib.ggml_backend_dev_buffer_type(find_device(endpoints[position]))))
            continue
        cpu = cpu or _cpu_buffer_type()
        out.append((pattern.encode(), cpu))
    if p.n_cpu_moe:
        cpu = cpu or _cpu_buffer_type()
        out += [(N_CPU_MOE_PATTERN.replace("{il}", str(il)).encode(), cpu) for il in range(p.n_cpu_moe)]
    return out


def _cpu_buffer_type() -> int:
    cpu = ggml_lib("ggml-cpu")
    cpu.ggml_backend_cpu_buffer_type.restype = ctypes.c_void_p
    return cpu.ggml_backend_cpu_buffer_type()


def context_params(settings: Params):
    lc = llama_module()
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


def attach_threadpool(threads: Params):
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
