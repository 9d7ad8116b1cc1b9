"""`llamabench bench` against llama.cpp's own llama-bench, alternating, on the same GGUF and settings.

Each round runs both (the order alternates between rounds) with the same -p/-n/-d/-r/-t and flash
attention; the table gives, per test, the median over rounds of bench t/s / llama-bench t/s, and the
same for the wall time of the whole run. llama-bench is built from the llama.cpp vendored in
llama-cpp-python by scripts/build_llama_tools.sh.

    .venv/bin/python benchmarks/vs_llama_bench.py [--model GGUF] [--rounds 3] [-p 256] [-n 32] [-d 0,2048]
        [-r 3] [-t 2] [--repack 0]
The default model is the real Gemma 3 270M Q4_K_M that the tests fetch (tests/support/real_model.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' support package

import llamabench as lb  # noqa: E402


def test_name(n_prompt: int, n_gen: int, depth: int) -> str:
    base = f"pp{n_prompt}" if n_prompt else f"tg{n_gen}"
    return base if depth == 0 else f"{base} @ d{depth}"


def run_llama_bench(tools: Path, model: str, a) -> tuple[dict[str, float], float]:
    cmd = [str(tools / "llama-bench"), "-m", model, "-p", a.p, "-n", a.n, "-d", a.d, "-r", str(a.r), "-t", str(a.t),
           "-fa", "1", "--repack", a.repack, "-o", "jsonl"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {test_name(r["n_prompt"], r["n_gen"], r["n_depth"]): r["avg_ts"] for r in rows}, wall


def run_ours(model: str, a) -> tuple[dict[str, float], float]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = lb.bench(model, n_ctx=a.ctx, n_prompt=a.p, n_gen=a.n, n_depth=a.d, repetitions=a.r, n_threads=a.t,
                       flash_attn=True, repack=a.repack, results=Path(tmp) / "r.jsonl")
        wall = time.perf_counter() - t0
    return {r.test.name: r.avg_ts for r in run.records if r.ok}, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--rounds", type=int, default=4, help="even, so that each tool goes first equally often")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="rounds run first and not counted")
    ap.add_argument("-p", default="256")
    ap.add_argument("-n", default="32")
    ap.add_argument("-d", default="0,2048")
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=None, help="bench's n_ctx (default: deepest depth + the tests)")
    ap.add_argument("--repack", default="0", help="0 on CPUs whose AMX repack crashes llama.cpp (as here)")
    ap.add_argument("--tools", type=Path, default=Path.home() / ".cache" / "llama-tools" / "0.3.36" / "bin")
    a = ap.parse_args()
    if a.model is None:
        from tests.support import real_model

        a.model = real_model.path_or_exit()
    if a.ctx is None:  # llama-bench sizes its context to depth + prompt + gen; bench takes it as -c
        a.ctx = max(int(d) for d in a.d.split(",")) + max(int(x) for x in a.p.split(",")) + max(
            int(x) for x in a.n.split(","))
    ratios: dict[str, list[float]] = {}
    walls: list[float] = []
    for _ in range(a.warmup_rounds):  # page cache, CPU clocks: the first runs pay for both
        run_ours(a.model, a), run_llama_bench(a.tools, a.model, a)
    for rnd in range(a.rounds):
        order = ("ours", "theirs") if rnd % 2 == 0 else ("theirs", "ours")
        results = {}
        for who in order:
            results[who] = run_ours(a.model, a) if who == "ours" else run_llama_bench(a.tools, a.model, a)
        (ours, wall_ours), (theirs, wall_theirs) = results["ours"], results["theirs"]
        for name, ts in theirs.items():
            if name in ours:
                ratios.setdefault(name, []).append(ours[name] / ts)
        walls.append(wall_theirs / wall_ours)
        line = ", ".join(f"{n} {ours.get(n, float('nan')):.2f}/{theirs[n]:.2f}" for n in theirs)
        print(f"round {rnd + 1} ({' then '.join(order)}): {line}; wall {wall_ours:.1f} s / {wall_theirs:.1f} s",
              file=sys.stderr)
    print(f"{Path(a.model).name}: -p {a.p} -n {a.n} -d {a.d} -r {a.r} -t {a.t} -fa 1 --repack {a.repack}, "
          f"{a.rounds} rounds alternating after {a.warmup_rounds} warm-up round(s)")
    print(f"{'test':<18} {'median bench / llama-bench t/s':>32}   per round")
    for name, values in ratios.items():
        print(f"{name:<18} {statistics.median(values):>32.3f}   " + " ".join(f"{v:.3f}" for v in values))
    print(f"{'wall time':<18} {statistics.median(walls):>32.3f}   " + " ".join(f"{v:.3f}" for v in walls)
          + "   (llama-bench / bench: above 1 means bench was faster)")


if __name__ == "__main__":
    main()
