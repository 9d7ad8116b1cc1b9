"""llama-perplexity's per-token arithmetic on a context's logits: the base's compact log-probs, a choice's KLD.

`logprobs.cpp` is tools/perplexity/perplexity.cpp's own code (log_softmax and process_logits), compiled on first
use beside the memory-breakdown shim (`breakdown.build`, cached by the library and the source), so the numbers are
llama-perplexity's to the float given the same logits, at its speed (threads over rows, -O3). Rows are read where
llama.cpp left them (llama_get_logits: the outputs of the last decode, in order); nothing vocab-sized is copied.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from ..core.errors import EngineError
from ..memory.divergence import KldSums
from . import breakdown

SOURCE = Path(__file__).with_name("logprobs.cpp")
LIBRARY_NAME = "libllamabench_logprobs.so"


class _Sums(ctypes.Structure):  # struct llamabench_kld_sums (logprobs.cpp)
    _fields_ = [(name, ctypes.c_double) for name in KldSums.SUMMED] + [
        ("max_p_diff", ctypes.c_float), ("n_same_top", ctypes.c_uint64), ("count", ctypes.c_uint64)]


_lib = None


def _load():
    global _lib
    if _lib is None:
        try:
            lib = ctypes.CDLL(str(breakdown.build(SOURCE, LIBRARY_NAME, optimize="-O3",
                                                  what="llama-perplexity's log-prob arithmetic (logprobs.cpp)")))
        except (OSError, RuntimeError) as exc:
            raise EngineError(f"cannot measure quality here: {exc}") from None
        f32, i32, u16 = (np.ctypeslib.ndpointer(t, flags="C_CONTIGUOUS") for t in (np.float32, np.int32, np.uint16))
        lib.llamabench_base_rows.argtypes = [ctypes.c_int, ctypes.c_void_p, i32, ctypes.c_int, u16,
                                             np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS"), ctypes.c_int]
        lib.llamabench_base_rows.restype = None
        lib.llamabench_kld_rows.argtypes = [ctypes.c_int, ctypes.c_void_p, i32, ctypes.c_int, u16,
                                            ctypes.POINTER(_Sums), f32, f32, ctypes.c_int]
        lib.llamabench_kld_rows.restype = None
        _lib = lib
    return _lib


def row_width(n_vocab: int) -> int:
    """uint16 values per token in llama-perplexity's compact form: two floats (scale, min) and a padded vocab."""
    return 2 * ((n_vocab + 1) // 2) + 4


def base_rows(n_vocab: int, logits_ptr: int, next_tokens: np.ndarray, out: np.ndarray, n_threads: int) -> np.ndarray:
    """The base's rows (logits at `logits_ptr`, one per next token) into `out` (rows x row_width); their NLLs."""
    n = len(next_tokens)
    nll = np.empty(n, dtype=np.float64)
    _load().llamabench_base_rows(n_vocab, logits_ptr, next_tokens, n, out, nll, n_threads)
    return nll


class ChoiceSums:
    """One lossy choice's running sums against the base, and each scored token's KLD (for its percentiles)."""

    def __init__(self):
        self._sums = _Sums()
        self.kld_values: list[np.ndarray] = []

    def add(self, n_vocab: int, logits_ptr: int, next_tokens: np.ndarray, base: np.ndarray, n_threads: int) -> None:
        n = len(next_tokens)
        kld = np.empty(n, dtype=np.float32)
        p_diff = np.empty(n, dtype=np.float32)
        _load().llamabench_kld_rows(n_vocab, logits_ptr, next_tokens, n, base, ctypes.byref(self._sums), kld,
                                    p_diff, n_threads)
        self.kld_values.append(kld)

    def sums(self) -> KldSums:
        s = self._sums
        return KldSums(**{name: float(getattr(s, name)) for name in KldSums.SUMMED},
                       max_p_diff=float(s.max_p_diff), n_same_top=int(s.n_same_top), count=int(s.count))

    def all_kld(self) -> np.ndarray:
        return np.concatenate(self.kld_values) if self.kld_values else np.empty(0, dtype=np.float32)
