"""Tables from bench records, as llama-bench prints them. Derived from records; runs nothing."""

from __future__ import annotations

import csv
import io
import json

from ..results.records import BenchRecord
from ..units import GIB, MIB
from .table import render_markdown

TS_HEADERS = ["model", "size", "params", "backend", "ngl", "threads", "n_ctx", "type_k", "type_v", "fa", "test", "t/s"]
TS_ALIGN = "lrrlrrrlllrr"
MEMORY_HEADERS = ["n_ctx", "type_k", "type_v", "fa", "KV theory MiB", "KV llama.cpp MiB", "recurrent theory MiB",
                  "recurrent llama.cpp MiB", "compute MiB", "RSS delta MiB", "theory vs llama.cpp"]
MEMORY_ALIGN = "rlllrrrrrrl"


def ts_rows(records: list[BenchRecord], *, with_series: bool = False) -> list[list[str]]:
    rows = []
    for r in records:
        p, m = r.params, r.model
        size = f"{m.size_bytes / GIB:.2f} GiB" if m.size_bytes else "-"
        params = f"{m.n_params / 1e6:.2f} M" if m.n_params else "-"
        ts = f"{r.avg_ts:.2f} ± {r.stddev_ts:.2f}" if r.ok else "failed: " + (r.reason or "")[:80]
        row = [m.label + (" (twin)" if m.is_twin else ""), size, params, r.backend, str(p["n_gpu_layers"]),
               str(p["n_threads"]), str(p["n_ctx"]), p["type_k"], p["type_v"], "1" if p["flash_attn"] else "0",
               r.test, ts]
        rows.append(([r.series] if with_series else []) + row)
    return rows


def memory_rows(records: list[BenchRecord]) -> list[list[str]]:
    """One row per cell and machine: theory against llama.cpp's allocation, and the process RSS."""
    seen: dict[tuple, BenchRecord] = {}
    for r in records:
        key = (r.key.split("|")[0], r.series)
        if key not in seen or seen[key].diff is None:
            seen[key] = r
    rows = []
    mib = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    for r in seen.values():
        p, diff, mem = r.params, r.diff, r.memory
        compute = r.allocations.compute_mib if r.allocations else None
        rows.append([
            str(p["n_ctx"]), p["type_k"], p["type_v"], "1" if p["flash_attn"] else "0",
            mib(diff["kv_mib_theory"]) if diff else "-", mib(diff["kv_mib_llama_cpp"]) if diff else "-",
            mib(diff["recurrent_mib_theory"]) if diff else "-", mib(diff["recurrent_mib_llama_cpp"]) if diff else "-",
            mib(compute), mib(mem["rss_delta_bytes"] / MIB) if mem else "-",
            ("match" if diff["kv_match"] and diff["recurrent_match"] else "MISMATCH") if diff else
            ("failed: " + (r.reason or "")[:60]),
        ])
    return rows


def render(records: list[BenchRecord], fmt: str) -> str:
    if fmt == "jsonl":
        return "\n".join(json.dumps(r.to_dict(), default=str) for r in records)
    if fmt == "json":
        return json.dumps([r.to_dict() for r in records], indent=2, default=str)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["model", "n_ctx", "type_k", "type_v", "flash_attn", "n_gpu_layers", "n_threads", "test",
                         "status", "avg_ts", "stddev_ts", "kv_mib_llama_cpp", "kv_mib_theory", "rss_delta_bytes", "reason"])
        for r in records:
            p, d, m = r.params, r.diff or {}, r.memory or {}
            writer.writerow([r.model.label, p["n_ctx"], p["type_k"], p["type_v"], int(p["flash_attn"]),
                             p["n_gpu_layers"], p["n_threads"], r.test, r.status, r.avg_ts, r.stddev_ts,
                             d.get("kv_mib_llama_cpp"), d.get("kv_mib_theory"), m.get("rss_delta_bytes"), r.reason])
        return out.getvalue().rstrip("\n")
    ts = render_markdown(TS_HEADERS, ts_rows(records), align=TS_ALIGN)
    memory = render_markdown(MEMORY_HEADERS, memory_rows(records), align=MEMORY_ALIGN)
    return (ts + "\n\nt/s: mean ± sample standard deviation over the repetitions (measured).\n\n"
            + memory + "\n\ntheory: computed from the GGUF; llama.cpp: its allocation log lines (measured).")
