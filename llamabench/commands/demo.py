"""`llamabench demo [MODEL]`: the main job, on the built-in default or on any GGUF or catalog id.

inspect, verify, fit (16 / 24 GiB cards or --vram), a bench at depths that reach toward n_ctx, and
the report, each step appending to one results file in the report folder.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

from .. import api
from ..core.errors import LlamabenchError
from ..core.safe_text import escaped, shown_path
from ..core.units import count
from ..jobs import source as model_source
from ..llama import ggml_devices
from ..memory.footprint import KV_PAD
from ..memory.placement import PlacementKind, recommend
from ..records.fit import FitRecord
from ..records.jsonl import check_destination
from ..render.bench import render as render_bench
from ..render.bench import variance_warning
from ..render.fit import render_text
from ..render.inspect import render_inspection
from ..render.progress import Progress, StatusLine
from ..render.verify import render_verify
from ..settings import arguments
from ..settings.params import OutputFormat
from ..world import catalog, sysinfo
from ..world.paths import reports_dir
from . import SUMMARY
from .output import warn

HELP = SUMMARY["demo"]
EXAMPLES = """examples:
  llamabench demo                                   # Qwen3.5-35B-A3B via its geometry twin, n_ctx 131072
  llamabench demo gemma-3-270m-Q4_K_M.gguf --ctx 32k --out-dir my-report
  llamabench demo model.gguf --max-depth 32768      # bench deeper than the CPU default
