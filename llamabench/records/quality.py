"""The record of `quality`: what lossy choices cost, as llama-perplexity --kl-divergence measures it, row by row;
and the quality a fit shows beside its lossy KV types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core import cache_types
from ..memory.divergence import QualityStats, scored_per_chunk
from ..model.metadata import ModelRef
from ..settings.params import Params
from .record import Record, RecordKind

F16_BASE = "f16 KV"  # the base of a KV choice: the same model with an f16 cache


@dataclass(frozen=True)
class ScoredTextRef:
    """The text a run scored: its name, sha256, characters and tokens (in the model's vocabulary)."""

    name: str
    sha256: str
    n_chars: int
    n_tokens: int = 0


@dataclass(frozen=True)
class QualityRow:
    """One choice (type_k, type_v of the model) against `base`, at n_ctx, over `chunks` chunks; the statistics are
    llama-perplexity --kl-divergence's, None where nothing was measured (`reason` says why)."""

    n_ctx: int
    type_k: str
    type_v: str
    base: str  # "f16 KV", or the reference model's label
    chunks: int = 0  # chunks scored
    chunks_planned: int = 0
    kld_mean: float | None = None
    kld_mean_unc: float | None = None
    kld_p99: float | None = None
    kld_max: float | None = None
    ppl: float | None = None
    ppl_unc: float | None = None
    ppl_base: float | None = None
    ppl_base_unc: float | None = None
    same_top_p: float | None = None  # %
    same_top_unc: float | None = None
    n_tokens_scored: int = 0
    reason: str | None = None  # why it was not measured, or not over every planned chunk

    @classmethod
    def measured(cls, n_ctx: int, choice: tuple[str, str], base: str, done: int, planned: int,
                 s: QualityStats, reason: str | None = None) -> "QualityRow":
        return cls(n_ctx, choice[0], choice[1], base, done, planned, s.kld_mean, s.kld_mean_unc, s.kld_p99,
                   s.kld_max, s.ppl, s.ppl_unc, s.ppl_base, s.ppl_base_unc, s.same_top_p, s.same_top_unc,
                   s.n_tokens, reason)

    @property
    def ok(self) -> bool:
        return self.kld_mean is not None

    def inconsistency(self) -> str | None:
        """What this row says against itself (read back from a file), or None: statistics of no chunk scored, of
        more tokens than its chunks score, or half of them missing, are not a measurement."""
        stats = (self.kld_mean, self.kld_mean_unc, self.kld_p99, self.kld_max, self.ppl, self.ppl_unc, self.ppl_base,
                 self.ppl_base_unc, self.same_top_p, self.same_top_unc)
        if self.chunks > self.chunks_planned:
            return f"{self.chunks} chunks scored of {self.chunks_planned} planned"
        if self.kld_mean is None:
            return "statistics without a mean KLD" if any(v is not None for v in stats) else None
        if any(v is None for v in stats):
            return "a measured row with some of its statistics missing"
        if self.chunks < 1 or self.n_tokens_scored < 1:
            return f"statistics of {self.chunks} chunks and {self.n_tokens_scored} tokens scored: not a measurement"
        if self.n_tokens_scored > self.chunks * scored_per_chunk(self.n_ctx):
            return (f"{self.n_tokens_scored:,} tokens scored in {self.chunks} chunks of {self.n_ctx:,}, which score "
                    f"{scored_per_chunk(self.n_ctx):,} each")
        top = self.kld_max + 1e-6 * abs(self.kld_max) + 1e-9  # the maximum is a float32 of llama-perplexity's
        if self.kld_mean > top or self.kld_p99 > top:
            return f"a mean or 99th percentile KLD above the maximum {self.kld_max:g}"
        return None

    @property
    def ppl_ratio(self) -> float | None:
        return self.ppl / self.ppl_base if self.ppl is not None and self.ppl_base else None

    @property
    def lossy_kv(self) -> bool:
        return self.base == F16_BASE or cache_types.is_quantized(self.type_k) or cache_types.is_quantized(self.type_v)

    @property
    def label(self) -> str:
        """The choice in words: `q8_0/q8_0 KV`, or `weights` against another model."""
        return f"{self.type_k}/{self.type_v} KV" if self.base == F16_BASE else (
            "weights" + ("" if (self.type_k, self.type_v) == ("f16", "f16") else f", {self.type_k}/{self.type_v} KV"))


@dataclass(frozen=True)
class KvQuality:
    """One lossy KV pair of a fit at one context: its measured quality row (None: not measured) and the command."""

    type_k: str
    type_v: str
    n_ctx: int
    row: QualityRow | None = None
    text: ScoredTextRef | None = None
    command: str = ""  # the `llamabench quality` line that measures it at this context

    @property
    def at_this_context(self) -> bool:
        return self.row is not None and self.row.n_ctx == self.n_ctx

@dataclass(frozen=True, kw_only=True)
class QualityRecord(Record):
    """What lossy choices cost in quality at one or more contexts, as llama-perplexity --kl-divergence measures it
    (`quality`): each row one choice against its base (f16 KV, or `base_model`'s weights), on `text`."""

    params: Params  # the settings every context was made with (n_ctx and the KV types are the rows')
    text: ScoredTextRef
    rows: tuple[QualityRow, ...] = ()
    base_model: ModelRef | None = None
    chunks_asked: int | None = None
    rows_per_decode: int = 0  # scored rows per decode call (the logits of every context bounded)
    context_warning: str | None = None
    interrupted: bool = False  # Ctrl-C: the rows hold the chunks finished before it
    kind: ClassVar[RecordKind] = RecordKind.QUALITY

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.ok and r.reason is None for r in self.rows)

    def inconsistency(self) -> str | None:
        return next((f"rows[{i}]: {wrong}" for i, r in enumerate(self.rows) if (wrong := r.inconsistency())), None)

    def summary(self) -> dict:
        return {"rows": [{"n_ctx": r.n_ctx, "choice": r.label, "kld_mean": r.kld_mean, "ppl_ratio": r.ppl_ratio,
                          "same_top_p": r.same_top_p} for r in self.rows]}
