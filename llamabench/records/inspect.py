"""The records of `inspect` (the layout and the theoretical footprint) and `verify` (theory against llama.cpp's own
sizes from a dry run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..memory.allocations import Allocations
from ..memory.footprint import Footprint, KvPoint
from ..memory.inspection import Inspection
from ..memory.verification import Check, all_ok
from ..settings.params import Params
from .record import Record, RecordKind


@dataclass(frozen=True, kw_only=True)
class InspectRecord(Record):
    """The layout and the theoretical footprint of one model under one set of parameters (`inspect`)."""

    inspection: Inspection
    kv_curve: tuple[KvPoint, ...] = ()
    kind: ClassVar[RecordKind] = RecordKind.INSPECT

    @property
    def footprint(self) -> Footprint:
        return self.inspection.footprint

    @property
    def kv_bytes_per_token(self) -> int:
        return self.inspection.footprint.kv_bytes_per_token

    @property
    def kv_bytes(self) -> int:
        return self.inspection.footprint.kv_bytes

    @property
    def recurrent_state_bytes(self) -> int:
        return self.inspection.footprint.recurrent_state_bytes

    def summary(self) -> dict:
        fp, ins = self.footprint, self.inspection
        return {"n_ctx": fp.shape.n_ctx, "kv_bytes_per_token": fp.kv_bytes_per_token,
                "full_gqa_kv_bytes_per_token": fp.full_gqa_kv_bytes_per_token,
                "reduction": None if fp.reduction is None else round(fp.reduction, 4), "kv_bytes": fp.kv_bytes,
                "swa_kv_bytes": fp.swa_kv_bytes, "recurrent_state_bytes": fp.recurrent_state_bytes,
                "n_ctx_train": ins.geometry.n_ctx_train, "beyond_trained_context": ins.beyond_trained_context,
                "published_kv_matches": ins.published_kv_matches}


@dataclass(frozen=True, kw_only=True)
class VerifyRecord(Record):
    """Theory against llama.cpp's own sizes from a no_alloc dry run (`verify`)."""

    params: Params  # n_ctx as llama.cpp rounded it
    footprint: Footprint | None  # theory; None for an architecture without a layout rule (`no_rule` says why)
    allocations: Allocations
    checks: tuple[Check, ...] = ()
    method: str = "llama.cpp no_alloc dry run (sizes, nothing timed)"
    gguf: str = ""  # the file llama.cpp sized
    context_warning: str | None = None  # n_ctx past the trained context (llama.cpp allows it)
    no_rule: str = ""  # why there is no theory to check: llama.cpp's own sizes are the answer, measured
    kind: ClassVar[RecordKind] = RecordKind.VERIFY

    @property
    def ok(self) -> bool:
        return all_ok(self.checks)

    def summary(self) -> dict:
        fp = self.footprint
        return {"ok": self.ok, "kv_bytes": fp.kv_bytes if fp else None, "kv_bytes_llama_cpp": self.allocations.kv_bytes,
                "recurrent_state_bytes": fp.recurrent_state_bytes if fp else None,
                "recurrent_state_bytes_llama_cpp": self.allocations.recurrent_bytes}
