"""`llamabench demo`: the main job on the built-in default (no model download needed)."""

from __future__ import annotations

import argparse
import sys
import time

from .. import catalog

HELP = "inspect and verify the built-in Qwen3.5-35B-A3B at n_ctx 131072 (or MODEL)"
EXAMPLES = """examples:
  llamabench demo                      # built-in catalog entry qwen3-5-35b-a3b, via its geometry twin
  llamabench demo gemma-3-27b --ctx 32768
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", default=catalog.DEFAULT_MODEL_ID,
                        help=f"a catalog id or a GGUF file (default {catalog.DEFAULT_MODEL_ID})")
    parser.add_argument("--ctx", "-c", dest="n_ctx", type=int, default=131072, help="n_ctx (default 131072)")


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)
    print(f"[demo] {title}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from ..cli import main

    start = time.perf_counter()
    _step(f"inspect {args.model} --ctx {args.n_ctx}: layout and theoretical footprint")
    rc = main(["inspect", args.model, "--ctx", str(args.n_ctx)])
    if rc:
        return rc
    _step(f"verify {args.model} --ctx {args.n_ctx}: theory against llama.cpp's own allocation lines")
    rc = main(["verify", args.model, "--ctx", str(args.n_ctx)])
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return rc
