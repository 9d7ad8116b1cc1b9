"""A measurement as a bench record, saved at once: the theory and the roofline beside it; and, for --resume, the
tests a results file already holds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...memory import speculative
from ...model.architectures import no_rule_line
from ...records.bench import BenchRecord, BenchResult, Measurement
from ...records.records import RecordRefused, append, read_records, save
from ...settings.bench_tests import BenchTest
from ...settings.params import Params
from ...settings.values import Runtime
from .job import SweepBasis
from .measure import roofline, theory
from .plan import BenchPlan


def bench_record(shared: SweepBasis, m: Measurement) -> BenchRecord:
    """One measurement as a record: the model as llama.cpp loaded it, the theory beside it, and its roofline (from
    the record's t/s)."""
    model = shared.model
    if m.model_size_bytes is not None:
        model = dataclasses.replace(model, desc=m.model_desc, size_bytes=m.model_size_bytes, n_params=m.n_params)
    # llama-server's context: the outputs and rollback planes its --spec-type adds (memory.speculative)
    served = m.runtime == Runtime.LLAMA_SERVER
    params = speculative.target_context(m.params, slots=m.params.n_seq) if served else m.params
    fp, error = theory(shared.geometry, params, no_rule=no_rule_line(shared.model.architecture))
    measured = {f.name: getattr(m, f.name) for f in dataclasses.fields(BenchResult)}
    record = BenchRecord(model=model, footprint=fp, theory_error=error, machine=shared.machine,
                         versions=shared.versions, devices=shared.devices, **measured)
    block = roofline(shared.geometry, shared.weights, m.params, m.test, record.avg_ts, shared.peak.peak_gbps)
    return dataclasses.replace(record, roofline=block)


def save_measurement(results: Path, record: BenchRecord) -> BenchRecord:
    """A bench record appended; one that would not read back is kept as a failed test that says why (no numbers
    the file could not hold), so the sweep goes on and --resume does not time it again."""
    try:
        return append(results, record)
    except RecordRefused as exc:
        failed = dataclasses.replace(record, samples_ns=(), reason=f"measured, but not recordable: {exc}"[:2000],
                                     server=None, allocations=None, memory=None)
        return save(results, failed)


def measured_before(plan: BenchPlan):
    """resume: the tests the results file holds already, of this model on these devices, by this runtime (and
    as many parallel requests)."""
    concurrency = plan.server.concurrency if plan.server else 1

    def measured(devices: tuple[str, ...]) -> set[tuple[Params, BenchTest]]:
        return {(r.params, r.test) for r in read_records(plan.target).records
                if isinstance(r, BenchRecord) and r.model.label == plan.source.label and r.devices == devices
                and r.runtime == plan.runtime and r.concurrency == concurrency}

    return measured
