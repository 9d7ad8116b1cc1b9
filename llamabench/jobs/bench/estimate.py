"""How long a bench plan will take (`bench --dry-run`): its tokens, and their time where an earlier timed run of
the same model on this machine, in the plan's results file, calibrates the speed model (roofline's --calibrate:
tg at two depths, and pp where the run has it).

Each configuration fills its context once, depth after depth (llama-server: again before each repetition), and
times each test after one warm-up (`llama.child.measure_tests`). Loading the model and creating each context come
on top.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import UsageError
from ...memory import speed
from ...model.layout import geometry_from_metadata, has_layout_rule
from ...settings.bench_tests import TestKind
from ..roofline.job import Prompt, calibrated
from .plan import BenchPlan


@dataclass(frozen=True)
class PlanEstimate:
    fill_tokens: int  # prompt tokens decoded to reach the depths
    test_tokens: int  # tokens the timed tests and their warm-ups process
    seconds: float | None  # None: nothing to calibrate on (`basis` says why)
    basis: str


def _tokens(plan: BenchPlan) -> tuple[int, int]:
    depths = sorted({t.depth for t in plan.tests})
    fills = plan.repetitions * sum(depths) if plan.server else max(depths)
    tests = sum((plan.repetitions + 1) * t.n_tokens for t in plan.tests)
    return fills * len(plan.configurations), tests * len(plan.configurations)


def estimate(plan: BenchPlan) -> PlanEstimate:
    """The plan's tokens, and its time from the results file's earlier run of this model where it has one."""
    fill_tokens, test_tokens = _tokens(plan)
    source = plan.source
    if not has_layout_rule(source.metadata):
        return PlanEstimate(fill_tokens, test_tokens, None, "no layout rule for this architecture: no estimate")
    if not plan.target.is_file():
        return PlanEstimate(fill_tokens, test_tokens, None, _no_run(plan))
    meta = source.llama_metadata  # what bench loads: the file, or a catalog id's twin (its runs time the twin)
    geometry = geometry_from_metadata(meta)
    weights, active = speed.weights_per_token(meta, geometry)
    prompt = Prompt(weights.total_bytes + weights.tied_output_bytes, speed.matmul_flops(meta, geometry))
    try:
        model, measured, _ = calibrated(plan.target, source, geometry, active, prompt)
    except UsageError:
        return PlanEstimate(fill_tokens, test_tokens, None, _no_run(plan))
    if model.prefill is None:
        return PlanEstimate(fill_tokens, test_tokens, None, f"{plan.target.name} has tg tests of this model but no "
                            "pp test: no prefill rate to estimate the fill with")
    seconds = sum(_configuration_seconds(plan, p, geometry, prompt, active, model) for p in plan.configurations)
    tg = f"tg at depths {min(measured)} and {max(measured)}"
    return PlanEstimate(fill_tokens, test_tokens, seconds,
                        f"from the earlier run in {plan.target.name}: {tg}, "
                        f"{model.prefill_basis.removeprefix('calibrated on ')}; loading and contexts on top")


def _no_run(plan: BenchPlan) -> str:
    return (f"no timed run of {plan.source.label} in {plan.target.name} yet to calibrate on: a short run first "
            "(-p 512 -n 32 -d 0,2048 -r 2, same --results) gives one")


def _configuration_seconds(plan: BenchPlan, p, geometry, prompt: Prompt, active: int, model) -> float:
    def prefill(n: int, depth: int) -> float:
        return speed.prefill_seconds(geometry, p, prompt.all_weights, active, prompt.matmul_flops, model, n, depth)

    depths = sorted({t.depth for t in plan.tests})
    fill = (plan.repetitions * sum(prefill(d, 0) for d in depths if d) if plan.server
            else prefill(max(depths), 0) if max(depths) else 0.0)
    tests = 0.0
    for t in plan.tests:
        if t.kind is TestKind.PP:
            one, warmup = prefill(t.n_tokens, t.depth), prefill(min(p.n_batch, t.n_tokens), t.depth)
        else:
            per_token = model.seconds(speed.token_cost(geometry, p, active, t.depth + t.n_tokens // 2))
            one, warmup = t.n_tokens * per_token, per_token
        tests += plan.repetitions * one + warmup
    return fill + tests
