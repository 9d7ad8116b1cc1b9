"""What a fit's lossy KV types cost in quality, as the user's own results measured it, or the command that would.

A fit row with a quantized K or V cache (q8_0, q4_0...) is a lossy choice: `fit` shows, for each such pair of types
at its context, the quality row of the results file (`--results`) for the same model (a `quality` run against f16
KV). Measured at that context it is shown as it is; measured only at other contexts, the deepest one is shown and
said to be another context (a quantized cache's error grows with the context); nowhere, the `llamabench quality`
command that would measure it. Never a number that was not measured.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Iterable

from ...core import cache_types
from ...records.quality import F16_BASE, KvQuality, QualityRecord, QualityRow, ScoredTextRef
from ...records.records import read_records


def lossy(type_k: str, type_v: str) -> bool:
    return cache_types.is_quantized(type_k) or cache_types.is_quantized(type_v)


def quality_command(model: str | None, n_ctx: int, type_k: str, type_v: str, results: str | None) -> str:
    target = shlex.quote(model) if model else "MODEL.gguf"
    line = f"llamabench quality {target} -c {n_ctx} -ctk {type_k} -ctv {type_v}"
    return line + (f" --results {shlex.quote(results)}" if results else "")


def fit_quality(pairs: Iterable[tuple[int, str, str]], measured: Iterable[tuple[QualityRow, ScoredTextRef]], *,
                model: str | None, results: str | None) -> tuple[KvQuality, ...]:
    """For each lossy (n_ctx, type_k, type_v) of a fit, in order: the measured row at that context, else at the
    deepest context measured, else none; `measured` holds the model's rows against f16 KV (newest last)."""
    rows: dict[tuple[str, str], dict[int, tuple[QualityRow, ScoredTextRef]]] = {}
    for row, text in measured:
        if row.ok and row.base == F16_BASE:
            rows.setdefault((row.type_k, row.type_v), {})[row.n_ctx] = (row, text)
    out = []
    for n_ctx, type_k, type_v in dict.fromkeys(pairs):
        if not lossy(type_k, type_v):
            continue
        found = rows.get((type_k, type_v), {})
        chosen = found.get(n_ctx) or (found[max(found)] if found else None)
        out.append(KvQuality(type_k, type_v, n_ctx, chosen[0] if chosen else None, chosen[1] if chosen else None,
                             quality_command(model, n_ctx, type_k, type_v, results)))
    return tuple(out)


def weights_quality(results) -> dict[str, QualityRow]:
    """Per model label, the newest measured quality of its weights against a base (quality --base-model), from the
    results file (a path, or None) as it is now."""
    if not results or not Path(results).is_file():
        return {}
    return {record.model.label: row for record in read_records(Path(results)).records
            if isinstance(record, QualityRecord) for row in record.rows if row.ok and row.base != F16_BASE}


def kv_quality_of_fit(answer, model, results) -> tuple[KvQuality, ...]:
    """The fit's lossy KV types at their contexts, with what the results file measured of this model (newest)."""
    source = answer.source
    measured = []
    if results and Path(results).is_file():
        for record in read_records(Path(results)).records:
            if isinstance(record, QualityRecord) and record.model.label == source.label:
                measured += [(row, record.text) for row in record.rows]
    pairs = [(r.settings.n_ctx, r.settings.type_k, r.settings.type_v) for r in answer.result.rows]
    given = os.fspath(model) if source.path is not None and source.url is None else None
    return fit_quality(pairs, measured, model=given, results=os.fspath(results) if results else None)
