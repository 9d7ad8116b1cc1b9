"""`llamabench bench MODEL`: real contexts, their allocations, and long-context tok/s at depth."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import source as model_source
from ..errors import UsageError
from ..paths import reports_dir
from . import options
from .options import OutputFormat, comma_list

HELP = "create real llama.cpp contexts, record what they allocate and how fast they run at depth"
EXAMPLES = """examples:
  llamabench bench qwen3-5-35b-a3b -c 131072 -p 512 -n 32 -d 0,4096 -r 2 -fa on
  llamabench bench model.gguf -c 32768,131072 -ctk f16,q8_0 -ctv f16,q8_0 -ngl 99 -o jsonl
  llamabench bench qwen3-5-35b-a3b -c 131072 --dry-run          # print the plan only
Each configuration cell runs in its own child process; every test is appended to --results as soon
as it is measured, a failed cell is recorded with llama.cpp's reason and the sweep goes on, and
--resume skips what the results file already holds. A catalog id runs on its geometry twin.
Exit code 1 when any test failed (the count is printed).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model(parser)
    parser.add_argument("-c", "--ctx", "--ctx-size", dest="n_ctx", type=comma_list(options.ctx_int), default=(131072,),
                        help="n_ctx list (default 131072)")
    parser.add_argument("-p", "--n-prompt", dest="n_prompt", type=comma_list(options.nonneg_int), default=(512,),
                        help="prompt tokens (default 512)")
    parser.add_argument("-n", "--n-gen", dest="n_gen", type=comma_list(options.nonneg_int), default=(128,),
                        help="generated tokens (default 128)")
    parser.add_argument("-d", "--n-depth", dest="depths", type=comma_list(options.nonneg_int), default=(0,),
                        help="depths (default 0)")
    options.add_cache_types(parser, listed=True)
    parser.add_argument("-fa", "--flash-attn", dest="flash_attn", type=comma_list(options.on_off), default=(True,),
                        help="on|off list (default on)")
    parser.add_argument("-ngl", "--n-gpu-layers", dest="n_gpu_layers", type=comma_list(options.nonneg_int), default=(0,),
                        help="layers on the GPU (default 0)")
    options.add_batch(parser, listed=True)
    parser.add_argument("-t", "--threads", dest="n_threads", type=comma_list(options.positive_int), default=None,
                        help="threads (default: physical cores)")
    parser.add_argument("--repack", dest="repack", type=comma_list(options.on_off), default=None,
                        help="0|1 list: the repacked CPU copy of the weights (CPU_REPACK / AMX), as llama-bench "
                             "--repack (default 1)")
    parser.add_argument("-nr", "--no-repack", dest="no_repack", type=comma_list(options.on_off), default=(False,),
                        help="0|1 list, the inverse of --repack (older llama-bench's spelling)")
    parser.add_argument("--poll", type=comma_list(options.nonneg_int), default=(50,),
                        help="threadpool polling level list, 0-100 (default 50, as llama-bench)")
    parser.add_argument("--cpu-mask", dest="cpu_mask", type=comma_list(cpu_mask), default=("0x0",),
                        help="CPU affinity mask list, hex (default 0x0: the default affinity)")
    parser.add_argument("--cpu-strict", dest="cpu_strict", type=comma_list(options.on_off), default=(False,),
                        help="strict CPU placement, 0|1 list (default 0)")
    parser.add_argument("--prio", type=int, choices=(-1, 0, 1, 2, 3), default=0,
                        help="thread priority: -1 low, 0 normal, 1 medium, 2 high, 3 realtime (default 0)")
    parser.add_argument("-r", "--repetitions", type=options.positive_int, default=3, help="repetitions (default 3)")
    options.add_output(parser, choices=(OutputFormat.MD, OutputFormat.CSV, OutputFormat.JSON, OutputFormat.JSONL),
                       default=OutputFormat.MD)
    parser.add_argument("--results", type=Path, default=None, metavar="FILE",
                        help="JSON Lines file to append to (default reports/<label>/bench.jsonl)")
    parser.add_argument("--resume", action="store_true", help="skip tests already in --results")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")


