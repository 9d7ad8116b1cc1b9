"""`llamabench demo`: the main job on the built-in default (no model download needed).

Writes the geometry twin, then inspect, verify, fit and a short bench at n_ctx 131072, each
appending to reports/<model>/results.jsonl, and finally the report from those records.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import catalog, model_source
from ..paths import reports_dir

HELP = "the main job: twin, inspect, verify, fit, a short bench and the report, on the built-in default"
EXAMPLES = """examples:
  llamabench demo                         # Qwen3.5-35B-A3B via its geometry twin, n_ctx 131072
  llamabench demo gemma-3-27b
  llamabench demo model.gguf --depths 0,1024
"""
NATURAL_COMPARISONS = {"qwen3-5-35b-a3b": ["qwen3-30b-a3b"], "qwen3-next-80b-a3b": ["qwen3-30b-a3b"]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", default=catalog.DEFAULT_MODEL_ID,
                        help=f"a catalog id or a GGUF file (default {catalog.DEFAULT_MODEL_ID})")
    parser.add_argument("--ctx", "-c", dest="n_ctx", type=int, default=131072, help="n_ctx (default 131072)")
    parser.add_argument("--depths", default="0,2048", help="bench depths (default 0,2048: short on 2 CPU cores)")
    parser.add_argument("-p", "--n-prompt", dest="n_prompt", default="256", help="bench prompt tokens (default 256)")
    parser.add_argument("-n", "--n-gen", dest="n_gen", default="16", help="bench generated tokens (default 16)")
    parser.add_argument("-r", "--repetitions", default="2", help="bench repetitions (default 2)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="report folder (default reports/<model>/)")


def run(args: argparse.Namespace) -> int:
    from ..cli import main

    start = time.perf_counter()
    resolved = model_source.resolve(args.model)
    label = resolved.label if resolved.entry else Path(args.model).stem
    out_dir = args.output or reports_dir() / label
    results = out_dir / "results.jsonl"
    ctx = str(args.n_ctx)
    steps = [
        ("inspect: layer layout and theoretical footprint", ["inspect", args.model, "--ctx", ctx, "--results", str(results)]),
        ("verify: theory against llama.cpp's own allocation lines (dry run)",
         ["verify", args.model, "--ctx", ctx, "--results", str(results)]),
        ("fit: does it fit on a 16 / 24 GB card?", ["fit", args.model, "--ctx", ctx, "--results", str(results)]),
        (f"bench: a real context at n_ctx {ctx}, prefill and decode at depths {args.depths}",
         ["bench", args.model, "-c", ctx, "-p", args.n_prompt, "-n", args.n_gen, "-d", args.depths, "-r",
          args.repetitions, "--results", str(results)]),
        ("report: kv_efficiency record, report.md and plots",
         ["report", str(results), "-o", str(out_dir)]
         + [a for c in NATURAL_COMPARISONS.get(label, []) for a in ("--compare", c)]),
    ]
    if resolved.entry:
        from ..twin.cache import cached_twin

        print(f"[demo] writing / reusing the geometry twin of {label}", file=sys.stderr, flush=True)
        twin = cached_twin(resolved.metadata, label)
        print(f"geometry twin: {twin} ({twin.stat().st_size / 2**20:.1f} MiB)")
    for i, (title, argv) in enumerate(steps, 1):
        print(f"\n== {i}/{len(steps)} {title}", flush=True)
        print(f"[demo] step {i}/{len(steps)}: {title} ({time.perf_counter() - start:.0f} s so far)",
              file=sys.stderr, flush=True)
        rc = main(argv)
        if rc not in (0,):
            print(f"[demo] step {i} ended with exit code {rc}", file=sys.stderr)
            if argv[0] in ("verify", "report"):
                return rc
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s: open {out_dir / 'report.md'}")
    return 0
