"""The record of `fit`: does it fit, with which settings, and what llama.cpp allocated where (`--verify`), each
device's parts predicted against those allocated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core import serial
from ..memory.allocations import PARTS, PRINTED_TOLERANCE_BYTES, Parts, bytes_equal
from ..memory.fit_result import FitResult
from ..memory.unified import UnifiedMemory
from ..runtimes.registry import run_line
from ..settings.params import Params
from .quality import KvQuality
from .record import Record, RecordKind


@dataclass(frozen=True)
class DeviceCheck:
    """One device: the parts predicted against those llama.cpp allocated there."""

    name: str
    predicted: Parts
    allocated: Parts
    tolerance_bytes: int = PRINTED_TOLERANCE_BYTES
    by_total: bool = False  # --cpu-only: only the totals are compared (file mapping pads the weights)
    # several devices: a card's compute to allocations.compute_tolerance (llama.cpp's no_alloc projection)
    compute_tolerance_bytes: int = PRINTED_TOLERANCE_BYTES

    def part_ok(self, part: str) -> bool:
        if self.by_total:
            return self.ok
        tolerance = self.compute_tolerance_bytes if part == "compute" else self.tolerance_bytes
        return bytes_equal(getattr(self.allocated, part), getattr(self.predicted, part), tolerance)

    @property
    def ok(self) -> bool:
        if self.by_total:
            return bytes_equal(self.allocated.total, self.predicted.total, self.tolerance_bytes)
        return all(self.part_ok(p) for p in PARTS)


@dataclass(frozen=True)
class PlacementCheck:
    """One placement created for real."""

    what: str
    where: str
    n_ctx: int
    devices: tuple[DeviceCheck, ...] = ()
    error: str | None = None
    rss_delta: int | None = None
    gpu_delta: int | None = None
    fit_compute_estimate: int = 0
    budget: int = 0  # what the card may hold after the reserve and the projector's share
    card_total: int = 0
    ram_mode: bool = False
    cards_over_budget: tuple[str, ...] = ()  # several cards: those whose allocation passed their own budget
    pool: UnifiedMemory | None = None  # a unified machine: the allocation against its ceiling and its RAM

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.devices) and all(d.ok for d in self.devices)

    @property
    def within_budget(self) -> bool:
        within_pool = self.pool is None or self.pool.within_ram
        return self.card_total <= self.budget and not self.cards_over_budget and within_pool


@dataclass(frozen=True)
class FitVerification:
    placements: tuple[PlacementCheck, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.placements) and all(p.ok for p in self.placements)

    @property
    def devices(self) -> tuple[DeviceCheck, ...]:
        return self.placements[0].devices if self.placements else ()

@dataclass(frozen=True, kw_only=True)
class FitRecord(Record):
    """Does it fit, with which settings (`fit`), and what llama.cpp allocated where (`--verify`)."""

    fit: FitResult
    verify: FitVerification | None = None
    quality: tuple[KvQuality, ...] = ()  # the lossy KV types' measured quality (from --results), or the command
    kind: ClassVar[RecordKind] = RecordKind.FIT

    @property
    def rows(self):
        return self.fit.rows

    # a row's `settings` hold the context; its placement says where the layers go. The stored form gives each row
    # the llama.cpp parameters it runs with (-ngl, --n-cpu-moe, -ts from the placement) so that a script reads
    # them where llama.cpp's names say, and reading it back keeps the context alone.
    PLACED = ("n_gpu_layers", "n_cpu_moe", "tensor_split")

    def to_dict(self) -> dict:
        data = super().to_dict()
        for row, stored in zip(self.fit.rows, data["fit"]["rows"]):
            placed = row.placement.params(row.settings, self.fit.n_layer_all)
            stored["settings"].update({name: serial.to_dict(placed)[name] for name in self.PLACED})
            stored["max_n_ctx"] = row.max_n_ctx or None  # null: no context fits (0 would read as -c 0, trained)
        return data

    @classmethod
    def from_dict(cls, data: dict):
        if not isinstance(data, dict):
            return super().from_dict(data)  # ShapeError: a record is a JSON object
        rows = data.get("fit", {}).get("rows") if isinstance(data.get("fit"), dict) else None
        if isinstance(rows, list):
            defaults = {name: serial.to_dict(Params())[name] for name in cls.PLACED}
            data = {**data, "fit": {**data["fit"], "rows": [_stored_row(r, defaults) for r in rows]}}
        return super().from_dict(data)

    def inconsistency(self) -> str | None:
        fit = self.fit
        missing = [name for name, values in (("rows", fit.rows), ("budgets", fit.budgets), ("contexts", fit.contexts))
                   if not values]
        return f"a fit of no {' and no '.join(missing)}" if missing else None

    @property
    def ok(self) -> bool:
        return self.verify is None or self.verify.ok

    def summary(self) -> dict:
        """Per budget, context and --spec-type sized: the recommended row (its index in `fit.rows`), and what to
        run ("none" first: without speculative decoding)."""
        recommendations = []
        cells = [(b, n, s) for b in self.fit.budgets for n in self.fit.contexts for s in self.fit.spec_types]
        for budget, n_ctx, spec in cells:
            best = self.fit.recommended(budget.label, n_ctx, spec)
            placed = best.placement.params(best.settings, self.fit.n_layer_all) if best else None
            recommendations.append({
                "budget": budget.label, "n_ctx": n_ctx, "spec_type": spec, "fits": best is not None,
                "row": self.fit.rows.index(best) if best else None,
                "type_k": placed.type_k if best else None, "type_v": placed.type_v if best else None,
                "n_gpu_layers": placed.n_gpu_layers if best else None,
                "n_cpu_moe": placed.n_cpu_moe if best else None,
                "max_n_ctx": (best.max_n_ctx or None) if best else None,
                "max_n_ctx_is_trained": bool(best and best.max_n_ctx
                                             and best.max_n_ctx == (self.fit.n_ctx_train or 0) > 0),
                "total_bytes": best.parts.total if best else None,
                "host_bytes": best.host.total if best else None,
                "devices": _devices(best) if best else None,
                "runtime": str(self.fit.runtime.runtime),
                "command": run_line(self.fit, best) if best else None})
        return {"ok": self.ok, "recommendations": recommendations}


def _stored_row(row, placed_defaults: dict):
    """A fit row as stored, back to the dataclass's form: the context's settings, max_n_ctx 0 for none."""
    if not isinstance(row, dict):
        return row
    out = dict(row)
    if isinstance(row.get("settings"), dict):
        out["settings"] = {**row["settings"], **placed_defaults}
    if "max_n_ctx" in row and row["max_n_ctx"] is None:
        out["max_n_ctx"] = 0
    return out


def _devices(row) -> list[dict]:
    """A fit row's parts per device for scripts: each card in device order, then the host."""
    out = [{"name": c.name, "endpoint": c.endpoint, "budget_bytes": c.budget, "layers": c.layers,
            "weights_bytes": c.parts.weights, "kv_bytes": c.parts.kv, "recurrent_bytes": c.parts.recurrent,
            "compute_bytes": c.parts.compute, "reserve_bytes": c.parts.reserve, "projector_bytes": c.parts.projector,
            "total_bytes": c.parts.total, "fits": c.fits} for c in row.devices]
    h = row.host
    out.append({"name": "system RAM", "weights_bytes": h.weights, "kv_bytes": h.kv, "recurrent_bytes": h.recurrent,
                "compute_bytes": h.compute, "projector_bytes": h.projector, "prompt_cache_bytes": h.prompt_cache,
                "checkpoints_bytes": h.checkpoints, "total_bytes": h.total})
    return out
