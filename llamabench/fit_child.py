"""Child process of `fit --verify`: create one context for real and report what it took.

Job on stdin (JSON), one JSON object on stdout. A separate process gives a clean RSS baseline.
"""

from __future__ import annotations

import json
import sys

from . import sysinfo
from .errors import LlamabenchError
from .footprint import CacheSettings


def main() -> int:
    job = json.loads(sys.stdin.read())
    from .engine import Session

    settings = CacheSettings(n_ctx=job["n_ctx"], type_k=job["type_k"], type_v=job["type_v"],
                             flash_attn=job["flash_attn"], n_ubatch=job["n_ubatch"])
    rss_before, gpu_before = sysinfo.process_rss_bytes(), sysinfo.gpu_used_bytes()
    try:
        session = Session(job["path"], settings, n_gpu_layers=job["n_gpu_layers"], extra_bufts=job["extra_bufts"])
    except LlamabenchError as exc:
        print(json.dumps({"error": str(exc)}))
        return 0
    with session:
        print(json.dumps({"allocations": session.allocations.to_dict(), "rss_before_bytes": rss_before,
                          "rss_after_bytes": sysinfo.process_rss_bytes(), "gpu_used_before_bytes": gpu_before,
                          "gpu_used_after_bytes": sysinfo.gpu_used_bytes()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
