"""The speed model against measured decode speed at depth, on a real GGUF (default: the test Gemma 3 270M).

Runs `llamabench bench` with tg at several depths (or reads --results), calibrates the model on the
shallowest and deepest depth, and prints its prediction for every measured depth with the MBU.

    .venv/bin/python benchmarks/speed_model.py [--model GGUF] [-d 0,4096,8192,16384,28672] [-n 32] [-r 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' support package

import llamabench as lb  # noqa: E402
from llamabench.render.speed import render_roofline  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("-d", default="0,4096,8192,16384,28672")
    ap.add_argument("-n", default="32")
    ap.add_argument("-r", default="3")
    ap.add_argument("-t", default="2")
    ap.add_argument("--repack", default="0")
    ap.add_argument("--results", type=Path, default=None, help="use these bench records instead of measuring")
    a = ap.parse_args()
    if a.model is None:
        from tests.support import real_model

        a.model = real_model.path_or_exit()
    deepest = max(int(d) for d in a.d.split(","))
    ctx = str(-(-(deepest + int(a.n)) // 256) * 256)
    with tempfile.TemporaryDirectory() as tmp:
        results = a.results or Path(tmp) / "depth.jsonl"
        if a.results is None:
            lb.bench(a.model, n_ctx=ctx, n_prompt=0, n_gen=a.n, n_depth=a.d, repetitions=a.r, n_threads=a.t,
                     repack=a.repack, results=results)
        print(render_roofline(lb.roofline(a.model, calibrate=results, n_ctx=ctx)))
        print("\nMBU per depth (bytes per token x t/s / measured peak):")
        for r in lb.read_records(results).records:
            if isinstance(r, lb.BenchRecord) and r.ok and r.roofline:
                rf = r.roofline
                print(f"  {r.test.name:<16} {r.avg_ts:7.2f} t/s  {rf.bytes_per_token / 2**20:7.1f} MiB/token  "
                      f"{rf.achieved_gbps:6.2f} GB/s of {rf.peak_gbps} GB/s: MBU {rf.mbu * 100:.1f}%")


if __name__ == "__main__":
    main()