Bench depths default to 0, n_ctx/8, n_ctx/4, n_ctx/2 and n_ctx minus the test, each capped by
--max-depth (default 8192 for a GGUF and 2048 for a geometry twin on a CPU build, the full context
on a GPU build): the output says how deep it went and why.
"""
NATURAL_COMPARISONS = {"qwen3-5-35b-a3b": ["qwen3-30b-a3b"], "qwen3-next-80b-a3b": ["qwen3-30b-a3b"]}
CPU_MAX_DEPTH_FILE = 8192  # filling a context deeper takes minutes on a few CPU cores
CPU_MAX_DEPTH_TWIN = 2048  # twins keep the real attention geometry: deep fills are as slow as the real model's
PLAIN_EVERY_S = 20  # off a terminal (a log, CI), a progress line at most this often: no long silence
DEMO_DEFAULTS = {"n_prompt": 256, "n_gen": 16, "repetitions": 2}  # a short bench: the demo's point is the depth curve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", "n_ctx", "vram", "n_depth", "max_depth", "n_prompt", "n_gen",
                                     "repetitions", "n_threads", "out_dir"),
                            lists=("vram", "n_depth"), defaults={**DEMO_DEFAULTS, "n_depth": None, "vram": None},
                            helps={"n_depth": "bench depths (default: derived from n_ctx, capped by --max-depth)",
                                   "max_depth": "deepest bench depth (default 8192 for a GGUF, 2048 for a twin on a "
                                                "CPU build)"},
                            optional_model=catalog.DEFAULT_MODEL_ID)


def default_depths(n_ctx: int, test_tokens: int, max_depth: int) -> list[int]:
    """0, n_ctx/8, n_ctx/4, n_ctx/2 and as deep as the test fits, each capped, on 256-token steps."""
    deepest = deepest_depth(n_ctx, test_tokens)
    wanted = [0, n_ctx // 8, n_ctx // 4, n_ctx // 2, deepest]
    return sorted({min(d, max_depth, deepest) // KV_PAD * KV_PAD for d in wanted})


def deepest_depth(n_ctx: int, test_tokens: int) -> int:
    """The deepest 256-token step where the largest test still fits in the context."""
    return max(0, n_ctx - test_tokens) // KV_PAD * KV_PAD


def _depths(args: argparse.Namespace, source, n_ctx: int, gpu: bool) -> tuple[list[int], str]:
    """The bench depths and the line that says why they are these."""
    test_tokens = args.n_prompt + args.n_gen
    if args.n_depth is not None:
        depths, why = sorted(set(args.n_depth)), "as given by --depths"
    else:
        max_depth = args.max_depth if args.max_depth is not None else (
            n_ctx if gpu else CPU_MAX_DEPTH_TWIN if source.is_catalog else CPU_MAX_DEPTH_FILE)
        depths = default_depths(n_ctx, test_tokens, max_depth)
        if depths[-1] >= deepest_depth(n_ctx, test_tokens):
            why = "as deep as the context allows"
        elif args.max_depth is not None:
            why = f"capped by --max-depth {max_depth}"
        else:
            why = (f"capped by the default --max-depth {max_depth} on a CPU build (filling deeper takes minutes "
                   "here; raise --max-depth to go deeper)")
    return depths, f"bench depths {', '.join(map(str, depths))} of n_ctx {n_ctx:,}: {why}"


def _repack(source, gpu: bool) -> tuple[bool, str | None]:
    """--repack for the bench, and a note when it is off."""
    if not gpu and sysinfo.has_amx() and not source.is_catalog:
        # ggml's AMX repack of Q4_K weights crashed llama.cpp (SIGSEGV in decode) on a real Gemma 3 Q4_K_M here
        return False, ("bench ran with --repack 0: this CPU reports AMX, and llama.cpp's AMX-repacked quantized "
                       "weights crash in decode here (llama-bench itself dies with SIGILL)")
    return True, None


class _Demo:
    """The demo's steps over one model, each printing its answer; a step returns False when it found a problem."""

    def __init__(self, args: argparse.Namespace, source, results: Path, out_dir: Path, n_ctx: int, gpu: bool):
        self.args, self.source, self.results, self.out_dir, self.n_ctx, self.gpu = (args, source, results, out_dir,
                                                                                     n_ctx, gpu)
        self.depths, self.depth_line = _depths(args, source, n_ctx, gpu)
        self.repack, self.repack_note = _repack(source, gpu)
        self.fits: list[FitRecord] = []

    def steps(self) -> list[tuple[str, Callable[[], bool], bool]]:
        """(title, step, whether a problem there ends the demo)."""
        return [
            ("inspect: layer layout and theoretical footprint", self.inspect, True),
            ("verify: theory against llama.cpp's own allocation lines (dry run)", self.verify, False),
            ("fit: does it fit on the card?", self.fit, False),
            (f"bench: a real context at n_ctx {self.n_ctx}, prefill and decode; {self.depth_line}", self.bench, False),
            ("report: kv_efficiency record, report.md and plots", self.report, True),
        ]

    def inspect(self) -> bool:
        record = api.inspect(self.args.model, n_ctx=self.n_ctx, results=self.results)
        if record.inspection.context_warning:
            warn(record.inspection.context_warning)
        print(render_inspection(record))
        return True

    def verify(self) -> bool:
        record = api.verify(self.args.model, n_ctx=self.n_ctx, results=self.results)
        if record.context_warning:
            warn(record.context_warning)
        print(render_verify(record))
        return record.ok

    def fit(self) -> bool:
        line = StatusLine(enabled=sys.stderr.isatty(), plain_every_s=PLAIN_EVERY_S)
        try:
            record = api.fit(self.args.model, n_ctx=[self.n_ctx], vram=self.args.vram, results=self.results,
                             progress=line)
        finally:
            line.close()
        print(render_text(record.fit))
        self.fits.append(record)
        return True

    def bench(self) -> bool:
        args = self.args
        ngl = (_recommended_ngl(self.fits[-1]) if self.fits else 99) if self.gpu else 0
        progress = Progress(0, enabled=sys.stderr.isatty(), plain_every_s=PLAIN_EVERY_S)
        try:
            run_ = api.bench(args.model, n_ctx=self.n_ctx, n_prompt=args.n_prompt, n_gen=args.n_gen,
                             n_depth=self.depths, repetitions=args.repetitions, n_threads=args.n_threads or None,
                             repack=self.repack, n_gpu_layers=ngl, results=self.results, on_event=progress)
        finally:
            progress.close()
        if run_.records:
            print(render_bench(list(run_.records), str(OutputFormat.MD)))
        if (noise := variance_warning(run_.records)) is not None:
            print(escaped(f"llamabench: warning: {noise}"), file=sys.stderr)
        print(f"{count(len(run_.records), 'test')} recorded in {shown_path(run_.results)}"
              + (f", {run_.failed} failed" if run_.failed else ""), file=sys.stderr)
        if run_.interrupted:  # Ctrl-C: what was measured is kept; the demo stops here (exit 130), no report
            raise KeyboardInterrupt
        return not run_.failed

    def report(self) -> bool:
        result = api.report([self.results], out_dir=self.out_dir,
                            compare=NATURAL_COMPARISONS.get(self.source.label, []))
        for model in result.models:
            print(f"{model.label}: wrote {len(model.files)} files to {shown_path(model.out_dir)}")
        return True


