"""The default `llamabench fit` run here against an earlier commit, side by side in one run, in alternating rounds,
with the same rows (2 cards x 3 cache types x placements, the max-context search).

    .venv/bin/python benchmarks/fit_speed.py [--base 00e88bb] [--model qwen3-5-35b-a3b] [--rounds 3] [--cold]

With --cold every fit is a user's first: a fresh, empty cache folder each time (the shape twin written, every dry
run asked of llama.cpp or read from what the package ships).

Each round starts `python -m llamabench.cli fit MODEL -o json` in a fresh interpreter in each tree (the tree as the
working folder, so its package is the one imported) and times it with the wall clock. Round 0 is untimed: it
writes each tree's shape twin (and, here, llama.cpp's dry runs into the cache), as a user's first fit does; the
timed rounds are a user's later fits. The rows of both trees must be the same (the JSON less its timings).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_once(tree: Path, model: str, cold: bool = False) -> tuple[float, dict]:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as fresh:
        if cold:  # a user's first fit: nothing in the cache
            env["LLAMABENCH_CACHE_DIR"] = fresh
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "llamabench.cli", "fit", model, "-o", "json"], cwd=tree,
                              check=True, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - start
    data = json.loads(done.stdout)
    for key in ("seconds", "dry_runs"):
        data["fit"].pop(key, None)
    data.pop("timestamp", None)
    data.pop("versions", None)
    for row in data["fit"]["rows"]:  # the stored form names each row's -ngl / --n-cpu-moe since issue 32: compare the
        for key in ("n_gpu_layers", "n_cpu_moe", "tensor_split"):  # context alone, and "none fits" as 0
            row["settings"].pop(key, None)
        row.pop("ram_read_bytes", None)  # a field added since (the speed ranking): not in an older tree's rows
        row["max_n_ctx"] = row["max_n_ctx"] or 0
    return seconds, data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="00e88bb", help="the commit to compare with (default: before issue 28)")
    ap.add_argument("--model", default="qwen3-5-35b-a3b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="every fit a first fit: an empty cache each time")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), a.base], check=True)
        try:
            trees = {"base": base, "here": ROOT}
            first = {name: run_once(tree, a.model, a.cold) for name, tree in trees.items()}  # round 0: untimed
            times: dict[str, list[float]] = {name: [] for name in trees}
            rows: dict[str, dict] = {}
            for i in range(a.rounds):
                for name in (list(trees) if i % 2 == 0 else list(reversed(trees))):
                    seconds, rows[name] = run_once(trees[name], a.model, a.cold)
                    times[name].append(seconds)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    same = json.dumps(rows["base"]["fit"]["rows"], sort_keys=True) == json.dumps(rows["here"]["fit"]["rows"],
                                                                                  sort_keys=True)
    kind = ", every fit a first fit" if a.cold else ""
    print(f"llamabench fit {a.model} (the defaults{kind}): round 0 base {first['base'][0]:.1f} s, "
          f"here {first['here'][0]:.1f} s; {a.rounds} alternating rounds after it")
    for name, t in times.items():
        label = a.base if name == "base" else "working tree"
        print(f"  {label:<14} median {statistics.median(t):6.2f} s  (min {min(t):.2f}, max {max(t):.2f})")
    print(f"  ratio here / base: {statistics.median(times['here']) / statistics.median(times['base']):.2f}; "
          f"rows {'the same' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
