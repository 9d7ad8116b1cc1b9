"""Tables from bench records, as llama-bench prints them. Derived from records; runs nothing."""

from __future__ import annotations

import csv
import io
import json

from ..tables import render_markdown
from ..units import GIB, MIB

TS_HEADERS = ["model", "size", "params", "backend", "ngl", "threads", "n_ctx", "type_k", "type_v", "fa", "test", "t/s"]


def _backend(record: dict) -> str:
    return "CPU" if not record["params"]["n_gpu_layers"] else "GPU"


def ts_rows(records: list[dict]) -> list[list[str]]:
    rows = []
    for r in records:
        p, m = r["params"], r["model"]
        size = f"{m['size_bytes'] / GIB:.2f} GiB" if m.get("size_bytes") else "-"
        params = f"{m['n_params'] / 1e6:.2f} M" if m.get("n_params") else "-"
        if r["status"] == "ok":
            ts = f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}"
        else:
            ts = "failed: " + (r.get("reason") or "")[:80]
        rows.append([m["label"] + (" (twin)" if m.get("is_twin") else ""), size, params, _backend(r),
                     str(p["n_gpu_layers"]), str(p["n_threads"]), str(p["n_ctx"]), p["type_k"], p["type_v"],
                     "1" if p["flash_attn"] else "0", r["test"], ts])
    return rows


def memory_rows(records: list[dict]) -> list[list[str]]:
    """One row per cell: theory against llama.cpp's allocation, and the process RSS."""
    seen = {}
    for r in records:
        cell_key = r["key"].split("|")[0]
        if cell_key in seen and seen[cell_key][1] is not None:
            continue
        seen[cell_key] = (r, r.get("diff"))
    rows = []
    for r, diff in seen.values():
        p, llama, mem = r["params"], r.get("llama_cpp"), r.get("memory")
        compute = sum((llama or {}).get("compute_buffers_mib", {}).values()) if llama else None
        mib = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        rows.append([
            str(p["n_ctx"]), p["type_k"], p["type_v"], "1" if p["flash_attn"] else "0",
            mib(diff["kv_mib_theory"]) if diff else "-", mib(diff["kv_mib_llama_cpp"]) if diff else "-",
            mib(diff["recurrent_mib_theory"]) if diff else "-", mib(diff["recurrent_mib_llama_cpp"]) if diff else "-",
            mib(compute), mib(mem["rss_delta_bytes"] / MIB) if mem else "-",
            ("match" if diff["kv_match"] and diff["recurrent_match"] else "MISMATCH") if diff else
            ("failed: " + (r.get("reason") or "")[:60]),
        ])
    return rows


MEMORY_HEADERS = ["n_ctx", "type_k", "type_v", "fa", "KV theory MiB", "KV llama.cpp MiB", "recurrent theory MiB",
                  "recurrent llama.cpp MiB", "compute MiB", "RSS delta MiB", "theory vs llama.cpp"]


def render(records: list[dict], fmt: str) -> str:
    if fmt == "jsonl":
        return "\n".join(json.dumps(r, default=str) for r in records)
    if fmt == "json":
        return json.dumps(records, indent=2, default=str)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["model", "n_ctx", "type_k", "type_v", "flash_attn", "n_gpu_layers", "n_threads", "test",
                         "status", "avg_ts", "stddev_ts", "kv_mib_llama_cpp", "kv_mib_theory", "rss_delta_bytes", "reason"])
        for r in records:
            p, d, m = r["params"], r.get("diff") or {}, r.get("memory") or {}
            writer.writerow([r["model"]["label"], p["n_ctx"], p["type_k"], p["type_v"], int(p["flash_attn"]),
                             p["n_gpu_layers"], p["n_threads"], r["test"], r["status"], r.get("avg_ts"),
                             r.get("stddev_ts"), d.get("kv_mib_llama_cpp"), d.get("kv_mib_theory"),
                             m.get("rss_delta_bytes"), r.get("reason")])
        return out.getvalue().rstrip("\n")
    ts = render_markdown(TS_HEADERS, ts_rows(records), align="lrrlrrrlllr r".replace(" ", ""))
    memory = render_markdown(MEMORY_HEADERS, memory_rows(records), align="rlllrrrrrrl")
    return (ts + "\n\nt/s: mean ± sample standard deviation over the repetitions (measured).\n\n"
            + memory + "\n\ntheory: computed from the GGUF; llama.cpp: its allocation log lines (measured).")
