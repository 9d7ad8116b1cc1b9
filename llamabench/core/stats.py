"""Repetition statistics, as llama-bench reports them: mean and sample standard deviation of t/s."""

from __future__ import annotations

import math


def tokens_per_second(n_tokens: int, ns: int) -> float:
    return n_tokens * 1e9 / ns if ns > 0 else float("inf")


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def stddev(values: list[float]) -> float:
    """Sample standard deviation (n - 1), 0 for a single value (llama-bench's stdev)."""
    if len(values) <= 1:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


SPREAD_WARNING = 0.10  # warn when stddev is over 10% of the mean
