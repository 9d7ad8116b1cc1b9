"""`llamabench report RESULTS.jsonl...`: record.json, report.md and plots from result files."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UsageError
from ..paths import reports_dir

HELP = "write kv_efficiency records, a markdown report and plots from result files (runs nothing)"
EXAMPLES = """examples:
  llamabench report results.jsonl --out-dir my-report --compare qwen3-30b-a3b
  llamabench report run-a.jsonl run-b.jsonl --out-dir merged/     # several machines: one series each
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", type=Path, metavar="RESULTS",
                        help="JSON Lines files written by inspect/verify/fit/bench --results")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="report folder (default reports/local/<label>/; one sub-folder per model when the "
                             "results hold several)")
    parser.add_argument("--compare", action="append", default=[], metavar="ID",
                        help="catalog id to draw beside the model in the KV plot (repeatable)")


def run(args: argparse.Namespace) -> int:
    from ..catalog import get_entry
    from ..report.build import write_report
    from ..report.load import load_results

    for model_id in args.compare:
        get_entry(model_id)  # a clear error for an unknown id, before any work
    models = load_results(args.results)
    if not models:
        raise UsageError("no records to report")
    if args.out_dir and len(models) > 1:
        targets = {label: args.out_dir / label for label in models}
    elif args.out_dir:
        targets = {label: args.out_dir for label in models}
    else:
        targets = {label: reports_dir() / label for label in models}
    for label, results in models.items():
        written = write_report(results, targets[label], compare=args.compare, sources=[str(p) for p in args.results])
        print(f"{label}: wrote {len(written['files'])} files to {written['out_dir']}")
        for record in written["records"]:
            measured = "measured" if record["measured_prefill_tok_s"] is not None else "no timed run"
            print(f"  {record['id']}: {record['kv_bytes_per_token']:,} B/token, "
                  f"{record['kv_bytes_at_context'] / 2**20:.2f} MiB at {record['context_length']:,} ({measured})")
    return 0
