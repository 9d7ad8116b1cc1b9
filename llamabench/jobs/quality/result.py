"""The rows of a quality run: one lossy choice at one context against its base, measured or why not."""

from __future__ import annotations

from dataclasses import dataclass

from ...core import cache_types
from ...memory.divergence import QualityStats

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
