"""`llamabench verify SOURCE`: theory against llama.cpp's own sizes, side by side."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import model_source, options
from ..inspection import inspect
from ..tables import render_table
from ..units import mib, thousands
from ..verification import all_ok, compare

HELP = "compare the theoretical KV / recurrent sizes with what llama.cpp itself reports"
EXAMPLES = """examples:
  llamabench verify qwen3-5-35b-a3b --ctx 131072      # writes (or reuses) the catalog twin
  llamabench verify model.gguf --ctx 32768 -ctk q8_0 -ctv q8_0 --n-seq 4
A catalog id is checked on its geometry twin; a GGUF file is checked as it is (llama.cpp's dry run
reads its metadata and tensor infos, no weights). Exit code 1 on any mismatch.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="a catalog id or a GGUF file")
    options.add_cache_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--matrix", action="store_true",
                        help="run the whole exactness matrix (n_ctx 4096/131072/5000, f16/q8_0/q4_0 and fa off, "
                             "1 and 4 sequences with and without kv_unified, swa_full on/off, n_rs_seq) instead of one cell")
    parser.add_argument("--results", type=Path, default=None, help="also append a verify record to this JSONL file")


def run(args: argparse.Namespace) -> int:
    from .. import engine
    from ..twin.cache import cached_twin

    resolved = model_source.resolve(args.source)
    if args.matrix:
        return run_matrix(args, resolved)
    settings = options.settings_from_args(args)
    result = inspect(resolved.metadata, settings, resolved.entry)  # validates settings before llama.cpp runs
    path = str(resolved.path) if resolved.path else str(cached_twin(resolved.metadata, resolved.label))
    dry = engine.dry_run(path, settings)
    checks = compare(result.footprint, dry.allocations)
    ok = all_ok(checks)
    if args.results:
        from .. import records

        model = records.model_block(resolved.label, resolved.metadata.display_name, result.geometry.architecture,
                                    path, resolved.path is None)
        records.write(args.results, records.VERIFY_SCHEMA, model, {
            "ok": ok, "settings": vars(settings) | {"n_ctx": result.footprint.shape.n_ctx},
            "theory": {"kv_bytes": result.footprint.kv_bytes, "swa_kv_bytes": result.footprint.swa_kv_bytes,
                       "recurrent_state_bytes": result.footprint.recurrent_state_bytes,
                       "k_bytes": result.footprint.k_bytes + result.footprint.swa_k_bytes,
                       "v_bytes": result.footprint.v_bytes + result.footprint.swa_v_bytes},
            "llama_cpp": dry.allocations.to_dict(), "method": "llama.cpp no_alloc dry run (sizes, nothing timed)",
            "checks": [{"component": c.component.strip(), "theory": c.theory, "llama_cpp": c.llama, "ok": c.ok}
                       for c in checks]})
    if args.json:
        print(json.dumps({
            "source": args.source, "gguf": path, "ok": ok, "n_ctx": result.footprint.shape.n_ctx,
            "checks": [{"component": c.component.strip(), "theory": c.theory, "llama_cpp": c.llama, "ok": c.ok,
                        "unit": c.unit} for c in checks],
            "llama_cpp_allocations": dry.allocations.to_dict(),
            "llama_cpp_version": engine.llama_cpp_version(),
        }, indent=2))
        return 0 if ok else 1
    s = settings
    print(f"verify {args.source} at n_ctx {thousands(result.footprint.shape.n_ctx)} "
          f"(K {s.type_k}, V {s.type_v}, flash attention {'on' if s.flash_attn else 'off'}, "
          f"{s.n_seq} seq{', unified' if s.kv_unified else ''}{', swa_full' if s.swa_full else ''})")
    print(f"theory: computed from metadata; llama.cpp: its own log lines from a no_alloc dry run of {path}")
    rows = []
    for c in checks:
        if c.unit == "MiB":
            theory = f"{thousands(c.theory)} B = {mib(c.theory)}"
            llama = "not reported" if c.llama is None else f"{c.llama:.2f} MiB"
            diff = "" if c.diff_mib is None else f"{c.diff_mib + 0.0:+.2f}".replace("-0.00", "+0.00")
        else:
            theory, llama, diff = str(c.theory), str(c.llama), ""
        rows.append([c.component, theory, llama, diff, "ok" if c.ok else "MISMATCH"])
    print(render_table(["component", "theory", "llama.cpp", "diff MiB", ""], rows, align="lrrrl"))
    compute = dry.allocations.compute_buffers_mib
    if compute:
        print("compute buffer (llama.cpp only, twin-sized: hidden size and vocab are tiny): "
              + ", ".join(f"{dev} {v:.2f} MiB" for dev, v in compute.items()))
    print("all match" if ok else "MISMATCH between theory and llama.cpp")
    return 0 if ok else 1


def run_matrix(args: argparse.Namespace, resolved) -> int:
    import time

    from .. import engine, gguf_file
    from ..footprint import compute_footprint
    from ..layout import geometry_from_metadata
    from ..twin.cache import cached_twin
    from ..verification import describe, matrix_settings

    start = time.perf_counter()
    path = str(resolved.path) if resolved.path else str(cached_twin(resolved.metadata, resolved.label))
    geometry = geometry_from_metadata(gguf_file.read_metadata(path))
    cells = matrix_settings(geometry.has_swa)
    bad = []
    for settings, dry in zip(cells, engine.dry_run_many(path, cells)):
        checks = compare(compute_footprint(geometry, settings), dry.allocations)
        if not all_ok(checks):
            bad.append(describe(settings) + ": " + "; ".join(
                f"{c.component.strip()} theory {c.theory} vs llama.cpp {c.llama}" for c in checks if not c.ok))
    size = __import__("os").stat(path)
    print(f"{args.source}: {len(cells)} cells, {len(cells) - len(bad)} match, {len(bad)} differ "
          f"({time.perf_counter() - start:.1f} s; {path}, {size.st_size / 2**20:.1f} MiB, "
          f"{size.st_blocks * 512 / 2**20:.1f} MiB on disk)")
    for line in bad:
        print("  MISMATCH " + line)
    return 0 if not bad else 1
