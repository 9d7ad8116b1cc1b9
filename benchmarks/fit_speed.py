"""Wall time of the default `llamabench fit` run (2 cards x 3 cache types x placements, max-context search).

The first run of a catalog id writes its full-size shape twin into the cache; the timed runs reuse it,
as a user's second `fit` would. Prints each run and the number of llama.cpp dry runs it needed.

    .venv/bin/python benchmarks/fit_speed.py [--model qwen3-5-35b-a3b] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from llamabench import source as model_source
from llamabench.fit.job import FitSession
from llamabench.twin.shape import cached_shape_twin


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-5-35b-a3b")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    resolved = model_source.resolve(args.model)
    t0 = time.perf_counter()
    cached_shape_twin(resolved.metadata, resolved.label)
    print(f"shape twin ready in {time.perf_counter() - t0:.1f} s (written once, then cached)")
    times = []
    for i in range(args.runs):
        t0 = time.perf_counter()
        session = FitSession.open(resolved, flash_attn=True, n_ubatch=512, reserve=512 * 2**20, verify=False)
        result = session.evaluate([("16GiB", 16 * 2**30), ("24GiB", 24 * 2**30)], [131072],
                                  [("f16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0")])
        times.append(time.perf_counter() - t0)
        print(f"run {i + 1}: {times[-1]:.2f} s, {len(result.rows)} rows, {session.probe.calls} llama.cpp dry runs")
    print(f"default fit of {args.model}: mean {statistics.mean(times):.2f} s, best {min(times):.2f} s (target < 10 s)")


if __name__ == "__main__":
    main()
