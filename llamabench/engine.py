"""The one module that talks to llama_cpp (llama-cpp-python's low-level ctypes API).

Everything it returns is plain data; no ctypes pointer leaves this module.
"""

from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from . import cache_types
from .alloc_log import Allocations, parse_allocations
from .errors import EngineError
from .footprint import CacheSettings

_lock = threading.Lock()
_buffer: list[str] | None = None
_callback = None  # keep a reference: llama.cpp holds the raw pointer
_backend_ready = False


def _llama():
    import llama_cpp

    return llama_cpp


def _ensure_logging() -> None:
    """Route llama.cpp's log (every level) into our buffer, and nothing to stderr."""
    global _callback, _backend_ready
    if _callback is not None:
        return
    lc = _llama()

    def on_log(level, text, user_data):
        if _buffer is not None and text:
            _buffer.append(text.decode("utf-8", errors="replace"))

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
        try:
            yield lines
        finally:
            _buffer = None


def llama_cpp_version() -> str:
    return _llama().__version__


def system_info() -> str:
    return _llama().llama_print_system_info().decode("utf-8", errors="replace").strip()


def supports_gpu_offload() -> bool:
    return bool(_llama().llama_supports_gpu_offload())


def _model_params(*, n_gpu_layers: int, no_alloc: bool):
    lc = _llama()
    params = lc.llama_model_default_params()
    params.n_gpu_layers = n_gpu_layers
    if no_alloc:
        params.no_alloc = True
        params.load_mode = lc.LLAMA_LOAD_MODE_NONE  # mmap asserts under no_alloc
    return params


def _context_params(settings: CacheSettings, *, n_threads: int | None = None):
    lc = _llama()
    params = lc.llama_context_default_params()
    params.n_ctx = settings.n_ctx
    params.n_batch = settings.n_batch
    params.n_ubatch = settings.n_ubatch
    params.n_seq_max = settings.n_seq
    params.n_rs_seq = settings.n_rs_seq
    params.type_k = cache_types.ggml_type_id(settings.type_k)
    params.type_v = cache_types.ggml_type_id(settings.type_v)
    params.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_ENABLED if settings.flash_attn else lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
    params.swa_full = settings.swa_full
    params.kv_unified = settings.kv_unified
    params.no_perf = True
    threads = n_threads or max(1, os.cpu_count() or 1)
    params.n_threads = threads
    params.n_threads_batch = threads
    return params


def _reason(log_lines: list[str], default: str) -> str:
    """The most telling error line llama.cpp logged, for a one-line failure message."""
    text = "".join(log_lines).splitlines()
    for needle in ("error", "failed", "unable", "invalid", "not supported", "exception"):
        for line in reversed(text):
            if needle in line.lower():
                return line.strip()
    return default


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


def dry_run(path: str, settings: CacheSettings, *, n_gpu_layers: int = 0) -> DryRun:
    """Load with no_alloc and create the context: llama.cpp prints every size without allocating KV."""
    return dry_run_many(path, [settings], n_gpu_layers=n_gpu_layers)[0]


def dry_run_many(path: str, settings_list: list[CacheSettings], *, n_gpu_layers: int = 0) -> list[DryRun]:
    """One no_alloc model load, then one dry-run context per settings (in order)."""
    lc = _llama()
    results = []
    with captured_log() as lines:
        model = lc.llama_model_load_from_file(os.fsencode(path), _model_params(n_gpu_layers=n_gpu_layers, no_alloc=True))
        if not model:
            raise EngineError(f"{path}: llama.cpp could not load the model ({_reason(lines, 'no reason logged')})")
        try:
            size, n_params = lc.llama_model_size(model), lc.llama_model_n_params(model)
            load_log = "".join(lines)
            for settings in settings_list:
                lines.clear()
                ctx = lc.llama_init_from_model(model, _context_params(settings))
                if not ctx:
                    raise EngineError(f"{path}: llama.cpp could not create the context ({_reason(lines, 'no reason logged')})")
                try:
                    n_ctx, n_ctx_seq, n_seq = lc.llama_n_ctx(ctx), lc.llama_n_ctx_seq(ctx), lc.llama_n_seq_max(ctx)
                finally:
                    lc.llama_free(ctx)
                log = load_log + "".join(lines)
                results.append(DryRun(parse_allocations(log), int(size), int(n_params), int(n_ctx), int(n_ctx_seq), int(n_seq), log))
        finally:
            lc.llama_model_free(model)
    return results


def smoke_decode(path: str, *, n_ctx: int = 512, n_tokens: int = 8, settings: CacheSettings | None = None) -> int:
    """Load for real, create a context, decode a short prompt and one more token; returns tokens decoded."""
    lc = _llama()
    settings = settings or CacheSettings(n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=min(512, n_ctx))
    with captured_log() as lines:
        model = lc.llama_model_load_from_file(os.fsencode(path), _model_params(n_gpu_layers=0, no_alloc=False))
        if not model:
            raise EngineError(f"{path}: llama.cpp could not load the model ({_reason(lines, 'no reason logged')})")
        try:
            ctx = lc.llama_init_from_model(model, _context_params(settings, n_threads=2))
            if not ctx:
                raise EngineError(f"{path}: llama.cpp could not create the context ({_reason(lines, 'no reason logged')})")
            try:
                tokens = (lc.llama_token * n_tokens)(*[3 + (i * 37) % 256 for i in range(n_tokens)])
                rc = lc.llama_decode(ctx, lc.llama_batch_get_one(tokens, n_tokens))
                if rc != 0:
                    raise EngineError(f"{path}: llama_decode returned {rc} ({_reason(lines, 'no reason logged')})")
                one = (lc.llama_token * 1)(5)
                rc = lc.llama_decode(ctx, lc.llama_batch_get_one(one, 1))
                if rc != 0:
                    raise EngineError(f"{path}: llama_decode returned {rc} on the second batch")
            finally:
                lc.llama_free(ctx)
        finally:
            lc.llama_model_free(model)
    return n_tokens + 1
