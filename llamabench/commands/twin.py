"""`llamabench twin SOURCE -o OUT.gguf`: write a geometry twin of a catalog model or a real GGUF."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import model_source
from ..units import mib

HELP = "write a tiny GGUF with a real model's layer layout and cache geometry"
EXAMPLES = """examples:
  llamabench twin qwen3-5-35b-a3b -o qwen35-twin.gguf
  llamabench twin /models/gemma-3-27b-Q4_K_M.gguf -o gemma3-twin.gguf   # copies the file's layout keys
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="a catalog id or a real GGUF file")
    parser.add_argument("-o", "--output", type=Path, help="where to write the twin (default: <source>-twin.gguf)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the random weights (default 0)")


def run(args: argparse.Namespace) -> int:
    from ..twin.build import write_twin

    resolved = model_source.resolve(args.source)
    label = resolved.entry.id if resolved.entry else Path(args.source).stem
    out = args.output or Path(f"{label}-twin.gguf")
    show = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if show:
            print(f"\rwriting {out}: {done}/{total} tensors", end="" if done < total else "\n", file=sys.stderr)

    result = write_twin(resolved.metadata, out, seed=args.seed, progress=progress)
    g = result.geometry
    kinds: dict[str, int] = {}
    for layer in g.layers:
        kinds[str(layer.kind)] = kinds.get(str(layer.kind), 0) + 1
    layout = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    print(f"wrote {result.path}: {mib(result.file_bytes)} ({mib(result.disk_bytes)} on disk), "
          f"{result.n_tensors} tensors, {result.seconds:.2f} s")
    print(f"twin of {resolved.metadata.display_name} ({g.architecture}): {g.n_layer} layers ({layout}), "
          f"hidden size {g.n_embd}; check it with: llamabench verify {result.path}")
    return 0
