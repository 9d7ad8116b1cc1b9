"""A backend's coefficients fitted on measured runs, and how well they hold out. Pure (numpy).

Each observation is one llama-bench row: for each term of the speed model, the seconds one token spends in it per
unit of coefficient (`speed_model.SpeedModel` with every coefficient 1), and the measured t/s. The predicted time
is linear in the coefficients, so they are fitted by non-negative least squares on the relative error of each
row's time (Lawson and Hanson's active set; a coefficient held at 0 is a term that never limits). A leave-one-out
pass refits without each group (a machine, else a model) and predicts the rows it left out: the spread of those
residuals is the error band the output states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class Observation:
    terms: dict[str, float]  # seconds per token per unit coefficient, by term
    measured_ts: float
    machine: str
    model: str
    label: str  # "pp2048 @ d4096", for tables


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 500) -> np.ndarray:
    """min ||a x - b|| with x >= 0 (Lawson and Hanson, Solving Least Squares Problems, 1974, ch. 23)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive: list[int] = []
    w = a.T @ (b - a @ x)
    for _ in range(max_iter):
        free = [j for j in range(n) if j not in passive]
        if not free or max(w[free]) <= 1e-12:
            break
        passive.append(max(free, key=lambda j: w[j]))
        while passive:  # every coefficient dropped back to 0: the outer loop picks again
            s = np.zeros(n)
            s[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if min(s[passive]) > 0:
                x = s
                break
            alpha = min(x[i] / (x[i] - s[i]) for i in passive if s[i] <= 0)
            x = x + alpha * (s - x)
            passive = [i for i in passive if x[i] > 1e-12]
        w = a.T @ (b - a @ x)
        if not passive and max(w[j] for j in range(n)) <= 1e-12:
            break
    return x


def machine_weights(observations: Sequence[Observation]) -> list[float]:
    """Each row's weight: 1 / sqrt(rows of its machine), so that every machine counts alike in the fit (a machine
    with 90 published rows does not drown one with 4)."""
    counts: dict[str, int] = {}
    for o in observations:
        counts[o.machine] = counts.get(o.machine, 0) + 1
    return [1.0 / np.sqrt(counts[o.machine]) for o in observations]


# a term priced against a peak (the bandwidth, a FLOP rate) cannot run above it: its coefficient is 1 / an efficiency
# of at most 1. The others (a launch time, the bytes a flash tile streams) have no such floor.
AT_MOST_PEAK = frozenset({"weights", "attention", "vector", "prefill_weights", "matmul", "flash"})


def fit(observations: Sequence[Observation], terms: Sequence[str]) -> dict[str, float]:
    """The coefficients that make each row's predicted time closest to its measured time, relatively, every machine
    weighted alike; a term priced against a peak at most at its peak (coefficient >= 1, solved as 1 + a
    non-negative excess)."""
    if not observations:
        return {t: 0.0 for t in terms}
    w = np.array(machine_weights(observations))
    a = np.array([[o.terms.get(t, 0.0) * o.measured_ts for t in terms] for o in observations]) * w[:, None]
    floor = np.array([1.0 if t in AT_MOST_PEAK else 0.0 for t in terms])
    x = floor + nnls(a, w - a @ floor)
    return {t: float(v) for t, v in zip(terms, x)}


MIN_CARD_ROWS = 3  # a machine's own scale needs this many of its rows


def machine_scales(coefficients: dict[str, float], observations: Sequence[Observation]) -> dict[str, float]:
    """Each machine's own factor on the backend's time (the median of predicted / measured t/s over its rows): how
    far its reachable bandwidth and throughput sit from its published figures, beside the backend's average."""
    ratios: dict[str, list[float]] = {}
    for o in observations:
        ratios.setdefault(o.machine, []).append(predicted_ts(coefficients, o) / o.measured_ts)
    return {m: float(np.median(r)) for m, r in ratios.items() if len(r) >= MIN_CARD_ROWS}


def predicted_ts(coefficients: dict[str, float], o: Observation, scale: float = 1.0) -> float:
    seconds = scale * sum(coefficients.get(t, 0.0) * v for t, v in o.terms.items())
    return 1.0 / seconds if seconds > 0 else float("inf")


def residual(coefficients: dict[str, float], o: Observation, scale: float = 1.0) -> float:
    """predicted / measured - 1."""
    return predicted_ts(coefficients, o, scale) / o.measured_ts - 1.0


def leave_one_out(observations: Sequence[Observation], terms: Sequence[str], group: Callable[[Observation], str],
                  *, own_scales: bool = False) -> list[tuple[Observation, float]]:
    """Each group refitted without it and predicted: (row, residual) for every row whose group had company.
    `own_scales`: each machine's own factor, as fitted without the group, applied (a model held out on a known
    machine); else none (a machine held out: the backend's coefficients alone)."""
    out = []
    groups = sorted({group(o) for o in observations})
    if len(groups) < 2:
        return out
    for g in groups:
        kept = [o for o in observations if group(o) != g]
        coefficients = fit(kept, terms)
        scales = machine_scales(coefficients, kept) if own_scales else {}
        out += [(o, residual(coefficients, o, scales.get(o.machine, 1.0))) for o in observations if group(o) == g]
    return out


def spread(residuals: Sequence[float], share: float = 0.9) -> tuple[float, float]:
    """The band that holds `share` of the residuals, centred as they are: their (1 - share) / 2 and
    (1 + share) / 2 quantiles."""
    if not residuals:
        return 0.0, 0.0
    r = np.sort(np.array(residuals))
    lo, hi = np.quantile(r, [(1 - share) / 2, (1 + share) / 2])
    return float(lo), float(hi)
