"""`llamabench bench MODEL`: real contexts, their allocations, and long-context tok/s at depth."""

from __future__ import annotations

import argparse
import json
import sys

from .. import api
from ..core import stats
from ..core.safe_text import escaped, shell_word, shown_path
from ..core.units import count, duration
from ..llama import ggml_devices
from ..records.records import read_records
from ..render.bench import render, variance_warning
from ..render.progress import Progress
from ..settings import arguments
from ..settings.params import OutputFormat
from ..settings.values import ALL_LAYERS, Runtime
from . import SUMMARY
from .output import api_options, finite, keywords, warn

HELP = SUMMARY["bench"]
EXAMPLES = """examples:
  llamabench bench qwen3-5-35b-a3b -c 131072 -p 512 -n 32 -d 0,4096 -r 2 -fa on
  llamabench bench model.gguf -c 32k,128k -ctk f16,q8_0 -ctv f16,q8_0 -ngl 99 -o jsonl
  llamabench bench model.gguf -c 32k -d 0-16384+4096 -p 512 -n 32   # depths 0, 4096, ..., 16384
  llamabench bench qwen3-5-35b-a3b -c 131072 --dry-run          # print the plan only
  llamabench bench model.gguf -ngl 99 --rpc 10.0.0.2:50052 -ts 1,1  # spread over a ggml-rpc-server, as llama-bench
  llamabench bench model.gguf --runtime llama-server -c 8192 -np 2 --concurrency 2 -d 0,2048 -p 256 -n 32
  llamabench bench model.gguf --runtime llama-server --server-cmd "llama-server -m model.gguf -c 32768 -np 4 -kvu"
  llamabench bench model.gguf --runtime llama-server --url http://127.0.0.1:8080 -d 0,4096
  llamabench bench qwen3-5-35b-a3b --runtime llama-server --spec-type none,draft-mtp -d 0,4096  # MTP beside none
Each configuration runs in its own child process; every test is appended to --results as soon
as it is measured, a failed configuration is recorded with llama.cpp's reason and the sweep goes
on, and --resume skips what the results file already holds. A catalog id runs on its geometry
twin. Exit code 1 when any test failed (the count is printed).
--runtime llama-server benches llama.cpp's llama-server through its HTTP API instead (one server per
configuration, stopped when the bench ends): per depth it fills each slot once through the prompt cache,
then times P new tokens (prefill, TTFT) and N generated ones (decode), the server's own timings beside the
client's clock; a line per depth on stderr.
"""
OPTIONS = api_options(api.bench)  # the tests, the results file, --rpc, the runtime and llama-server's options
SERVER_PARAMS = ("n_seq", "kv_unified", "spec_type", "spec_draft_n_max")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *api.BENCH_PARAMS, *SERVER_PARAMS, *OPTIONS, "output"),
                            lists=(*api.BENCH_LISTS, "n_prompt", "n_gen", "n_depth", "n_seq", "spec_type"),
                            defaults={"output": OutputFormat.MD, "runtime": None, "concurrency": None,
                                      "n_gpu_layers": None,
                                      "n_ctx": None, "spec_type": None, "spec_draft_n_max": None},
                            helps={"n_ctx": "context length n_ctx: 4096 or 32k (default: the deepest depth + prompt + "
                                            "generated tokens, as llama-bench sizes its contexts)",
                                   "runtime": "the program timed: llama-cpp-python (a Llama() context in a child, as "
                                   "llama-bench; the default) or llama-server (through its HTTP API)",
                                   "n_seq": "llama-server's slots (-np); --runtime llama-server only",
                                   "kv_unified": "llama-server: one KV stream for all slots; --runtime llama-server "
                                   "only",
                                   "spec_type": "llama-server's speculative decoding, a list benched side by side: "
                                   "none,draft-mtp (the model's MTP layer), ngram-*; --runtime llama-server only",
                                   "spec_draft_n_max": "draft tokens per step (llama-server's default 3); "
                                   "--runtime llama-server only"})


def _keywords(args: argparse.Namespace) -> dict:
    kwargs = keywords(args, (*api.BENCH_PARAMS, *OPTIONS))
    given = {n: getattr(args, n) for n in SERVER_PARAMS if getattr(args, n) not in ((1,), 1, False, None)}
    if args.runtime is not None and str(args.runtime) == Runtime.LLAMA_SERVER:
        given = {n: getattr(args, n) for n in SERVER_PARAMS if getattr(args, n) is not None}
    return kwargs | given


