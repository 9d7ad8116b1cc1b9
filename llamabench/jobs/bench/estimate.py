"""How long a bench plan will take (`bench --dry-run`): its tokens, and their time by roofline's speed model of
this machine, scaled to an earlier timed run of the same model on this machine in the plan's results file where
there is one (roofline's --calibrate).

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
from ...world import sysinfo
from ..roofline.job import calibrated
from ..roofline.machines import this_machine_model
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
    """The plan's tokens, and its time by roofline's speed model of this machine (`roofline` without --card): the
    CPU's coefficients fitted on published and measured runs, scaled to the results file's earlier run of this model
    where it has one (roofline --calibrate)."""
    fill_tokens, test_tokens = _tokens(plan)
    source = plan.source
    if not has_layout_rule(source.metadata):
        return PlanEstimate(fill_tokens, test_tokens, None, "no layout rule for this architecture: no estimate")
    if any(p.n_gpu_layers for p in plan.configurations) and sysinfo.gpu_memory():
        return PlanEstimate(fill_tokens, test_tokens, None, "layers on this machine's GPU: its time is not estimated "
                            "here (roofline --card NAME prices a card)")
    meta = source.llama_metadata  # what bench loads: the file, or a catalog id's twin (its runs time the twin)
    geometry = geometry_from_metadata(meta)
    work = speed.model_work(meta, geometry, speed.weights_of(meta, geometry))
    model = this_machine_model()
    basis = "roofline's model of this machine's CPU (no earlier run of it here to calibrate on: an estimate)"
    if plan.target.is_file():
        here = platform.node()  # runs of this machine, by this runtime: another box's speed says nothing of this one's
        try:
            model, _ = calibrated(plan.target, source, plan.configurations[0], work, model,
                                  keep=lambda r: r.machine.host == here and r.runtime == plan.runtime)
            basis = f"roofline's model of this machine's CPU, {model.basis.rpartition('; ')[2]}"
        except UsageError:
            pass
    seconds = sum(_configuration_seconds(plan, p, work, model) for p in plan.configurations)
    return PlanEstimate(fill_tokens, test_tokens, seconds, basis + "; loading and contexts on top")


def _configuration_seconds(plan: BenchPlan, p, work: speed.ModelWork, model) -> float:
    deepest = max(t.depth for t in plan.tests)
    fill = model.prefill_seconds(work, p, deepest, 0) if deepest else 0.0  # depth after depth, once
    tests = 0.0
    for t in plan.tests:
        warmup = _warmup(plan, t, p.n_batch)
        kind = "pp" if t.kind is TestKind.PP else "tg"
        per_token = 1.0 / model.test_tokens_per_second(work, p, kind, t.n_tokens, t.depth)
        tests += (plan.repetitions * t.n_tokens + warmup) * per_token
    return (fill + tests) * _slots(plan)  # the slots' work shares one machine
