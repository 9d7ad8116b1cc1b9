"""Depth sweep: incremental fill (what `llamabench bench` does) against refilling from zero per depth.

Both strategies run the same tests (tg16 at each depth, 1 repetition) through the same code
(`llamabench.llama.child.measure_tests`) on the same context; only the fill differs. Prints the
wall time of each and their ratio.

    .venv/bin/python benchmarks/depth_sweep.py [--model qwen3-30b-a3b] [--depths 0,2048,4096,8192]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from llamabench.jobs.twin.build import write_twin
from llamabench.llama.child import measure_tests
from llamabench.llama.engine import Session
from llamabench.llama.messages import Fill, TestFailed  # noqa: E402
from llamabench.settings.bench_tests import bench_tests
from llamabench.settings.params import Params
from llamabench.world import catalog


def run(path: str, n_ctx: int, depths: tuple[int, ...], n_gen: int, threads: int, refill: bool) -> tuple[float, int]:
    plan = bench_tests((0,), (n_gen,), depths)
    filled = 0

    def emit(event):
        nonlocal filled
        if isinstance(event, Fill) and event.done == event.total:
            filled += event.total
        if isinstance(event, TestFailed):
            raise RuntimeError(event.reason)

    with Session(path, Params(n_ctx=n_ctx, n_threads=threads)) as session:
        t0 = time.perf_counter()
        measure_tests(session, plan, 1, emit, refill=refill)
        return time.perf_counter() - t0, filled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--depths", default="0,2048,4096,8192")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("-t", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    depths = tuple(int(d) for d in args.depths.split(","))
    n_ctx = max(depths) + 1024
    with tempfile.TemporaryDirectory() as tmp:
        path = str(write_twin(catalog.get_entry(args.model).metadata, Path(tmp) / "twin.gguf").path)
        incremental, inc_tokens = run(path, n_ctx, depths, args.n, args.t, refill=False)
        refill, ref_tokens = run(path, n_ctx, depths, args.n, args.t, refill=True)
    print(f"\n{args.model} twin, depths {args.depths}, tg{args.n} at each, n_ctx {n_ctx}, {args.t} threads")
    print(f"{'strategy':<22} {'tokens filled':>14} {'wall s':>9}")
    print(f"{'incremental (bench)':<22} {inc_tokens:>14} {incremental:>9.1f}")
    print(f"{'refill from zero':<22} {ref_tokens:>14} {refill:>9.1f}")
    print(f"refill / incremental = {refill / incremental:.2f}x")


if __name__ == "__main__":
    main()
