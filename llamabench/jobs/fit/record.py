"""A fit's answer as its record, with the measured quality of its lossy KV types beside it (from --results)."""

from __future__ import annotations

from ...records.fit import FitRecord
from ..quality.lookup import kv_quality_of_fit
from .job import FitAnswer


def fit_record(answer: FitAnswer, model, results) -> FitRecord:
    """`model`: as the user gave it (the quality command names it); `results`: the results file, or None."""
    return FitRecord(model=answer.source.model_block(answer.result.architecture), fit=answer.result,
                     verify=answer.verification, quality=kv_quality_of_fit(answer, model, results))