def _print_plan(plan, model: str) -> None:
    print(f"plan for {shown_path(plan.model)}: {count(len(plan.configurations), 'cell')} x "
          f"{count(len(plan.tests), 'test')}, "
          f"{plan.repetitions} repetitions, runtime {plan.runtime}, results -> {shown_path(plan.results)}")
    print(f"  layers: {_layers_words(plan)}")
    if plan.skipped:
        print(f"  resume: {plan.skipped} of {len(plan.configurations) * len(plan.tests)} tests are in "
              f"{shown_path(plan.results)} already: skipped")
    if plan.estimate is not None:
        print(f"  time: {_estimate_words(plan.estimate)}")
    if not ggml_devices.supports_gpu_offload():
        print(f"  a card: this build times this machine's CPU; what llama-bench would print on a card you do not "
              f"have: llamabench roofline {shell_word(model)} --card rtx-4090 (or rtx-3090, rx-7900-xtx, "
              "apple-m4-pro-24gb...; a misspelt name gets the near ones suggested)")
    for i, p in enumerate(plan.configurations):
        print(f"  {p.label}: " + ", ".join(t.name for t in plan.tests))
        if plan.commands:
            print(f"    {escaped(plan.commands[i])}")  # shell words: $'...' for a control character


def _estimate_words(e) -> str:
    """The plan's tokens, and its time where an earlier run calibrates it (estimated: said so)."""
    tokens = f"{e.fill_tokens:,} tokens of fill, {e.test_tokens:,} tokens of tests"
    if e.seconds is None:
        return f"{tokens}; {e.basis}"
    return f"about {duration(e.seconds)} (estimated: {e.basis}) for {tokens}"


def _layers_words(plan) -> str:
    """Where the layers go, in words, one phrase per -ngl and --n-cpu-moe of the sweep (bench's -ngl default: every
    layer on a GPU build, as llama-bench's), and what a build without a GPU backend does with them."""
    phrases = []
    for ngl in dict.fromkeys(p.n_gpu_layers for p in plan.configurations):
        phrases.append("all on the CPU (-ngl 0)" if ngl == 0 else
                       f"all on the GPU (-ngl all: {ALL_LAYERS}, llama-bench's default)" if ngl >= ALL_LAYERS else
                       f"the last {ngl} layers on the GPU, the rest on the CPU (-ngl {ngl})")
    for moe in dict.fromkeys(p.n_cpu_moe for p in plan.configurations if p.n_cpu_moe):
        phrases.append(f"the routed experts of layers 0-{moe - 1} in system RAM (--n-cpu-moe {moe})")
    words = "; ".join(phrases)
    if any(p.n_gpu_layers for p in plan.configurations) and not ggml_devices.supports_gpu_offload():
        words += "; this build has no GPU backend: the GPU's layers go to --rpc hosts where given, else the CPU"
    elif not ggml_devices.supports_gpu_offload():
        words += ": this build has no GPU backend"
    return words


def _rate(m) -> str:
    """A measurement's total t/s (every parallel request's tokens over the wall time), its server's beside it: the
    mean of the repetitions' t/s, the table's figure (BenchRecord.avg_ts), not their tokens over their time."""
    if not m.samples_ns:
        return "failed: " + (m.reason or "")[:80]
    c = m.server.concurrency if m.server else 1
    total = stats.mean([stats.tokens_per_second(m.test.n_tokens * c, ns) for ns in m.samples_ns])
    own = m.server.server_ts(str(m.test.kind)) if m.server else None
    return f"{total:.2f} t/s" + (f" (server's own {own:.2f} per request)" if own else "")


def _depth_line(data) -> None:
    """--runtime llama-server: one plain line per depth on stderr, terminal or not."""
    fill = f"filled {data['slots']} slot(s) in {data['fill_ms'] / 1e3:.1f} s; " if data["fill_ms"] else ""
    shown = ", ".join(f"{m.test.name.split(' @')[0]} {_rate(m)}" for m in data["measurements"])
    print(f"llamabench: llama-server depth {data['depth']}: {fill}{shown}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    kwargs = _keywords(args)
    if args.dry_run:
        _print_plan(api.bench(args.model, **kwargs), args.model)
        return 0
    progress = Progress(0, enabled=sys.stderr.isatty())  # the "plan" event gives the number of tests

    def on_event(kind: str, data) -> None:
        if kind == "depth":
            progress.close()
            _depth_line(data)
        progress(kind, data)

    try:
        run_ = api.bench(args.model, on_event=on_event, **kwargs)
    finally:
        progress.close()
    for line in read_records(run_.results).warnings if args.resume else ():
        warn(line)
    if run_.interrupted:
        print(f"llamabench: interrupted: the {len(run_.records)} tests measured so far are in "
              f"{shown_path(run_.results)}; rerun with --resume", file=sys.stderr)
        return 130
    if run_.records:
        if args.output in (OutputFormat.JSON, OutputFormat.JSONL):
            dicts = [r.to_dict() for r in run_.records]
            print(json.dumps(finite(dicts), indent=2, default=str) if args.output is OutputFormat.JSON
                  else "\n".join(json.dumps(finite(d), separators=(",", ":"), default=str) for d in dicts))
        else:
            print(render(list(run_.records), str(args.output)))
    if (noise := variance_warning(run_.records)) is not None:
        warn(noise)
    print(f"{count(len(run_.records), 'test')} recorded in {shown_path(run_.results)}"
          + (f", {run_.failed} failed" if run_.failed else "")
          + (f", {run_.skipped} already there (--resume)" if run_.skipped else ""), file=sys.stderr)
    return 1 if run_.failed else 0
