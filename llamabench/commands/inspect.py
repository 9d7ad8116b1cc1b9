"""`llamabench inspect MODEL`: the hybrid layer layout and the theoretical KV footprint."""

from __future__ import annotations

import argparse
import json
import sys

from .. import source as model_source
from ..inspection import inspect, kv_curve
from . import options

HELP = "layer layout and theoretical KV / recurrent footprint from GGUF metadata"
EXAMPLES = """examples:
  llamabench inspect qwen3-5-35b-a3b                 # built-in catalog entry, n_ctx 131072
  llamabench inspect model.gguf --ctx 32k -ctk q8_0 -ctv q8_0 --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model(parser)
    options.add_cache_arguments(parser)
    options.add_output(parser)
    options.add_results(parser, "an inspect record")


def run(args: argparse.Namespace) -> int:
    from ..render.inspect import render_inspection

    source = model_source.resolve(args.model)
    result = inspect(source.metadata, options.settings_from_args(args), source.entry)
    if result.context_warning:
        print(f"llamabench: warning: {result.context_warning}", file=sys.stderr)
    if args.results:
        from ..results.records import InspectRecord, append

        append(args.results, InspectRecord(source.model_block(result.geometry.architecture),
                                           inspection=result.to_dict(), kv_curve=kv_curve(result)))
    if args.output == options.OutputFormat.JSON:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(render_inspection(result))
    return 0
