"""The roofline in words: what llama-bench would print on the machine, test by test, with the band its backend's
held-out published runs fell in, the TTFT of a prompt that deep, and the full-GQA counterfactual (one field list)."""

from __future__ import annotations

import json

from ..core.serial import finite
from ..core.units import MIB
from ..records.roofline import RooflineRecord, RooflineRow
from .fields import Field, table


def _m(v: int) -> str:
    return f"{v / MIB:.1f}"


def _ts(v: float) -> str:
    return f"{v:.2f}" if v < 100 else f"{v:.1f}"


def _seconds(v: float) -> str:
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}"


def _range(r: RooflineRow) -> str | None:
    return None if r.ts_low is None else f"{_ts(r.ts_low)}-{_ts(r.ts_high)}"


def fields(measured: bool, placed: bool = False, state: bool = False, band: bool = True) -> tuple[Field, ...]:
    table_view = frozenset({"table"})
    return (
        Field("test", "test", lambda r: r.test, str, "r"),
        Field("n_prompt", "n_prompt", lambda r: r.n_prompt, str, "r", frozenset()),
        Field("n_gen", "n_gen", lambda r: r.n_gen, str, "r", frozenset()),
        Field("n_depth", "n_depth", lambda r: r.n_depth, str, "r", frozenset()),
        Field("n_ubatch", "n_ubatch", lambda r: r.n_ubatch, str, "r", frozenset()),
        Field("avg_ts", "t/s (estimate)", lambda r: r.avg_ts, _ts, "r"),
        Field("range", "held-out range", _range, str, "r", table_view if band else frozenset(), csv=False),
        Field("ts_low", "t/s low", lambda r: r.ts_low, _ts, "r", frozenset()),
        Field("ts_high", "t/s high", lambda r: r.ts_high, _ts, "r", frozenset()),
        Field("ttft_s", "TTFT s", lambda r: r.ttft_s, _seconds, "r"),
        Field("placed_ts", "placed t/s", lambda r: r.placed_ts, _ts, "r", table_view if placed else frozenset()),
        Field("measured_ts", "measured t/s", lambda r: r.measured_ts, _ts, "r",
              table_view if measured else frozenset()),
        Field("error", "error", lambda r: None if r.measured_ts is None else (r.avg_ts - r.measured_ts)
              / r.measured_ts * 100, lambda v: f"{v:+.1f}%", "r", table_view if measured else frozenset()),
        Field("bytes_per_token", "MiB/token", lambda r: r.bytes_per_token, _m, "r"),
        Field("kv_read_bytes", "of it KV", lambda r: r.kv_read_bytes, _m, "r"),
        Field("recurrent_bytes", "of it state", lambda r: r.recurrent_bytes, _m, "r",
              table_view if state else frozenset()),
        Field("full_gqa_bytes_per_token", "full GQA MiB/token", lambda r: r.full_gqa_bytes_per_token, _m, "r"),
        Field("full_gqa_ts", "full GQA t/s", lambda r: r.full_gqa_ts, _ts, "r"),
        Field("speed_up", "speed-up", lambda r: r.avg_ts / r.full_gqa_ts if r.full_gqa_ts else None,
              lambda v: f"{v:.2f}x", "r"),
    )


def _fields_of(record: RooflineRecord) -> tuple[Field, ...]:
    return fields(any(r.measured_ts is not None for r in record.rows), record.split_basis is not None,
                  any(r.recurrent_bytes for r in record.rows), any(r.ts_low is not None for r in record.rows))


def bench_rows(record: RooflineRecord) -> list[dict]:
    """Each row with llama-bench's fields (model, backend, n_prompt, n_gen, n_depth, n_ubatch, avg_ts...) and ours."""
    p, m = record.params, record.speed_model
    head = {"model_filename": record.model.name, "model_type": record.model.architecture, "backend": m.rates.backend,
            "gpu_info": m.machine.name, "n_batch": p.n_batch, "type_k": p.type_k,
            "type_v": p.type_v, "flash_attn": p.flash_attn, "estimate": True}
    return [{**head, **{f.name: f.get(r) for f in _fields_of(record) if f.csv}} for r in record.rows]


def render_roofline(record: RooflineRecord, fmt: str = "text") -> str:
    if fmt == "jsonl":  # llama-bench -o jsonl: one test a line
        return "\n".join(json.dumps(finite(row), separators=(",", ":")) for row in bench_rows(record))
    rows = table(record.rows, _fields_of(record), fmt)
    if fmt in ("csv", "md"):
        return rows
    m, p = record.speed_model, record.params
    decode, prefill = m.rates.decode_band, m.rates.prefill_band
    lines = [f"{record.model.name} ({record.model.architecture}): what llama-bench would print, predicted "
             "(an estimate from bytes and FLOPs, not a measurement)",
             f"  machine   {m.basis}",
             f"  weights   {record.weights_read_per_token / MIB:.1f} MiB read per decoded token: "
             f"{record.weights_basis}",
             f"  tests     n_ubatch {p.n_ubatch}, n_batch {p.n_batch}, K {p.type_k}, V {p.type_v}, flash attention "
             f"{'on' if p.flash_attn else 'off'}; TTFT: a prompt of n_depth + n_prompt tokens from an empty context, "
             "then its first token"]
    if decode or prefill:
        lines.append("  range     where the backend's held-out published runs fell: decode "
                     + (decode.text() if decode else "none") + "; prefill " + (prefill.text() if prefill else "none"))
    if any(r.full_gqa_ts for r in record.rows):
        lines.append("  full GQA  this model as if every mixer layer were cached as full attention, without recurrent "
                     "state (a counterfactual)")
    if record.split_basis:
        lines.append(f"  placed    {record.split_basis}; t/s: the whole model on the first card, placed t/s: as placed")
    lines += [f"  note      {n}" for n in record.notes]
    return "\n".join([*lines, "", rows])
