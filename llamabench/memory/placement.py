"""Where a fit puts the model, and what that costs on each card and in system RAM: the rows of a fit's answer,
and how the fitting rows are ranked. Pure data and arithmetic; the search that makes the rows is jobs/fit/search.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from enum import StrEnum

from ..core.units import MIB
from ..settings.budget import Budget
from ..settings.params import Params
from . import allocations

# least quality given up first
QUALITY_ORDER = ("f32", "bf16", "f16", "q8_0", "q5_1", "q5_0", "q4_1", "iq4_nl", "q4_0")


class PlacementKind(StrEnum):
    ALL = "all"  # every layer (and the output layer) on the card
    N_CPU_MOE = "n_cpu_moe"  # every layer on the card, routed experts of the first `value` layers in RAM
    NGL = "ngl"  # the last `value` layers (the output layer counts as one) on the card
    RAM = "ram"  # everything in system RAM (a CPU build)


@dataclass(frozen=True)
class Placement:
    kind: PlacementKind
    value: int = 0
    split: tuple[int, ...] = ()  # several devices: layers on each, in device order (the -ts printed); (): one card

    def with_split(self, split: tuple[int, ...]) -> "Placement":
        return replace(self, split=tuple(split))

    @property
    def tensor_split(self) -> tuple[float, ...]:
        return tuple(float(n) for n in self.split) if len(self.split) > 1 else ()

    def n_gpu_layers(self, n_layer_all: int) -> int:
        return self.value if self.kind is PlacementKind.NGL else n_layer_all + 1

    @property
    def n_cpu_moe(self) -> int:
        return self.value if self.kind is PlacementKind.N_CPU_MOE else 0

    @property
    def rank(self) -> int:
        return {PlacementKind.ALL: 0, PlacementKind.RAM: 0, PlacementKind.N_CPU_MOE: 1, PlacementKind.NGL: 2}[self.kind]

    def params(self, base: Params, n_layer_all: int) -> Params:
        """The llama.cpp parameters of this placement: -ngl and --n-cpu-moe on top of `base`."""
        if self.kind is PlacementKind.RAM:
            return base.replace(n_gpu_layers=0, n_cpu_moe=0, tensor_split=())
        return base.replace(n_gpu_layers=self.n_gpu_layers(n_layer_all), n_cpu_moe=self.n_cpu_moe,
                            tensor_split=self.tensor_split)


@dataclass(frozen=True)
class Parts(allocations.Parts):
    """What a placement puts on the card (with --cpu-only: everything, in system RAM): llama.cpp's four parts
    (weights, KV, recurrent state, compute: `buffers`) and what is set aside beside them."""

    reserve: int = 0
    projector: int = 0  # a vision projector (--mmproj) on the card: its weights and compute buffer

    @property
    def total(self) -> int:
        return super().total + self.reserve + self.projector

    @classmethod
    def add_up(cls, parts: "tuple[Parts, ...]") -> "Parts":
        """Several cards' parts added up, part by part."""
        return cls(*(sum(getattr(p, f.name) for p in parts) for f in fields(cls)))


@dataclass(frozen=True)
class CardParts:
    """One card of a machine with several (`--vram 24GiB+12GiB`, `--rpc`): its parts against its own memory."""

    name: str  # the card as the user gave it (24GiB), or the remote host (RPC HOST:PORT)
    budget: int
    parts: Parts
    layers: int  # layers on it, the output layer counting as one
    endpoint: str | None = None  # a remote ggml-rpc-server

    @property
    def unused(self) -> bool:
        """No layer and no buffer of this model: its reserve is not this model's to keep."""
        p = self.parts
        return self.layers == 0 and not (p.weights or p.kv or p.recurrent or p.compute or p.projector)

    @property
    def fits(self) -> bool:
        return self.unused or self.parts.total <= self.budget

    @property
    def short_by(self) -> int:
        return 0 if self.unused else max(0, self.parts.total - self.budget)


@dataclass(frozen=True)
class HostParts(allocations.Parts):
    """What stays in system RAM beside the card: at start (llama.cpp's four parts: the mapped weights it keeps on
    the host, the input embeddings at least; the KV and recurrent state of the layers left on the CPU; the host
    compute buffers and the output (logits) buffer), the projector, and what the runtime grows while it runs
    (llama-server's prompt cache and context checkpoints, upper bounds)."""

    projector: int = 0  # the projector kept in RAM (--no-mmproj-offload)
    prompt_cache: int = 0  # llama-server --cache-ram limit
    checkpoints: int = 0  # llama-server's checkpoint bound: slots x per slot x (recurrent + SWA of a sequence)
    prompt_cache_unlimited: bool = False  # --cache-ram -1: no bound

    @property
    def at_start(self) -> int:
        return super().total + self.projector

    @property
    def growing(self) -> int:
        return self.prompt_cache + self.checkpoints

    @property
    def total(self) -> int:
        return self.at_start + self.growing