def cpu_mask(text: str) -> str:
    from ..llama.engine import parse_cpu_mask

    try:
        parse_cpu_mask(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a hex CPU mask (e.g. 0x3)") from None
    return text


def run(args: argparse.Namespace) -> int:
    import psutil

    from ..bench.plan import SweepSpec, cells, tests
    from ..bench.progress import Progress
    from ..bench.runner import WeightsBasis, run_sweep
    from ..speed import weights_per_token
    from ..render.bench import render
    from ..results.jsonl import check_destination

    threads = args.n_threads or (psutil.cpu_count(logical=False) or 1,)
    if args.repack is not None:
        args.no_repack = tuple(not r for r in args.repack)
    spec = SweepSpec(n_ctx=args.n_ctx, n_prompt=args.n_prompt, n_gen=args.n_gen, depths=args.depths,
                     type_k=args.type_k, type_v=args.type_v, flash_attn=args.flash_attn,
                     n_gpu_layers=args.n_gpu_layers, n_batch=args.n_batch, n_ubatch=args.n_ubatch,
                     n_threads=threads, no_repack=args.no_repack, poll=args.poll, cpu_mask=args.cpu_mask,
                     cpu_strict=args.cpu_strict, prio=args.prio, repetitions=args.repetitions)
    if any(c == 0 for c in spec.n_ctx):
        raise UsageError("-c 0 is not allowed in a sweep: give the context length")
    plan_cells, plan_tests = cells(spec), tests(spec)
    if not plan_tests:
        raise UsageError("nothing to measure: -p and -n are both 0")
    source = model_source.resolve(args.model)
    if source.url:
        raise UsageError(f"bench runs the model itself: download {source.url} (llamabench read only its header) and "
                         "give the file, or give a catalog id to bench its geometry twin")
    results = args.results or reports_dir() / source.label / "bench.jsonl"
    if args.dry_run:
        print(f"plan for {source.label}: {len(plan_cells)} cells x {len(plan_tests)} tests, {spec.repetitions} "
              f"repetitions, results -> {results}")
        for cell in plan_cells:
            print(f"  {cell.key}: " + ", ".join(t.name for t in plan_tests))
        return 0
    check_destination(results)  # before the first measurement, not after it
    if args.resume:
        from ..results.records import read_records

        skipped = read_records(results).skipped
        if skipped:
            print(f"llamabench: warning: {results}: skipped {skipped} line(s) that are not llamabench records",
                  file=sys.stderr)
    path = source.gguf_for_llama()
    geometry = source.llama_geometry()
    model = source.model_block(geometry.architecture, loaded=path)
    weights, active = weights_per_token(source.llama_metadata, geometry)
    basis = WeightsBasis(weights.total_bytes + weights.tied_output_bytes, active,
                         f"weights from the tensor infos of {'the geometry twin' if source.is_catalog else 'the GGUF'}: "
                         f"{active / 2**20:.2f} MiB read per decoded token")
    progress = Progress(len(plan_cells) * len(plan_tests), enabled=sys.stderr.isatty())
    try:
        outcome = run_sweep(model, geometry, spec, results, resume=args.resume, on_event=progress, weights=basis)
    finally:
        progress.close()
    if outcome.interrupted:
        print(f"llamabench: interrupted: the {len(outcome.records)} tests measured so far are in {results}; "
              "rerun with --resume", file=sys.stderr)
        return 130
    if outcome.records:
        print(render(outcome.records, args.output))
    print(f"{len(outcome.records)} tests recorded in {results}" + (f", {outcome.failed} failed" if outcome.failed else "")
          + (f", {outcome.skipped} already there (--resume)" if outcome.skipped else ""), file=sys.stderr)
    return 1 if outcome.failed else 0
