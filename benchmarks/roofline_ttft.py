"""roofline's TTFT (time to prefill a prompt as deep as the row) against llama-bench's pp, side by side.

    .venv/bin/python benchmarks/roofline_ttft.py [--rounds 2] [--models PATH,...] [--prompts 1024,2048,3072]

Two parts:
- **Held out, published:** the catalog's Llama 3.1 8B on the cards whose llama-bench runs are published
  (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, May 2024). roofline takes each card's pp512; its pp1024, pp4096 and
  pp8192 are not used, and are set beside the prediction here.
- **Measured here, in alternating rounds, on real GGUFs:** each round runs `llamabench bench` (pp512 at depths 0 and
  2048, tg32 at 0 and 2048: what `--calibrate` reads), predicts the TTFT of each prompt length from it, then runs
  llama-bench's own pp of that length (the anchor) and prints both and their ratio.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llamabench as lb  # noqa: E402
from tests.support.llama_server import tools_dir  # noqa: E402

PUBLISHED = {"rtx-4090": {512: 7138.99, 1024: 6898.71, 4096: 5265.68, 8192: 4039.68},
             "rtx-3090": {512: 4030.40, 1024: 3865.39, 4096: 3169.91, 8192: 2527.40},
             "rtx-4080": {512: 5389.74, 1024: 5064.99, 4096: 3790.96, 8192: 2882.03},
             "apple-m1-max-64gb": {512: 408.23, 1024: 355.45, 4096: 329.84, 8192: 302.92}}
MODELS = [Path.home() / ".cache/llamabench/models" / n for n in ("gemma-3-270m-q4_k_m.gguf",
                                                                  "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")]


def published() -> None:
    print("| card | prompt | published pp t/s | roofline t/s (prompt / TTFT) | ratio |\n|---|---:|---:|---:|---:|")
    for name, runs in PUBLISHED.items():
        rows = {r.depth: r for r in lb.roofline("llama-3-1-8b", card=name, n_depth=list(runs), n_ctx=8192).rows}
        for depth, ts in runs.items():
            ours = depth / rows[depth].ttft_s
            note = " (calibrated on)" if depth == 512 else ""
            print(f"| {name} | {depth}{note} | {ts:.1f} | {ours:.1f} | {ours / ts:.3f} |")


def llama_bench_pp(model: Path, prompts: list[int]) -> dict[int, float]:
    bench = tools_dir() / "llama-bench"
    out = subprocess.run([str(bench), "-m", str(model), "-p", ",".join(map(str, prompts)), "-n", "0", "-r", "2",
                          "--repack", "0", "-fa", "on", "-o", "md"], capture_output=True, text=True, check=True).stdout
    return {int(m[1]): float(m[2]) for m in re.finditer(r"\|\s+pp(\d+)\s+\|\s+([\d.]+)", out)}


def measured(rounds: int, models: list[Path], prompts: list[int]) -> None:
    print("\n| model | round | prompt | roofline TTFT s | llama-bench TTFT s (prompt / pp t/s) | ratio |\n"
          "|---|---:|---:|---:|---:|---:|")
    for model in models:
        for rnd in range(1, rounds + 1):
            with tempfile.TemporaryDirectory() as folder:
                results = Path(folder) / "calibration.jsonl"
                lb.bench(str(model), n_prompt=[512], n_gen=[32], n_depth=[0, 2048], repetitions=2, n_ctx=4096,
                         repack=False, results=str(results))
                rows = {r.depth: r for r in lb.roofline(str(model), calibrate=str(results), n_depth=prompts,
                                                        n_ctx=4096).rows}
            anchor = llama_bench_pp(model, prompts)
            for n in prompts:
                theirs = n / anchor[n]
                print(f"| {model.name} | {rnd} | {n} | {rows[n].ttft_s:.2f} | {theirs:.2f} | "
                      f"{rows[n].ttft_s / theirs:.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--models", default=",".join(str(m) for m in MODELS))
    parser.add_argument("--prompts", default="1024,2048,3072")
    args = parser.parse_args()
    started = time.monotonic()
    published()
    models = [Path(m) for m in args.models.split(",") if Path(m).is_file()]
    if tools_dir() is None or not models:
        print("\nno llama-bench or no model here: the measured part is skipped (make tools; make models)")
    else:
        measured(args.rounds, models, [int(p) for p in args.prompts.split(",")])
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
