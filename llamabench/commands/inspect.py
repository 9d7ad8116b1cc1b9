"""`llamabench inspect MODEL`: the hybrid layer layout and the theoretical KV footprint."""

from __future__ import annotations

import argparse

from .. import api
from ..render.inspect import render_inspection
from ..settings import arguments
from . import SUMMARY
from .output import keywords, show, warn

HELP = SUMMARY["inspect"]
EXAMPLES = """examples:
  llamabench inspect qwen3-5-35b-a3b                 # built-in catalog entry, n_ctx 131072
  llamabench inspect model.gguf --ctx 32k -ctk q8_0 -ctv q8_0 --json
  llamabench inspect model.gguf --quant Q2_K        # the file's weight in Q2_K: llama.cpp's recipe, nothing written
"""


RUNTIME_DEFAULTS = dict(defaults={"n_seq": None, "kv_unified": None, "swa_full": None},
                        helps={"n_seq": "sequences (llama-server's slots, -np); default: the runtime's "
                                        "(llama-server's auto: 4 slots on one unified KV stream; Llama(): 1)",
                               "kv_unified": "one KV stream shared by all sequences (llama-server's -kvu; on with "
                                             "its auto -np)"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *api.INSPECT_PARAMS, "runtime", "model_draft", "quant", "output",
                                     "results"), **RUNTIME_DEFAULTS)


def run(args: argparse.Namespace) -> int:
    record = api.inspect(args.model, results=args.results, runtime=args.runtime, model_draft=args.model_draft,
                         quant=args.quant, **keywords(args, api.INSPECT_PARAMS))
    if record.inspection.context_warning:
        warn(record.inspection.context_warning)
    show(record, args.output, render_inspection)
    return 0
