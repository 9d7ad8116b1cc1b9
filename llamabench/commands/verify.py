"""`llamabench verify MODEL`: theory against llama.cpp's own sizes, side by side."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace

from .. import source as model_source
from ..inspection import inspect
from ..verification import all_ok, compare
from . import options

HELP = "compare the theoretical KV / recurrent sizes with what llama.cpp itself reports"
EXAMPLES = """examples:
  llamabench verify qwen3-5-35b-a3b --ctx 131072      # writes (or reuses) the catalog twin
  llamabench verify model.gguf --ctx 32768 -ctk q8_0 -ctv q8_0 --n-seq 4
A catalog id is checked on its geometry twin; a GGUF file is checked as it is (llama.cpp's dry run
reads its metadata and tensor infos, no weights). Exit code 1 on any mismatch.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model(parser)
    options.add_cache_arguments(parser)
    options.add_output(parser)
    parser.add_argument("--matrix", action="store_true",
                        help="run the whole exactness matrix (n_ctx 4096/131072/5000, f16/q8_0/q4_0 and fa off, "
                             "1 and 4 sequences with and without kv_unified, swa_full on/off, n_rs_seq) instead of one cell")
    options.add_results(parser, "a verify record")


def run(args: argparse.Namespace) -> int:
    from ..llama import engine
    from ..llama.worker import dry_runs
    from ..render.verify import render_verify

    source = model_source.resolve(args.model)
    if args.matrix:
        return run_matrix(args, source)
    settings = options.settings_from_args(args)
    result = inspect(source.metadata, settings, source.entry)  # validates settings before llama.cpp runs
    if result.context_warning:
        print(f"llamabench: warning: {result.context_warning}", file=sys.stderr)
    path = source.gguf_for_llama()
    dry = dry_runs(str(path), [settings if settings.n_ctx else replace(settings, n_ctx=result.footprint.shape.n_ctx)])[0]
    checks = compare(result.footprint, dry.allocations)
    ok = all_ok(checks)
    fp = result.footprint
    theory = {"kv_bytes": fp.kv_bytes, "swa_kv_bytes": fp.swa_kv_bytes, "recurrent_state_bytes": fp.recurrent_state_bytes,
              "k_bytes": fp.k_bytes + fp.swa_k_bytes, "v_bytes": fp.v_bytes + fp.swa_v_bytes}
    check_dicts = [{"component": c.component.strip(), "theory": c.theory, "llama_cpp": c.llama, "ok": c.ok,
                    "unit": c.unit} for c in checks]
    if args.results:
        from ..results.records import VerifyRecord, append

        append(args.results, VerifyRecord(source.model_block(result.geometry.architecture, loaded=path), ok=ok,
                                          settings=replace(settings, n_ctx=fp.shape.n_ctx), theory=theory,
                                          allocations=dry.allocations, checks=check_dicts))
    if args.output == options.OutputFormat.JSON:
        print(json.dumps({"model": args.model, "gguf": str(path), "ok": ok, "n_ctx": fp.shape.n_ctx,
                          "settings": asdict(settings), "theory": theory, "checks": check_dicts,
                          "llama_cpp_allocations": dry.allocations.to_dict(),
                          "llama_cpp_version": engine.llama_cpp_version()}, indent=2))
    else:
        print(render_verify(args.model, source, path, result, checks, dry.allocations))
    return 0 if ok else 1


def run_matrix(args: argparse.Namespace, source) -> int:
    import os
    import time

    from ..footprint import compute_footprint
    from ..llama.worker import dry_runs
    from ..verification import describe, matrix_settings

    start = time.perf_counter()
    path = str(source.gguf_for_llama())
    geometry = source.llama_geometry()
    cells = matrix_settings(geometry.has_swa)
    bad = []
    for settings, dry in zip(cells, dry_runs(path, cells)):
        checks = compare(compute_footprint(geometry, settings), dry.allocations)
        if not all_ok(checks):
            bad.append(describe(settings) + ": " + "; ".join(
                f"{c.component.strip()} theory {c.theory} vs llama.cpp {c.llama}" for c in checks if not c.ok))
    size = os.stat(path)
    print(f"{args.model}: {len(cells)} cells, {len(cells) - len(bad)} match, {len(bad)} differ "
          f"({time.perf_counter() - start:.1f} s; {path}, {size.st_size / 2**20:.1f} MiB, "
          f"{size.st_blocks * 512 / 2**20:.1f} MiB on disk)")
    for line in bad:
        print("  MISMATCH " + line)
    return 0 if not bad else 1
