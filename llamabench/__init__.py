"""llamabench: what a GGUF model costs in memory at long context, and what llama.cpp really allocates.

The library is the product; the `llamabench` command is its face. See `llamabench.api`:

    import llamabench as lb
    record = lb.inspect("qwen3-5-35b-a3b", n_ctx="128k")
    record.kv_bytes_per_token        # 20480
"""

from .api import (BenchRun, ModelReport, Report, bench, fit, inspect, report, roofline, verify,
                  verify_matrix)  # after the subpackages bench/, fit/ and report/: these names are the functions
from .errors import LlamabenchError, UsageError
from .params import DEFAULT_N_CTX, Params
from .results.records import BenchRecord, FitRecord, InspectRecord, RooflineRecord, VerifyRecord, read_records
from .verification import MatrixResult
from .versions import __version__

__all__ = ["inspect", "verify", "verify_matrix", "fit", "bench", "roofline", "report", "read_records", "Params",
           "DEFAULT_N_CTX", "InspectRecord", "VerifyRecord", "FitRecord", "BenchRecord", "RooflineRecord", "BenchRun",
           "MatrixResult", "Report", "ModelReport", "LlamabenchError", "UsageError", "__version__"]
