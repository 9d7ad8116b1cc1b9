"""`llamabench --help` here against an earlier commit, side by side in one run, in alternating rounds.

    .venv/bin/python benchmarks/help_speed.py [--base 00e88bb] [--rounds 15]

Each round starts a fresh interpreter on each tree (`python -m llamabench.cli --help` with the tree as the working
folder, so that tree's package is the one imported) and times it with the wall clock; medians are printed with
their ratio. The base commit is checked out into a temporary git worktree and removed afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_once(tree: Path, argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "llamabench.cli", *argv], cwd=tree, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="00e88bb",
                    help="the commit to compare with (default: the commit before issue 28)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--argv", default="--help", help="the command line to time (default --help)")
    a = ap.parse_args()
    argv = a.argv.split()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), a.base], check=True)
        try:
            trees = {"base": base, "here": ROOT}
            for tree in trees.values():  # warm the file cache and the .pyc files once, untimed
                run_once(tree, argv)
            times: dict[str, list[float]] = {name: [] for name in trees}
            for i in range(a.rounds):
                order = list(trees) if i % 2 == 0 else list(reversed(trees))
                for name in order:
                    times[name].append(run_once(trees[name], argv))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"llamabench {' '.join(argv)}: {a.rounds} alternating rounds")
    for name, t in times.items():
        label = a.base if name == "base" else "working tree"
        print(f"  {label:<14} median {med[name] * 1000:7.1f} ms  (min {min(t) * 1000:.1f}, max {max(t) * 1000:.1f})")
    print(f"  ratio here / base: {med['here'] / med['base']:.2f}")


if __name__ == "__main__":
    main()
