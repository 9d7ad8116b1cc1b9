"""llamabench: what a GGUF model costs in memory at long context, and what llama.cpp really allocates.

The library is the product; the `llamabench` command is its face. See `llamabench.api`:

    import llamabench as lb
    record = lb.inspect("qwen3-5-35b-a3b", n_ctx="128k")
    record.kv_bytes_per_token        # 20480
"""

from .api import (BenchRun, MatrixResult, ModelReport, Report, bench, fit, inspect, report, roofline, verify,
                  verify_matrix)
from .errors import LlamabenchError
from .params import DEFAULT_N_CTX, Params
from .results.records import (BenchRecord, FitRecord, InspectRecord, RooflineRecord, VerifyRecord, read_records)
from .versions import __version__

__all__ = ["inspect", "verify", "verify_matrix", "fit", "bench", "roofline", "report", "read_records", "Params",
           "DEFAULT_N_CTX", "InspectRecord", "VerifyRecord", "FitRecord", "BenchRecord", "RooflineRecord", "BenchRun",
           "MatrixResult", "Report", "ModelReport", "LlamabenchError", "__version__"]
