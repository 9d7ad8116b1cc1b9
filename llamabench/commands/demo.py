"""`llamabench demo [MODEL]`: the main job, on the built-in default or on any GGUF or catalog id.

inspect, verify, fit (16 / 24 GiB cards or --vram), a bench at depths that reach toward n_ctx, and
the report, each step appending to one results file in the report folder.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import catalog
from .. import source as model_source
from ..footprint import KV_PAD
from ..paths import reports_dir
from . import options

HELP = "the main job: inspect, verify, fit, a bench at depth and the report (default: the built-in Qwen3.5-35B-A3B)"
EXAMPLES = """examples:
  llamabench demo                                   # Qwen3.5-35B-A3B via its geometry twin, n_ctx 131072
  llamabench demo gemma-3-270m-Q4_K_M.gguf --ctx 32768 --out-dir my-report
  llamabench demo model.gguf --max-depth 32768      # bench deeper than the CPU default
Bench depths default to 0, n_ctx/8, n_ctx/4, n_ctx/2 and n_ctx minus the test, each capped by
--max-depth (default 8192 for a GGUF and 2048 for a geometry twin on a CPU build, the full context
on a GPU build): the output says how deep it went and why.
"""
NATURAL_COMPARISONS = {"qwen3-5-35b-a3b": ["qwen3-30b-a3b"], "qwen3-next-80b-a3b": ["qwen3-30b-a3b"]}
CPU_MAX_DEPTH_FILE = 8192  # filling a context deeper takes minutes on a few CPU cores
CPU_MAX_DEPTH_TWIN = 2048  # twins keep the real attention geometry: deep fills are as slow as the real model's


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model(parser, optional_default=catalog.DEFAULT_MODEL_ID)
    parser.add_argument("-c", "--ctx", dest="n_ctx", type=options.positive_int, default=131072,
                        help="n_ctx (default 131072)")
    parser.add_argument("--vram", default=None, help="card sizes for fit, comma list (default 16GiB,24GiB)")
    parser.add_argument("-d", "--depths", type=options.comma_list(options.nonneg_int), default=None,
                        help="bench depths (default: derived from n_ctx, capped by --max-depth)")
    parser.add_argument("--max-depth", type=options.nonneg_int, default=None,
                        help="deepest bench depth (default 8192 for a GGUF, 2048 for a twin on a CPU build)")
    parser.add_argument("-p", "--n-prompt", dest="n_prompt", type=options.positive_int, default=256,
                        help="bench prompt tokens (default 256)")
    parser.add_argument("-n", "--n-gen", dest="n_gen", type=options.positive_int, default=16,
                        help="bench generated tokens (default 16)")
    parser.add_argument("-r", "--repetitions", type=options.positive_int, default=2, help="bench repetitions (default 2)")
    parser.add_argument("-t", "--threads", dest="n_threads", type=options.positive_int, default=None,
                        help="bench threads (default: physical cores)")
    parser.add_argument("--out-dir", type=Path, default=None, help="report folder (default reports/local/<label>/)")


def default_depths(n_ctx: int, test_tokens: int, max_depth: int) -> list[int]:
    """0, n_ctx/8, n_ctx/4, n_ctx/2 and as deep as the test fits, each capped, on 256-token steps."""
    deepest = deepest_depth(n_ctx, test_tokens)
    wanted = [0, n_ctx // 8, n_ctx // 4, n_ctx // 2, deepest]
    return sorted({min(d, max_depth, deepest) // KV_PAD * KV_PAD for d in wanted})


def deepest_depth(n_ctx: int, test_tokens: int) -> int:
    """The deepest 256-token step where the largest test still fits in the context."""
    return max(0, n_ctx - test_tokens) // KV_PAD * KV_PAD


def run(args: argparse.Namespace) -> int:
    from .. import sysinfo
    from ..cli import main
    from ..llama import engine
    from ..results.jsonl import check_destination

    start = time.perf_counter()
    source = model_source.resolve(args.model)
    out_dir = args.out_dir or reports_dir() / source.label
    results = out_dir / "results.jsonl"
    check_destination(results)
    gpu = engine.supports_gpu_offload()
    ctx = str(args.n_ctx)
    test_tokens = args.n_prompt + args.n_gen
    if args.depths is not None:
        depths = sorted(set(args.depths))
        why = "as given by --depths"
    else:
        max_depth = args.max_depth if args.max_depth is not None else (
            args.n_ctx if gpu else CPU_MAX_DEPTH_TWIN if source.is_catalog else CPU_MAX_DEPTH_FILE)
        depths = default_depths(args.n_ctx, test_tokens, max_depth)
        if depths[-1] >= deepest_depth(args.n_ctx, test_tokens):
            why = "as deep as the context allows"
        elif args.max_depth is not None:
            why = f"capped by --max-depth {max_depth}"
        else:
            why = (f"capped by the default --max-depth {max_depth} on a CPU build (filling deeper takes minutes "
                   "here; raise --max-depth to go deeper)")
    depth_line = (f"bench depths {', '.join(map(str, depths))} of n_ctx {args.n_ctx:,}: {why}")
    fit_argv = ["fit", args.model, "--ctx", ctx, "--results", str(results)] + (["--vram", args.vram] if args.vram else [])
    bench_argv = ["bench", args.model, "-c", ctx, "-p", str(args.n_prompt), "-n", str(args.n_gen),
                  "-d", ",".join(map(str, depths)), "-r", str(args.repetitions), "--results", str(results)]
    if args.n_threads:
        bench_argv += ["-t", str(args.n_threads)]
    repack_note = None
    if not gpu and sysinfo.has_amx() and not source.is_catalog:
        # ggml's AMX repack of Q4_K weights crashed llama.cpp (SIGSEGV in decode) on a real Gemma 3 Q4_K_M here
        bench_argv += ["--repack", "0"]
        repack_note = ("bench ran with --repack 0: this CPU reports AMX, and llama.cpp's AMX-repacked quantized weights "
                       "crash in decode here (llama-bench itself dies with SIGILL)")
    steps = [
        ("inspect: layer layout and theoretical footprint", ["inspect", args.model, "--ctx", ctx, "--results", str(results)]),
        ("verify: theory against llama.cpp's own allocation lines (dry run)",
         ["verify", args.model, "--ctx", ctx, "--results", str(results)]),
        ("fit: does it fit on the card?", fit_argv),
        (f"bench: a real context at n_ctx {ctx}, prefill and decode; {depth_line}", bench_argv),
        ("report: kv_efficiency record, report.md and plots",
         ["report", str(results), "--out-dir", str(out_dir)]
         + [a for c in NATURAL_COMPARISONS.get(source.label, []) for a in ("--compare", c)]),
    ]
    if source.is_catalog:
        print(f"[demo] writing / reusing the geometry twin of {source.label}", file=sys.stderr, flush=True)
        twin = source.gguf_for_llama()
        print(f"geometry twin: {twin} ({twin.stat().st_size / 2**20:.1f} MiB)")
    failed = []
    for i, (title, argv) in enumerate(steps, 1):
        if argv[0] == "bench" and gpu:
            argv += ["-ngl", str(_recommended_ngl(results, source.label))]
        print(f"\n== {i}/{len(steps)} {title}", flush=True)
        print(f"[demo] step {i}/{len(steps)}: {title.split(':')[0]} ({time.perf_counter() - start:.0f} s so far)",
              file=sys.stderr, flush=True)
        rc = main(argv)
        if rc != 0:
            print(f"[demo] step {i} ({argv[0]}) ended with exit code {rc}", file=sys.stderr)
            failed.append(argv[0])
            if argv[0] in ("inspect", "report"):
                return rc
    print(f"\n{depth_line}")
    if repack_note:
        print(repack_note)
    print(f"demo finished in {time.perf_counter() - start:.1f} s: open {out_dir / 'report.md'}"
          + (f" (steps that reported a problem: {', '.join(failed)})" if failed else ""))
    return 1 if failed else 0


def _recommended_ngl(results: Path, label: str) -> int:
    """-ngl of the fit's recommendation for the first card (all layers when the fit has none)."""
    from ..fit.search import PlacementKind, recommend
    from ..results.records import FitRecord, read_records

    fits = [r for r in read_records(results).records if isinstance(r, FitRecord) and r.model.label == label]
    if not fits:
        return 99
    fit = fits[-1].fit
    rows = fit.rows_for(fit.budgets[0][0], fit.contexts[0])
    best = recommend(rows)
    if best is not None and best.placement.kind is PlacementKind.N_CPU_MOE:
        # bench has no tensor overrides yet: the fit's -ngl alternative with the same KV types
        best = recommend([r for r in rows if r.settings == best.settings and r.placement.kind is PlacementKind.NGL])
    if best is None or best.placement.kind is PlacementKind.ALL:
        return 99
    return best.placement.n_gpu_layers(fit.n_layer_all)
