"""llamabench: what a GGUF model costs in memory at long context, and what llama.cpp really allocates.

The library is the product; the `llamabench` command is its face. See `llamabench.api`:

    import llamabench as lb
    record = lb.inspect("qwen3-5-35b-a3b", n_ctx="128k")
    record.kv_bytes_per_token        # 20480

The names below resolve on first use (PEP 562), so that the processes llamabench starts for
llama.cpp (`python -m llamabench.llama.child`) load only what they run, not the whole library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .versions import __version__

_EXPORTS = {
    "llamabench.api": ("inspect", "verify", "verify_matrix", "fit", "bench", "roofline", "report", "BenchRun",
                       "Report", "ModelReport"),
    "llamabench.verification": ("MatrixResult",),
    "llamabench.errors": ("LlamabenchError", "UsageError"),
    "llamabench.params": ("DEFAULT_N_CTX", "Params"),
    "llamabench.results.records": ("BenchRecord", "FitRecord", "InspectRecord", "RooflineRecord", "VerifyRecord",
                                   "read_records"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [*_WHERE, "__version__"]

if TYPE_CHECKING:  # for type checkers and editors: the same names, imported at once
    from .api import BenchRun, ModelReport, Report, bench, fit, inspect, report, roofline, verify, verify_matrix
    from .errors import LlamabenchError, UsageError
    from .params import DEFAULT_N_CTX, Params
    from .results.records import (BenchRecord, FitRecord, InspectRecord, RooflineRecord, VerifyRecord,
                                  read_records)
    from .verification import MatrixResult


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'llamabench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