@dataclass(frozen=True)
class FitRow:
    budget: Budget
    settings: Params  # the context parameters, as the runtime creates them (the placement is `placement`)
    placement: Placement
    parts: Parts
    max_n_ctx: int  # largest n_ctx (multiple of 256) that fits with this placement, 0 if none
    host: HostParts = HostParts()
    ram: Budget | None = None  # --ram: the system RAM the host part must fit into
    ram_mode: bool = False  # --cpu-only: the budget is system RAM and holds parts and host alike
    devices: tuple[CardParts, ...] = ()  # each card's parts, in device order (`parts` is their sum); () with --cpu-only
    ram_read_bytes: int = 0  # weights a decoded token reads from system RAM (WeightsBreakdown.host_read_per_token)
    # a unified machine (budget.pool): the device's, the host's and the mapped weights in its one RAM, each page once
    pool_bytes: int = 0
    decode_ts: float | None = None  # predicted decode t/s at n_ctx on the named card(s) (jobs.fit.speed); None: unnamed

    @property
    def pooled(self) -> bool:
        return self.budget.pool is not None

    @property
    def multi(self) -> bool:
        return len(self.devices) > 1

    @property
    def budget_label(self) -> str:
        return self.budget.label

    @property
    def budget_bytes(self) -> int:
        return self.budget.bytes

    @property
    def card_total(self) -> int:
        return self.parts.total + (self.host.total if self.ram_mode else 0)

    @property
    def card_fits(self) -> bool:
        if self.multi:
            return all(c.fits for c in self.devices)
        return self.card_total <= self.budget.bytes

    @property
    def ram_total(self) -> int:
        """What the RAM check weighs: the whole pool on a unified machine, else the host's part."""
        return self.pool_bytes if self.pooled else self.host.total

    @property
    def ram_fits(self) -> bool:
        return self.ram_mode or self.ram is None or self.ram_total <= self.ram.bytes

    @property
    def fits(self) -> bool:
        return self.card_fits and self.ram_fits

    @property
    def short_by(self) -> int:
        """What the card lacks; with several, the most any one card lacks."""
        if self.multi:
            return max(c.short_by for c in self.devices)
        return max(0, self.card_total - self.budget.bytes)

    @property
    def ram_short_by(self) -> int:
        return 0 if self.ram_fits else self.ram_total - self.ram.bytes

    @property
    def shortfall(self) -> int:
        """All it lacks: the card's (or the device ceiling's) and the RAM's, together."""
        return self.short_by + self.ram_short_by


@dataclass(frozen=True)
class GrowingBounds:
    """llama-server's bounds on what grows in system RAM, lowered so that a row fits: --cache-ram and
    --ctx-checkpoints."""

    cache_ram_mib: int
    ctx_checkpoints: int
    freed: int  # bytes the lower bounds free


def bounds_that_fit(row: FitRow, cache_ram_mib: int, ctx_checkpoints: int) -> GrowingBounds | None:
    """Where a row fits the card but not the RAM only because of what llama-server lets grow (its prompt cache, then
    its context checkpoints, up to their bounds): the largest bounds that fit. None where the card does not fit, the
    RAM fits already, the prompt cache has no bound, or even none of either would not make it fit."""
    short = row.ram_short_by if not row.ram_mode else row.short_by
    h = row.host
    if not short or (not row.ram_mode and not row.card_fits) or h.prompt_cache_unlimited or short > h.growing:
        return None
    cache = max(0, h.prompt_cache - short)
    left = max(0, short - h.prompt_cache)
    checkpoints = ctx_checkpoints
    if left:
        each = h.checkpoints / ctx_checkpoints if ctx_checkpoints else 0
        checkpoints = max(0, ctx_checkpoints - math.ceil(left / each)) if each else 0
    cache_mib = min(cache_ram_mib, cache // MIB) if cache_ram_mib > 0 else 0
    return GrowingBounds(cache_mib, checkpoints, short)


# System RAM is about a tenth of a card's bandwidth: a row that reads more weights from it per token than the row
# that reads least, by more than this share of the model's weights (or 256 MiB), decodes markedly slower
RAM_READ_SLACK = 0.02
RAM_READ_SLACK_MIN = 256 * 2**20


# rows within this share of the fastest predicted decode are alike: the better KV type wins (f16 KV at 128k decodes
# 10-15% slower than q4_0, and is worth it), where weights read from system RAM cost several times that
SPEED_SLACK = 0.25


def recommend(rows: list[FitRow]) -> FitRow | None:
    """The fitting row expected to decode fastest, giving up the least. Where the card is named, its predicted decode
    t/s at n_ctx (roofline's model): the rows within SPEED_SLACK of the fastest; else the rows whose tokens read the
    fewest weight bytes from system RAM (within a slack). Then the better KV type, all-on-card, experts, fewer layers
    in RAM."""
    fitting = [r for r in rows if r.fits]
    if not fitting:
        return None
    if all(r.decode_ts for r in fitting):
        fastest = max(r.decode_ts for r in fitting)
        fitting = [r for r in fitting if r.decode_ts >= fastest * (1 - SPEED_SLACK)]
        return min(fitting, key=quality)
    least = min(r.ram_read_bytes for r in fitting)
    weights = max(r.parts.weights + r.host.weights for r in fitting)
    slack = max(RAM_READ_SLACK_MIN, round(RAM_READ_SLACK * weights))
    fitting = [r for r in fitting if r.ram_read_bytes <= least + slack]
    return min(fitting, key=quality)


def quality(row: FitRow) -> tuple:
    """What a row gives up, least first: the KV type, then all-on-card, experts, fewer layers in RAM."""
    s = row.settings
    rank = lambda t: QUALITY_ORDER.index(t) if t in QUALITY_ORDER else len(QUALITY_ORDER)  # noqa: E731
    return (rank(s.type_k) + rank(s.type_v), row.placement.rank, row.placement.n_cpu_moe, -row.placement.value)
