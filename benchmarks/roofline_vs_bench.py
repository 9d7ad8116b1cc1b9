"""roofline on this machine's CPU against what bench and llama-bench measure, on the tests' real GGUFs.

For each model (default: Gemma 3 270M and Qwen2.5-Coder 0.5B, Q4_K_M), alternating rounds of `llamabench bench`
and llama.cpp's own llama-bench (-p 512 -n 32 -d 0,2048,8192 -r 3 -t 2, repack off), then `roofline` (no --card:
this machine's CPU, the CPU backend's coefficients) for the same tests; prints each test's measured t/s per round
and the prediction's ratio to their mean.

    .venv/bin/python benchmarks/roofline_vs_bench.py [--rounds 2] [-d 0,2048,8192]

The CPU backend's coefficients were fitted on llama-bench runs of these two models on a machine of this kind
(benchmarks/published_runs/cpu.toml): these rounds are fresh runs, not that data.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import llamabench as lb  # noqa: E402
from tests.support import llama_server, real_model  # noqa: E402


def bench_round(path: Path, depths: str, tmp: Path, i: int) -> dict[str, float]:
    results = tmp / f"bench{i}.jsonl"
    lb.bench(str(path), n_prompt=512, n_gen=32, n_depth=depths, repetitions=3, n_threads=2, repack=False,
             results=results)
    return {r.test.name: r.avg_ts for r in lb.read_records(results).records if isinstance(r, lb.BenchRecord) and r.ok}


def llama_bench_round(path: Path, depths: str) -> dict[str, float]:
    exe = llama_server.tools_dir() / "llama-bench"
    out = subprocess.run([str(exe), "-m", str(path), "-p", "512", "-n", "32", "-d", depths, "-r", "3", "-t", "2",
                          "--repack", "0", "-o", "jsonl"], capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            name = (f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}") + (
                f" @ d{r['n_depth']}" if r["n_depth"] else "")
            rows[name] = r["avg_ts"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-d", default="0,2048,8192")
    a = ap.parse_args()
    depths = [int(x) for x in a.d.split(",")]
    for model in (real_model.GEMMA, real_model.QWEN):
        path, why = real_model.fetch(model)
        if path is None:
            sys.exit(why)
        measured: dict[str, dict[str, list[float]]] = {"bench": {}, "llama-bench": {}}
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(a.rounds):  # alternating: bench, then llama-bench, round after round
                for name, rows in (("bench", bench_round(path, a.d, Path(tmp), i)),
                                   ("llama-bench", llama_bench_round(path, a.d))):
                    for test, ts in rows.items():
                        measured[name].setdefault(test, []).append(ts)
        record = lb.roofline(str(path), n_prompt=512, n_gen=32, n_depth=depths, n_ctx=max(depths) + 512)
        print(f"\n{model.name}: roofline on this machine's CPU ({record.speed_model.machine.name}) against "
              f"{a.rounds} alternating rounds of bench and llama-bench")
        print(f"{'test':>16} {'bench t/s':>22} {'llama-bench t/s':>22} {'roofline':>9} {'/ bench':>8} {'/ l-b':>7}")
        for row in record.rows:
            b, lb_ = measured["bench"].get(row.test, []), measured["llama-bench"].get(row.test, [])
            mb, ml = statistics.mean(b), statistics.mean(lb_)
            print(f"{row.test:>16} {' '.join(f'{x:.1f}' for x in b):>22} {' '.join(f'{x:.1f}' for x in lb_):>22} "
                  f"{row.avg_ts:9.1f} {row.avg_ts / mb:8.2f} {row.avg_ts / ml:7.2f}")


if __name__ == "__main__":
    main()
