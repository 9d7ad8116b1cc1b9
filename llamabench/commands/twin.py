"""`llamabench twin MODEL --out OUT.gguf`: write a geometry twin of a catalog model or a real GGUF."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import UsageError
from ..core.safe_text import shell_word, shown_path
from ..core.units import mib
from ..jobs import source as model_source
from ..jobs.twin.build import caches_as_the_source, write_twin
from ..model.architectures import no_rule_reason
from ..model.layout import has_layout_rule
from ..settings import arguments
from ..world.outputs import check_output
from . import SUMMARY

HELP = SUMMARY["twin"]
EXAMPLES = """examples:
  llamabench twin qwen3-5-35b-a3b --out qwen35-twin.gguf
  llamabench twin /models/gemma-3-27b-Q4_K_M.gguf --out gemma3-twin.gguf   # copies the file's layout keys
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", "out"),
                            helps={"out": "where to write the twin (default: <label>-twin.gguf)"})


def run(args: argparse.Namespace) -> int:
    source = model_source.resolve(args.model)
    out = args.out or Path(f"{source.label}-twin.gguf")
    if out.is_dir():
        raise UsageError(f"--out {out} is a folder: give the file to write, e.g. {out / (source.label + '-twin.gguf')}")
    check_output(out, "twin")  # before any work: not the model itself, a link or a device
    if out.exists() and out.stat().st_size > 0 and _magic(out) != b"GGUF":
        raise UsageError(f"--out {out}: an existing file that is not a GGUF; not writing a twin over it")
    show = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if show:
            print(f"\rwriting {shown_path(out)}: {done}/{total} tensors", end="" if done < total else "\n",
                  file=sys.stderr)

    ruled = has_layout_rule(source.metadata)
    result = write_twin(source.metadata, out, progress=progress, require_layout=ruled)
    g = result.geometry
    if g is None:  # no layout rule: llama.cpp itself checks the twin's caches against the file's
        checked = caches_as_the_source(str(source.gguf_for_llama()), result.path)
        print(_wrote(result))
        arch = source.metadata.architecture
        print(f"twin of {source.name} ({arch}): no layout rule in llamabench ({no_rule_reason(arch)}); llama.cpp "
              f"sizes the twin's caches as the file's ({checked}); use it with: llamabench verify "
              f"{shell_word(str(result.path))}")
        return 0
    kinds: dict[str, int] = {}
    for layer in g.layers:
        kinds[str(layer.kind)] = kinds.get(str(layer.kind), 0) + 1
    layout = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    print(_wrote(result))
    print(f"twin of {source.name} ({g.architecture}): {g.n_layer} layers ({layout}), "
          f"hidden size {g.n_embd}; check it with: llamabench verify {shell_word(str(result.path))}")
    return 0


def _wrote(result) -> str:
    """The line that says where the twin went and what it holds, its path escaped."""
    return (f"wrote {shown_path(result.path)}: {mib(result.file_bytes)} ({mib(result.disk_bytes)} on disk), "
            f"{result.n_tensors} tensors, {result.seconds:.2f} s")


def _magic(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4)
