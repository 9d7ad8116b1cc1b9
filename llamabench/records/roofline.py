"""The record of `roofline`: what llama-bench would print on a machine, test by test, predicted from the bytes and
FLOPs each step costs, beside the same model as full GQA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core import serial
from ..memory.speed_model import Machine, SpeedModel
from ..settings.params import Params
from .record import Record, RecordKind


@dataclass(frozen=True)
class RooflineRow:
    """One llama-bench test, predicted: `pp N @ dD` (N prompt tokens after D cached) or `tg N @ dD`."""

    test: str
    n_prompt: int
    n_gen: int
    n_depth: int
    n_ubatch: int
    avg_ts: float  # the estimate: what llama-bench's avg_ts would be
    ts_low: float | None = None  # the leave-one-out band of the backend's published runs, as t/s
    ts_high: float | None = None
    ttft_s: float | None = None  # a prompt of n_depth + n_prompt tokens from an empty context, then its first token
    bytes_per_token: int = 0  # tg: a decoded token at the test's middle depth; pp: a prompt token's share
    kv_read_bytes: int = 0
    recurrent_bytes: int = 0
    full_gqa_bytes_per_token: int | None = None  # tg: the model as full GQA (None: no layout rule, or a pp test)
    full_gqa_ts: float | None = None
    placed_ts: float | None = None  # -ngl / --n-cpu-moe, or several cards (--card A+B): as placed
    measured_ts: float | None = None  # --calibrate: the run's own avg_ts of this test

    @property
    def kind(self) -> str:
        return "pp" if self.n_prompt else "tg"


@dataclass(frozen=True, kw_only=True)
class RooflineRecord(Record):
    """What llama-bench would print on a machine (`roofline`)."""

    params: Params
    speed_model: SpeedModel
    weights_read_per_token: int
    weights_basis: str
    rows: tuple[RooflineRow, ...] = ()
    split_basis: str | None = None  # several cards or part in RAM: the placement, in words
    notes: tuple[str, ...] = ()  # what the reader should know of the numbers (a context beyond the trained one)
    kind: ClassVar[RecordKind] = RecordKind.ROOFLINE


serial.allow_infinity(Machine, "fp32")  # --bandwidth alone: FLOPs not priced
