"""Wall time of the default `llamabench fit` run (2 cards x 3 cache types x placements, max-context search).

The first run of a catalog id writes its full-size shape twin into the cache; the timed runs reuse it,
as a user's second `fit` would. Prints each run and the number of llama.cpp dry runs it needed.

    .venv/bin/python benchmarks/fit_speed.py [--model qwen3-5-35b-a3b] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import llamabench as lb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-5-35b-a3b")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    lb.fit(args.model, n_ctx=4096, vram=["16GiB"], type_k="f16", type_v="f16")  # writes the shape twin once
    print(f"shape twin ready in {time.perf_counter() - t0:.1f} s (written once, then cached)")
    times = []
    for i in range(args.runs):
        t0 = time.perf_counter()
        result = lb.fit(args.model).fit  # the defaults: 16 and 24 GiB, 128k, f16 / q8_0 / q4_0
        times.append(time.perf_counter() - t0)
        print(f"run {i + 1}: {times[-1]:.2f} s, {len(result.rows)} rows, {result.dry_runs} llama.cpp dry runs")
    print(f"default fit of {args.model}: mean {statistics.mean(times):.2f} s, best {min(times):.2f} s (target < 10 s)")


if __name__ == "__main__":
    main()
