"""`llamabench bench MODEL`: real contexts, their allocations, and long-context tok/s at depth."""

from __future__ import annotations

import argparse
import json
import sys

from .. import api
from ..core import stats
from ..records.records import read_records
from ..render.bench import render
from ..render.progress import Progress
from ..settings import arguments
from ..settings.params import OutputFormat
from . import SUMMARY
from .output import finite, keywords, warn

HELP = SUMMARY["bench"]
EXAMPLES = """examples:
  llamabench bench qwen3-5-35b-a3b -c 131072 -p 512 -n 32 -d 0,4096 -r 2 -fa on
  llamabench bench model.gguf -c 32k,128k -ctk f16,q8_0 -ctv f16,q8_0 -ngl 99 -o jsonl
  llamabench bench model.gguf -c 32k -d 0-16384+4096 -p 512 -n 32   # depths 0, 4096, ..., 16384
  llamabench bench qwen3-5-35b-a3b -c 131072 --dry-run          # print the plan only
  llamabench bench model.gguf -ngl 99 --rpc 10.0.0.2:50052 -ts 1,1  # spread over a ggml-rpc-server, as llama-bench
Each configuration runs in its own child process; every test is appended to --results as soon
as it is measured, a failed configuration is recorded with llama.cpp's reason and the sweep goes
on, and --resume skips what the results file already holds. A catalog id runs on its geometry
twin. Exit code 1 when any test failed (the count is printed).
"""
TESTS = ("n_prompt", "n_gen", "n_depth", "repetitions")
OPTIONS = ("rpc", "results", "resume", "dry_run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *api.BENCH_PARAMS, *TESTS, *OPTIONS, "output"),
                            lists=(*api.BENCH_LISTS, "n_prompt", "n_gen", "n_depth"),
                            defaults={"output": OutputFormat.MD, "n_ctx": None},
                            helps={"n_ctx": "context length n_ctx: 4096 or 32k (default: the deepest depth + prompt + "
                                            "generated tokens, as llama-bench sizes its contexts)"})


def run(args: argparse.Namespace) -> int:
    kwargs = keywords(args, (*api.BENCH_PARAMS, *TESTS, *OPTIONS))
    if args.dry_run:
        plan = api.bench(args.model, **kwargs)
        print(f"plan for {plan.model}: {len(plan.configurations)} cells x {len(plan.tests)} tests, {plan.repetitions} "
              f"repetitions, results -> {plan.results}")
        for p in plan.configurations:
            print(f"  {p.label}: " + ", ".join(t.name for t in plan.tests))
        return 0
    progress = Progress(0, enabled=sys.stderr.isatty())  # the "plan" event gives the number of tests
    try:
        run_ = api.bench(args.model, on_event=progress, **kwargs)
    finally:
        progress.close()
    for line in read_records(run_.results).warnings if args.resume else ():
        warn(line)
    if run_.interrupted:
        print(f"llamabench: interrupted: the {len(run_.records)} tests measured so far are in {run_.results}; "
              "rerun with --resume", file=sys.stderr)
        return 130
    if run_.records:
        if args.output in (OutputFormat.JSON, OutputFormat.JSONL):
            dicts = [r.to_dict() for r in run_.records]
            print(json.dumps(finite(dicts), indent=2, default=str) if args.output is OutputFormat.JSON
                  else "\n".join(json.dumps(finite(d), separators=(",", ":"), default=str) for d in dicts))
        else:
            print(render(list(run_.records), str(args.output)))
    wide = [r for r in run_.records if r.ok and r.spread is not None and r.spread > stats.SPREAD_WARNING]
    if wide:
        warn(f"{', '.join(r.test.name for r in wide)}: t/s varied by more than {stats.SPREAD_WARNING:.0%} of the mean "
             "between repetitions; close other programs, pin threads (--cpu-mask) or raise -r")
    print(f"{len(run_.records)} tests recorded in {run_.results}" + (f", {run_.failed} failed" if run_.failed else "")
          + (f", {run_.skipped} already there (--resume)" if run_.skipped else ""), file=sys.stderr)
    return 1 if run_.failed else 0
