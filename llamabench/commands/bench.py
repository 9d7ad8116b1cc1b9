"""`llamabench bench MODEL`: real contexts, their allocations, and long-context tok/s at depth."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import model_source, options
from ..errors import UsageError
from ..paths import reports_dir

HELP = "create real llama.cpp contexts, record what they allocate and how fast they run at depth"
EXAMPLES = """examples:
  llamabench bench qwen3-5-35b-a3b -c 131072 -p 512 -n 32 -d 0,4096 -r 2 -fa on
  llamabench bench model.gguf -c 32768,131072 -ctk f16,q8_0 -ctv f16,q8_0 -ngl 99 -o jsonl
  llamabench bench qwen3-5-35b-a3b -c 131072 --dry-run          # print the plan only
Each configuration cell runs in its own child process; every test is appended to --results as soon
as it is measured, a failed cell is recorded with llama.cpp's reason and the sweep goes on, and
--resume skips what the results file already holds. A catalog id runs on its geometry twin.
"""


def _list(conv):
    def parse(text: str):
        try:
            values = tuple(conv(part.strip()) for part in text.split(",") if part.strip())
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if not values:
            raise argparse.ArgumentTypeError("empty list")
        return values
    return parse


def _nonneg(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} cannot be negative")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a GGUF file or a catalog id (runs on its geometry twin)")
    parser.add_argument("-c", "--ctx", dest="n_ctx", type=_list(options.ctx_int), default=(131072,), help="n_ctx list (default 131072)")
    parser.add_argument("-p", "--n-prompt", dest="n_prompt", type=_list(_nonneg), default=(512,), help="prompt tokens (default 512)")
    parser.add_argument("-n", "--n-gen", dest="n_gen", type=_list(_nonneg), default=(128,), help="generated tokens (default 128)")
    parser.add_argument("-d", "--n-depth", dest="depths", type=_list(_nonneg), default=(0,), help="depths (default 0)")
    parser.add_argument("-ctk", "--cache-type-k", dest="type_k", type=_list(options.cache_type), default=("f16",))
    parser.add_argument("-ctv", "--cache-type-v", dest="type_v", type=_list(options.cache_type), default=("f16",))
    parser.add_argument("-fa", "--flash-attn", dest="flash_attn", type=_list(options.on_off), default=(True,), help="on|off list (default on)")
    parser.add_argument("-ngl", "--n-gpu-layers", dest="n_gpu_layers", type=_list(_nonneg), default=(0,), help="layers on the GPU (default 0)")
    parser.add_argument("-b", "--batch-size", dest="n_batch", type=_list(options.positive_int), default=(2048,))
    parser.add_argument("-ub", "--ubatch-size", dest="n_ubatch", type=_list(options.positive_int), default=(512,))
    parser.add_argument("-t", "--threads", dest="n_threads", type=_list(options.positive_int), default=None,
                        help="threads (default: physical cores)")
    parser.add_argument("-r", "--repetitions", type=options.positive_int, default=3, help="repetitions (default 3)")
    parser.add_argument("-o", "--output", choices=("md", "csv", "json", "jsonl"), default="md", help="stdout format (default md)")
    parser.add_argument("--results", type=Path, default=None, help="JSONL file to append to (default reports/<model>/bench.jsonl)")
    parser.add_argument("--resume", action="store_true", help="skip tests already in --results")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")


class Progress:
    """A one-line progress display on stderr; silent when stderr is not a terminal."""

    def __init__(self, n_tests: int, enabled: bool):
        self.enabled = enabled
        self.n_tests = n_tests
        self.done = 0
        self.start = time.perf_counter()
        self.cell = ""

    def _show(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()

    def _eta(self) -> str:
        if not self.done:
            return "ETA ?"
        elapsed = time.perf_counter() - self.start
        return f"ETA {elapsed / self.done * (self.n_tests - self.done):.0f}s"

    def __call__(self, kind: str, data) -> None:
        if kind == "cell":
            c = data["cell"]
            self.cell = f"cell {data['index'] + 1}/{data['total']} n_ctx={c.n_ctx} K={c.type_k} V={c.type_v} fa={int(c.flash_attn)}"
            self._show(f"[{self.cell}] creating context")
        elif kind == "fill":
            rate = data["done"] / max(data["seconds"], 1e-9)
            left = (data["total"] - data["done"]) / rate if rate else 0
            self._show(f"[{self.cell}] filling to depth {data['depth']}: {data['done']}/{data['total']} tokens, "
                       f"{rate:.0f} t/s, fill ETA {left:.0f}s")
        elif kind == "record":
            self.done += 1
            status = "ok" if data["status"] == "ok" else "FAILED"
            self._show(f"[{self.cell}] {data['test']} {status} ({self.done}/{self.n_tests} tests, {self._eta()})")

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    import psutil

    from .. import gguf_file
    from ..bench.plan import SweepSpec, cells, tests
    from ..bench.render import render
    from ..bench.runner import ModelInfo, run_sweep
    from ..layout import geometry_from_metadata
    from ..twin.cache import cached_twin

    threads = args.n_threads or (psutil.cpu_count(logical=False) or 1,)
    spec = SweepSpec(n_ctx=args.n_ctx, n_prompt=args.n_prompt, n_gen=args.n_gen, depths=args.depths,
                     type_k=args.type_k, type_v=args.type_v, flash_attn=args.flash_attn,
                     n_gpu_layers=args.n_gpu_layers, n_batch=args.n_batch, n_ubatch=args.n_ubatch,
                     n_threads=threads, repetitions=args.repetitions)
    if any(c == 0 for c in spec.n_ctx):
        raise UsageError("-c 0 is not allowed in a sweep: give the context length")
    plan_cells, plan_tests = cells(spec), tests(spec)
    if not plan_tests:
        raise UsageError("nothing to measure: -p and -n are both 0")
    resolved = model_source.resolve(args.model)
    label = resolved.entry.id if resolved.entry else Path(args.model).stem
    results = args.results or reports_dir() / label / "bench.jsonl"
    if args.dry_run:
        print(f"plan for {label}: {len(plan_cells)} cells x {len(plan_tests)} tests, {spec.repetitions} repetitions, "
              f"results -> {results}")
        for cell in plan_cells:
            print(f"  {cell.key}: " + ", ".join(t.name for t in plan_tests))
        return 0
    path = str(resolved.path) if resolved.path else str(cached_twin(resolved.metadata, label))
    meta = gguf_file.read_metadata(path)
    model = ModelInfo(label=label, path=path, architecture=meta.architecture, is_twin=resolved.path is None,
                      geometry=geometry_from_metadata(meta))
    progress = Progress(len(plan_cells) * len(plan_tests), enabled=sys.stderr.isatty())
    try:
        outcome = run_sweep(model, spec, results, resume=args.resume, on_event=progress)
    finally:
        progress.close()
    if outcome.records:
        print(render(outcome.records, args.output))
    failed = sum(r["status"] != "ok" for r in outcome.records)
    print(f"{len(outcome.records)} tests recorded in {results}" + (f", {failed} failed" if failed else "")
          + (f", {outcome.skipped} already there (--resume)" if outcome.skipped else ""), file=sys.stderr)
    if outcome.interrupted:
        print("interrupted: everything measured so far is in the results file; rerun with --resume", file=sys.stderr)
        return 130
    return 0
