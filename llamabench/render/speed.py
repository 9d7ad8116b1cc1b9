"""The roofline in words: predicted decode t/s per depth, beside the full-GQA counterfactual."""

from __future__ import annotations

from ..units import MIB
from .table import render_table


def render_roofline(result: dict) -> str:
    measured = any(r["measured_tok_s"] is not None for r in result["depths"])
    out = [f"{result['model']} ({result['architecture']}): decode speed at depth, predicted",
           f"  weights   {result['weights_read_per_token'] / MIB:.1f} MiB read per decoded token: {result['weights_basis']}",
           f"  model     time per token = bytes / {result['bandwidth_gbps']:.1f} GB/s + attention FLOPs / "
           f"{result['compute_tflops']:.2f} TFLOPS ({result['speed_model']})",
           f"  KV        K {result['cache_types'][0]}, V {result['cache_types'][1]}; full GQA: every mixer layer "
           f"cached as full attention, no recurrent state", ""]
    rows = []
    for r in result["depths"]:
        row = [f"{r['depth']:,}", f"{r['bytes_per_token'] / MIB:.1f}", f"{r['kv_read_bytes'] / MIB:.1f}",
               f"{r['tok_s']:.1f}"]
        if measured:
            m = r["measured_tok_s"]
            row += ["-" if m is None else f"{m:.1f}", "-" if m is None else f"{(r['tok_s'] - m) / m * 100:+.1f}%"]
        row += [f"{r['full_gqa_bytes_per_token'] / MIB:.1f}", f"{r['full_gqa_tok_s']:.1f}",
                f"{r['tok_s'] / r['full_gqa_tok_s']:.2f}x"]
        rows.append(row)
    headers = ["depth", "MiB/token", "of it KV", "t/s"] + (["measured t/s", "error"] if measured else []) + [
        "full GQA MiB/token", "full GQA t/s", "speed-up"]
    out.append(render_table(headers, rows, align="r" * len(headers)))
    return "\n".join(out)