def _run_steps(steps: list[tuple[str, Callable[[], bool], bool]], start: float) -> list[str] | None:
    """Run the steps in order: the names of those that reported a problem, or None when a fatal one did."""
    failed = []
    for i, (title, step, fatal) in enumerate(steps, 1):
        name = title.split(":")[0]
        print(f"\n== {i}/{len(steps)} {title}", flush=True)
        print(f"[demo] step {i}/{len(steps)}: {name} ({time.perf_counter() - start:.0f} s so far)",
              file=sys.stderr, flush=True)
        try:
            ok = step()
        except LlamabenchError as exc:
            hint = f" (hint: {exc.hint})" if exc.hint else ""
            print(escaped(f"llamabench: error: {exc}{hint}"), file=sys.stderr)  # one line, as the error of main
            ok = False
        if not ok:
            print(f"[demo] step {i} ({name}) reported a problem", file=sys.stderr)
            failed.append(name)
            if fatal:
                return None
    return failed


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    source = model_source.resolve(args.model)
    out_dir = args.out_dir or reports_dir() / source.label
    results = out_dir / "results.jsonl"
    check_destination(results)
    gpu = ggml_devices.supports_gpu_offload()
    # -c 0: the model's trained length, as llama.cpp reads it
    n_ctx = args.n_ctx or api.inspect(args.model, n_ctx=0).footprint.shape.n_ctx
    demo = _Demo(args, source, results, out_dir, n_ctx, gpu)
    steps = demo.steps()
    if source.is_catalog:
        print(f"[demo] writing / reusing the geometry twin of {source.label}", file=sys.stderr, flush=True)
        twin = source.gguf_for_llama()
        print(f"geometry twin: {shown_path(twin)} ({twin.stat().st_size / 2**20:.1f} MiB)")
    failed = _run_steps(steps, start)
    if failed is None:
        return 1
    print(f"\n{demo.depth_line}")
    if demo.repack_note:
        print(demo.repack_note)
    print(f"demo finished in {time.perf_counter() - start:.1f} s: open {shown_path(out_dir / 'report.md')}"
          + (f" (steps that reported a problem: {', '.join(failed)})" if failed else ""))
    return 1 if failed else 0


def _recommended_ngl(fit: FitRecord) -> int:
    """-ngl of the fit's recommendation for the first card (all layers when the fit has none)."""
    result = fit.fit
    rows = result.rows_for(result.budgets[0].label, result.contexts[0])
    best = recommend(rows)
    if best is not None and best.placement.kind is PlacementKind.N_CPU_MOE:
        # the -ngl alternative with the same KV types: bench places by -ngl here
        best = recommend([r for r in rows if r.settings == best.settings and r.placement.kind is PlacementKind.NGL])
    if best is None or best.placement.kind is PlacementKind.ALL:
        return 99
    return best.placement.n_gpu_layers(result.n_layer_all)
