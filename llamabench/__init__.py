"""llamabench: what a GGUF model costs in memory at long context, and what llama.cpp really allocates.

The library is the product; the `llamabench` command is its face. See `llamabench.api`:

    import llamabench as lb
    record = lb.inspect("qwen3-5-35b-a3b", n_ctx="128k")
    record.kv_bytes_per_token        # 20480

The names below are loaded on first use, so `import llamabench` (and `llamabench --help`) load nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .world.versions import __version__

_WHERE = {  # public name -> the module that declares it
    **dict.fromkeys(("inspect", "verify", "verify_matrix", "fit", "fit_quants", "QuantFits", "bench", "roofline",
                     "quality", "report", "BenchRun",
                     "ModelReport", "Report"), "api"),
    **dict.fromkeys(("LlamabenchError", "UsageError"), "core.errors"),
    **dict.fromkeys(("DEFAULT_N_CTX", "Params"), "settings.params"),
    **dict.fromkeys(("BenchRecord", "FitRecord", "InspectRecord", "RooflineRecord", "VerifyRecord", "QualityRecord",
                     "read_records"), "records.records"),
    "MatrixResult": "memory.verification",
}

__all__ = ["inspect", "verify", "verify_matrix", "fit", "fit_quants", "QuantFits", "bench", "roofline", "quality",
           "report", "read_records",
           "Params", "DEFAULT_N_CTX", "InspectRecord", "VerifyRecord", "FitRecord", "BenchRecord", "RooflineRecord",
           "QualityRecord", "BenchRun",
           "MatrixResult", "Report", "ModelReport", "LlamabenchError", "UsageError", "__version__"]

if TYPE_CHECKING:
    from .api import (
        BenchRun,
        ModelReport,
        QuantFits,
        Report,
        bench,
        fit,
        fit_quants,
        inspect,
        quality,
        report,
        roofline,
        verify,
        verify_matrix,
    )
    from .core.errors import LlamabenchError, UsageError
    from .memory.verification import MatrixResult
    from .records.bench import BenchRecord
    from .records.fit import FitRecord
    from .records.inspect import InspectRecord, VerifyRecord
    from .records.quality import QualityRecord
    from .records.records import read_records
    from .records.roofline import RooflineRecord
    from .settings.params import DEFAULT_N_CTX, Params


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'llamabench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
