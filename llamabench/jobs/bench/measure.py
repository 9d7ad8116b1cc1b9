"""What one timed test measured, and the theory set beside it: typed blocks of a bench record. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import LlamabenchError
from ...memory import speed
from ...memory.footprint import Footprint, compute_footprint
from ...model.geometry import ModelGeometry
from ...records.bench import Roofline
from ...settings.bench_tests import BenchTest, TestKind
from ...settings.params import Params


@dataclass(frozen=True)
class WeightsBasis:
    """What the roofline of a bench record needs of the weights: what a token reads and computes."""

    work: speed.ModelWork
    basis: str


def theory(geometry: ModelGeometry | None, params: Params, *, no_rule: str = "") -> tuple[Footprint | None, str | None]:
    """The footprint of these parameters, or why there is none (a quantized V without flash attention, an
    architecture without a layout rule: `no_rule` says why)."""
    if geometry is None:
        return None, no_rule or "no layout rule for this architecture: llama.cpp's own numbers only"
    try:
        return compute_footprint(geometry, params), None
    except LlamabenchError as exc:
        return None, str(exc)


def roofline(geometry: ModelGeometry | None, weights: WeightsBasis | None, params: Params, test: BenchTest,
             avg_ts: float | None, peak_gbps: float | None) -> Roofline | None:
    if weights is None or geometry is None:
        return None
    cost = test_cost(weights.work, params, test)
    achieved = cost.total_bytes * avg_ts / 1e9 if avg_ts else None
    gqa = speed.full_gqa_cost(geometry, params, weights.work, test.depth + test.n_tokens // 2) \
        if test.kind is TestKind.TG else None
    return Roofline(cost.total_bytes, cost.weights_bytes, cost.kv_bytes, cost.recurrent_bytes, cost.attention_flops,
                    f"{weights.basis}; KV read at the test's middle depth" if test.kind is TestKind.TG
                    else f"{weights.basis}; every weight once per ubatch",
                    gqa.total_bytes if gqa else None, gqa.attention_flops if gqa else None,
                    round(achieved, 2) if achieved else None, peak_gbps,
                    round(achieved / peak_gbps, 4) if achieved and peak_gbps else None)


def test_cost(work: speed.ModelWork, params: Params, test: BenchTest) -> speed.TokenCost:
    """The average token of a test: tg's middle token; pp's share of its ubatches (each reads the weights it
    touches once, writes and reads its KV rows, and attends over the cells before its tokens)."""
    if test.kind is TestKind.TG:
        return speed.decode_cost(work, params, test.depth + test.n_tokens // 2)
    costs = [speed.ubatch_cost(work, params, start, n)
             for start, n in speed.ubatches(params, test.n_tokens, test.depth)]
    n = max(1, test.n_tokens)
    return speed.TokenCost(test.depth, round(sum(c.weights_bytes for c in costs) / n),
                           round(sum(c.kv_bytes for c in costs) / n), 0,
                           round(sum(c.attention_flops for c in costs) / n))
