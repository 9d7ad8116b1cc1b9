"""`llamabench verify MODEL`: theory against llama.cpp's own sizes, side by side."""

from __future__ import annotations

import argparse

from .. import api
from ..render.verify import render_matrix, render_verify
from ..settings import arguments
from . import SUMMARY
from .inspect import RUNTIME_DEFAULTS
from .output import keywords, show, warn

HELP = SUMMARY["verify"]
EXAMPLES = """examples:
  llamabench verify qwen3-5-35b-a3b --ctx 131072      # writes (or reuses) the catalog twin
  llamabench verify model.gguf --ctx 32768 -ctk q8_0 -ctv q8_0 --n-seq 4
  llamabench verify gpt-oss-20b --matrix               # n_ctx x cache types x sequences x swa_full
A catalog id is checked on its geometry twin; a GGUF file is checked as it is (llama.cpp's dry run
reads its metadata and tensor infos, no weights). Exit code 1 on any mismatch.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *api.INSPECT_PARAMS, "runtime", "model_draft", "output", "matrix",
                                     "results"),
                            **RUNTIME_DEFAULTS)


def run(args: argparse.Namespace) -> int:
    if args.matrix:
        result = api.verify_matrix(args.model)
        show(result, args.output, render_matrix)
        return 0 if result.ok else 1
    record = api.verify(args.model, results=args.results, runtime=args.runtime, model_draft=args.model_draft,
                        **keywords(args, api.INSPECT_PARAMS))
    if record.context_warning:
        warn(record.context_warning)
    show(record, args.output, render_verify)
    return 0 if record.ok else 1
