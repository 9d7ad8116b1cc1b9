"""How long a bench plan will take (`bench --dry-run`): its tokens, and their time where an earlier timed run of
the same model on this machine, in the plan's results file, calibrates the speed model (roofline's --calibrate:
tg at two depths, and pp where the run has it).

Each configuration fills its context once, depth after depth (llama-server: each slot, its prompt cache kept
between depths), and times each test after one warm-up (`llama.child.measure_tests`; llama-server's requests
have none). Loading the model and creating each context come on top.
"""

from __future__ import annotations

import platform
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


def _slots(plan: BenchPlan) -> int:
    """The requests at once: each a slot of its own, each slot filled (llama-server); 1 for a Llama() context."""
    return plan.server.concurrency if plan.server else 1


def _warmup(plan: BenchPlan, t, n_batch: int) -> int:
    """The untimed tokens before a test's repetitions: a Llama() context warms up (a batch of pp, one tg token);
    llama-server's requests do not."""
    if plan.server:
        return 0
    return min(n_batch, t.n_tokens) if t.kind is TestKind.PP else 1


def _tokens(plan: BenchPlan) -> tuple[int, int]:
    fills = tests = 0
    for p in plan.configurations:  # each fills to its deepest depth once, a slot at a time (serve.py, child.py)
        fills += max(t.depth for t in plan.tests) * _slots(plan)
        tests += sum((plan.repetitions * t.n_tokens + _warmup(plan, t, p.n_batch)) * _slots(plan)
                     for t in plan.tests)
    return fills, tests


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
    prompt = Prompt(weights.loaded_bytes, speed.matmul_flops(meta, geometry))
    here = platform.node()  # runs of this machine, by this runtime: another box's speed says nothing of this one's
    try:
        model, measured, _ = calibrated(plan.target, source, geometry, active, prompt,
                                        keep=lambda r: r.machine.host == here and r.runtime == plan.runtime)
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

    deepest = max(t.depth for t in plan.tests)
    fill = prefill(deepest, 0) if deepest else 0.0  # depth after depth, once (llama-server: the prompt cache)
    tests = 0.0
    for t in plan.tests:
        warmup = _warmup(plan, t, p.n_batch)
        if t.kind is TestKind.PP:
            one, warm = prefill(t.n_tokens, t.depth), prefill(warmup, t.depth) if warmup else 0.0
        else:
            per_token = model.seconds(speed.token_cost(geometry, p, active, t.depth + t.n_tokens // 2))
            one, warm = t.n_tokens * per_token, warmup * per_token
        tests += plan.repetitions * one + warm
    return (fill + tests) * _slots(plan)  # the slots' work shares one machine
