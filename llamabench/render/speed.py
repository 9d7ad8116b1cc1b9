"""The roofline in words: predicted decode t/s per depth, beside the full-GQA counterfactual (one field list)."""

from __future__ import annotations

import math

from ..core.units import MIB
from ..records.roofline import RooflineRecord
from .fields import Field, table


def _m(v: int) -> str:
    return f"{v / MIB:.1f}"


def _f1(v: float) -> str:
    return f"{v:.1f}"


def _seconds(v: float) -> str:
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}"


def fields(measured: bool, split: bool = False, prefill: bool = False, state: bool = False) -> tuple[Field, ...]:
    shown = frozenset({"table"}) if measured else frozenset()
    return (
        Field("depth", "depth", lambda r: r.depth, lambda v: f"{v:,}", "r"),
        Field("bytes_per_token", "MiB/token", lambda r: r.bytes_per_token, _m, "r"),
        Field("kv_read_bytes", "of it KV", lambda r: r.kv_read_bytes, _m, "r"),
        Field("recurrent_bytes", "of it state", lambda r: r.recurrent_bytes, _m, "r",
              frozenset({"table"}) if state else frozenset()),
        Field("tok_s", "t/s", lambda r: r.tok_s, _f1, "r"),
        Field("ttft_s", "TTFT s", lambda r: r.ttft_s, _seconds, "r", frozenset({"table"}) if prefill else frozenset()),
        Field("split_tok_s", "placed t/s", lambda r: r.split_tok_s, _f1, "r",
              frozenset({"table"}) if split else frozenset()),
        Field("measured_tok_s", "measured t/s", lambda r: r.measured_tok_s, _f1, "r", shown),
        Field("error", "error", lambda r: None if r.measured_tok_s is None else (r.tok_s - r.measured_tok_s)
              / r.measured_tok_s * 100, lambda v: f"{v:+.1f}%", "r", shown),
        Field("full_gqa_bytes_per_token", "full GQA MiB/token", lambda r: r.full_gqa_bytes_per_token, _m, "r"),
        Field("full_gqa_tok_s", "full GQA t/s", lambda r: r.full_gqa_tok_s, _f1, "r"),
        Field("speed_up", "speed-up", lambda r: r.tok_s / r.full_gqa_tok_s if r.full_gqa_tok_s else None,
              lambda v: f"{v:.2f}x", "r"),
    )


def render_roofline(record: RooflineRecord, fmt: str = "text") -> str:
    measured = any(r.measured_tok_s is not None for r in record.rows)
    prefill = any(r.ttft_s is not None for r in record.rows)
    state = any(r.recurrent_bytes for r in record.rows)  # the recurrent state, read and written, per token
    rows = table(record.rows, fields(measured, record.split_basis is not None, prefill, state), fmt)
    if fmt in ("csv", "md"):
        return rows
    m, p = record.speed_model, record.params
    if any(r.full_gqa_bytes_per_token is not None for r in record.rows):
        kv = (f"K {p.type_k}, V {p.type_v}; the full-GQA columns: this model as if every mixer layer were cached as "
              "full attention, without recurrent state (a counterfactual)")
    else:
        kv = (f"K {p.type_k}, V {p.type_v}: the caches llama.cpp allocates for a context of each depth, measured "
              "(no_alloc dry runs, one sequence); no layout rule in llamabench, so no full-GQA counterfactual")
    placed = ([f"  placed    {record.split_basis}; t/s: the whole model on the first card, placed t/s: as placed"]
              if record.split_basis else [])
    return "\n".join([
        f"{record.model.name} ({record.model.architecture}): decode speed at depth, predicted: ceilings from bytes "
        "and FLOPs (a measured run is at or below them)",
        f"  weights   {record.weights_read_per_token / MIB:.1f} MiB read per decoded token: {record.weights_basis}",
        f"  model     time per token = bytes / {m.bandwidth / 1e9:.1f} GB/s"
        + (f" + attention FLOPs / {m.compute / 1e12:.2f} TFLOPS" if math.isfinite(m.compute)
           else " (attention compute not limiting)") + f" ({m.basis})",
        f"  KV        {kv}", *placed, *_prefill_line(m, prefill, bool(record.split_basis)),
        *(f"  note      {n}" for n in record.notes), "", rows])


def _prefill_line(m, prefill: bool, placed: bool = False) -> list[str]:
    """How TTFT is priced: a prompt as deep as the row, prefilled a ubatch at a time from an empty context."""
    if not prefill:
        return ["  prefill   not priced (no matrix-product figure: --card, --tflops, or --calibrate on a run with a "
                "pp test)"] if m.prefill is None else []
    attention = f"{m.prefill_attention / 1e12:.2f} TFLOPS" if m.prefill_attention else "the decode's rate"
    whole = " (the whole model on the first card, as t/s)" if placed else ""
    return [f"  prefill   TTFT{whole}: a prompt as deep as the row, a ubatch at a time from an empty context: the "
            f"weights once per ubatch, attention at {attention}, matrix products at {m.prefill / 1e12:.2f} TFLOPS, "
            f"{m.prefill_basis}"]
