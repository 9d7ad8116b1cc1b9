"""`llamabench report RESULTS.jsonl...`: record.json, report.md and plots from result files."""

from __future__ import annotations

import argparse

from .. import api
from ..core.safe_text import shown_path
from ..settings import arguments
from . import SUMMARY
from .output import warn

HELP = SUMMARY["report"]
EXAMPLES = """examples:
  llamabench report results.jsonl --out-dir my-report --compare qwen3-30b-a3b
  llamabench report run-a.jsonl run-b.jsonl --out-dir merged/     # several machines: one series each
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("result_files", "out_dir", "compare"),
                            helps={"out_dir": "report folder (default reports/local/<label>/; one sub-folder per "
                                              "model when the results hold several)"})


def run(args: argparse.Namespace) -> int:
    result = api.report(args.result_files, out_dir=args.out_dir, compare=args.compare)
    for line in result.warnings:
        warn(line)
    for model in result.models:
        print(f"{model.label}: wrote {len(model.files)} files to {shown_path(model.out_dir)}")
        for record in model.kv_efficiency:
            measured = "measured" if record.measured_prefill_tok_s is not None else "no timed run"
            print(f"  {record.id}: {record.kv_bytes_per_token:,} B/token, "
                  f"{record.kv_bytes_at_context / 2**20:.2f} MiB at {record.context_length:,} ({measured})")
    return 0
