"""llama-cpp-python's binding as the engine modules use it: the llama_cpp module (imported late, off
`import llamabench`), ggml's shared libraries for the functions the binding does not cover, and llama.cpp's log
(every level) routed into a buffer while a block runs, with the error line that explains a failure.
"""

from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import EngineError

_lock = threading.Lock()
_buffer: list[str] | None = None
_error_lines: list[str] = []  # ERROR-level lines of the current capture
GGML_LOG_LEVEL_ERROR = 4  # ggml's levels: DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
_callback = None  # keep a reference: llama.cpp holds the raw pointer
_backend_ready = False


def llama_module():
    import llama_cpp

    return llama_cpp


def lib_path(name: str) -> Path:
    """A shared library llama-cpp-python ships (libggml-cpu.so, libggml-rpc.so...)."""
    return Path(llama_module().__file__).parent / "lib" / f"lib{name}.so"


def ggml_lib(name: str):
    """One of llama-cpp-python's ggml libraries, for the functions its binding does not cover."""
    path = lib_path(name)
    if not path.exists():
        hint = " with CMAKE_ARGS=-DGGML_RPC=on (make install does)" if name == "ggml-rpc" else ""
        raise EngineError(f"this llama-cpp-python build has no {path.name}: reinstall it{hint}")
    return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def ensure_logging() -> None:
    """Route llama.cpp's log (every level) into our buffer, and nothing to stderr."""
    global _callback, _backend_ready
    if _callback is not None:
        return
    lc = llama_module()

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
    ensure_logging()
    with _lock:
        lines: list[str] = []
        _buffer = lines
        _error_lines.clear()
        try:
            yield lines
        finally:
            _buffer = None


def error_reason(log_lines: list[str], default: str) -> str:
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
