"""What a lossy choice costs in quality, from llama-perplexity's running sums: KLD, PPL and the same top token.

The statistics are tools/perplexity/perplexity.cpp's (kl_divergence, lines 1675-1982 of the llama.cpp that
llama-cpp-python 0.3.36 vendors): `mean_and_uncertainty` (the ± it prints), the PPL of the choice and of the base
from their mean NLLs, the same-top-token rate with its binomial ±, and its linear-interpolated percentile of the
per-token KLDs. Pure: the sums come from llama.logprobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Sequence


@dataclass(frozen=True)
class KldSums:
    """kl_divergence_result (perplexity.cpp:175): sums over every scored token of a run."""

    sum_nll: float = 0.0
    sum_nll2: float = 0.0
    sum_nll_base: float = 0.0
    sum_nll_base2: float = 0.0
    sum_nll_nll_base: float = 0.0
    sum_kld: float = 0.0
    sum_kld2: float = 0.0
    sum_p_diff: float = 0.0
    sum_p_diff2: float = 0.0
    sum_p_diff4: float = 0.0
    max_p_diff: float = 0.0
    n_same_top: int = 0
    count: int = 0
    SUMMED: ClassVar[tuple[str, ...]] = ("sum_nll", "sum_nll2", "sum_nll_base", "sum_nll_base2", "sum_nll_nll_base",
                                         "sum_kld", "sum_kld2", "sum_p_diff", "sum_p_diff2", "sum_p_diff4")


def mean_and_uncertainty(total: float, total2: float, count: int) -> tuple[float, float]:
    """perplexity.cpp's mean and its standard error (0 for ten values or fewer)."""
    if count < 1:
        return 0.0, 0.0
    f = total / count
    df = total2 / count - f * f
    return f, (math.sqrt(df / (count - 1)) if df > 0 and count > 10 else 0.0)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """perplexity.cpp's percentile of sorted values: linear between the two nearest ranks."""
    if len(sorted_values) == 0:
        return math.nan
    if fraction <= 0:
        return float(sorted_values[0])
    if fraction >= 1:
        return float(sorted_values[-1])
    p = fraction * (len(sorted_values) - 1)
    ip = int(p)
    p -= ip
    return float((1 - p) * sorted_values[ip] + p * sorted_values[min(ip + 1, len(sorted_values) - 1)])


@dataclass(frozen=True)
class QualityStats:
    """One lossy choice against its base, as llama-perplexity --kl-divergence prints it."""

    kld_mean: float
    kld_mean_unc: float
    kld_p99: float
    kld_max: float
    ppl: float  # Mean PPL(Q)
    ppl_unc: float
    ppl_base: float  # Mean PPL(base)
    ppl_base_unc: float
    same_top_p: float  # Same top p, in %
    same_top_unc: float
    n_tokens: int  # tokens scored

    @property
    def ppl_ratio(self) -> float:
        return self.ppl / self.ppl_base if self.ppl_base else math.nan


def quality_stats(sums: KldSums, sorted_kld: Sequence[float]) -> QualityStats:
    """The statistics of one run from its sums and its per-token KLDs (sorted)."""
    log_ppl, log_ppl_unc = mean_and_uncertainty(sums.sum_nll, sums.sum_nll2, sums.count)
    log_base, log_base_unc = mean_and_uncertainty(sums.sum_nll_base, sums.sum_nll_base2, sums.count)
    kld, kld_unc = mean_and_uncertainty(sums.sum_kld, sums.sum_kld2, sums.count)
    top = sums.n_same_top / sums.count if sums.count else math.nan
    top_unc = math.sqrt(top * (1 - top) / (sums.count - 1)) if sums.count > 1 else 0.0
    ppl, ppl_base = math.exp(log_ppl), math.exp(log_base)
    return QualityStats(kld_mean=kld, kld_mean_unc=kld_unc, kld_p99=percentile(sorted_kld, 0.99),
                        kld_max=float(sorted_kld[-1]) if len(sorted_kld) else math.nan,
                        ppl=ppl, ppl_unc=ppl * log_ppl_unc, ppl_base=ppl_base, ppl_base_unc=ppl_base * log_base_unc,
                        same_top_p=100.0 * top, same_top_unc=100.0 * top_unc, n_tokens=sums.count)


def scored_per_chunk(n_ctx: int) -> int:
    """Tokens llama-perplexity scores in one chunk: the second half, less the last (it predicts nothing there)."""
    return n_ctx - 1 - n_ctx // 2


def n_chunks(n_tokens: int, n_ctx: int, asked: int | None) -> int:
    """Chunks of n_ctx tokens the text holds, at most `asked` (None or negative: all), as llama-perplexity."""
    available = n_tokens // n_ctx
    return available if asked is None or asked < 0 else min(asked, available)
