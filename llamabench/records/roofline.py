"""The record of `roofline`: predicted decode t/s at depth from the bytes each token reads, beside full GQA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core import serial
from ..memory.speed import SpeedModel
from ..settings.params import Params
from .record import Record, RecordKind


@dataclass(frozen=True)
class RooflineRow:
    """One depth of a roofline: bytes each token reads and the t/s they allow, beside the model as full GQA."""

    depth: int
    bytes_per_token: int
    kv_read_bytes: int
    recurrent_bytes: int
    tok_s: float
    full_gqa_bytes_per_token: int | None  # None: no layout rule, so no full-GQA counterfactual
    full_gqa_tok_s: float | None
    measured_tok_s: float | None = None
    split_tok_s: float | None = None  # several cards (--card A+B), or part in RAM (-ngl, -ncmoe): its decode t/s
    ttft_s: float | None = None  # seconds to prefill a prompt this deep (time to first token); None: not priced

@dataclass(frozen=True, kw_only=True)
class RooflineRecord(Record):
    """Predicted decode t/s at depth from the bytes each token reads, beside full GQA (`roofline`)."""

    params: Params
    speed_model: SpeedModel
    weights_read_per_token: int
    weights_basis: str
    rows: tuple[RooflineRow, ...] = ()
    split_basis: str | None = None  # several cards: the split, the cards and the link, in words
    notes: tuple[str, ...] = ()  # what the reader should know of the numbers (a context beyond the trained one)
    kind: ClassVar[RecordKind] = RecordKind.ROOFLINE


serial.allow_infinity(SpeedModel, "compute")  # attention compute not limiting: bytes-only calibration, --bandwidth
