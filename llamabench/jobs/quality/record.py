"""A quality run's contexts as records: one per context as it ends, and several contexts' records as one."""

from __future__ import annotations

from dataclasses import replace

from ...records.quality import QualityRecord
from .job import ContextOutcome, QualityPlan


def quality_record(plan: QualityPlan, outcome: ContextOutcome) -> QualityRecord:
    """One context's outcome as a record."""
    return QualityRecord(model=plan.source.model_block(plan.source.metadata.architecture),
                         params=plan.params.replace(n_ctx=outcome.n_ctx),
                         text=outcome.text, rows=outcome.rows,
                         base_model=plan.base.model_block(plan.base.metadata.architecture) if plan.base else None,
                         chunks_asked=plan.chunks, rows_per_decode=outcome.rows_per_decode,
                         context_warning=outcome.context_warning, interrupted=outcome.interrupted)


def merged(records: list[QualityRecord]) -> QualityRecord:
    """Several contexts' records as one: their rows in order."""
    first = records[0]
    warnings = [r.context_warning for r in records if r.context_warning]
    return replace(first, rows=tuple(row for r in records for row in r.rows),
                   rows_per_decode=max(r.rows_per_decode for r in records),
                   context_warning="; ".join(warnings) or None, interrupted=any(r.interrupted for r in records))
