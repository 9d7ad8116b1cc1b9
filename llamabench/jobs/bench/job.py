"""The `bench` job: run a plan's sweep, with everything its records share (the model, its geometry, the
weights one token reads, the peak bandwidth, the machine, the versions and the devices) worked out first.

The records and their results file belong to the layer above: `measured` says which tests the file holds
already (resume), and `save` gets each measurement with what it shares, the moment it exists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from ...core.errors import EngineError
from ...llama import ggml_devices
from ...llama import rpc as rpc_backend
from ...llama.devices import buffer_name
from ...memory import speed
from ...model.geometry import ModelGeometry
from ...model.layout import has_layout_rule
from ...model.metadata import ModelRef
from ...records.bench import Measurement
from ...settings.bench_tests import BenchTest
from ...settings.params import Params
from ...world import sysinfo
from ...world.bandwidth import PeakBandwidth
from ...world.sysinfo import Machine
from ...world.versions import Versions, these_versions
from . import runner, serve
from .measure import WeightsBasis
from .plan import BenchPlan
from .runner import Event, SweepOutcome


@dataclass(frozen=True)
class SweepBasis:
    """What every record of one sweep shares."""

    model: ModelRef  # the model block, with the file llama.cpp loaded
    geometry: ModelGeometry | None  # None: an architecture without a layout rule (llama.cpp's numbers alone)
    weights: WeightsBasis | None
    peak: PeakBandwidth
    machine: Machine
    versions: Versions
    devices: tuple[str, ...] = ()  # --rpc: the devices the model is spread over, in llama.cpp's order


def run_bench(plan: BenchPlan, *, save: Callable[[SweepBasis, Measurement], None],
              measured: Callable[[tuple[str, ...]], set[tuple[Params, BenchTest]]] | None = None,
              on_event: Event | None = None) -> SweepOutcome:
    """Every configuration of the plan in a child of its own (or on a llama-server of its own);
    `measured(devices)`: the tests to skip."""
    if plan.server:
        return _run_server(plan, save, measured, on_event)
    hosts = plan.hosts
    rpc_backend.distinct_servers(hosts)
    for host in hosts:  # each host answers its memory query within the deadline, or the bench does not start
        rpc_backend.remote_memory(host)
    # named devices: the RPC hosts first, then this build's GPUs (llama-bench --rpc's order); none without --rpc
    devices = tuple(buffer_name(h) for h in hosts) + tuple(ggml_devices.gpu_devices()) if hosts else ()
    if hosts and not rpc_backend.available():
        raise EngineError("--rpc needs llama.cpp's RPC backend: reinstall llama-cpp-python with "
                          "CMAKE_ARGS=-DGGML_RPC=on (make install does)")
    done = measured(devices) if measured else set()
    path = plan.source.gguf_for_llama()
    shared = _sweep_basis(plan, path, devices)
    if on_event:
        on_event("plan", {"tests": len(plan.configurations) * len(plan.tests)
                          - len(done & {(p, t) for p in plan.configurations for t in plan.tests})})
    return runner.run_sweep(str(path), list(plan.configurations), list(plan.tests), plan.repetitions,
                            save=lambda m: save(shared, m), done=lambda p, t: (p, t) in done, on_event=on_event,
                            rpc=(list(hosts) + list(ggml_devices.gpu_devices())) if hosts else None)


def _run_server(plan: BenchPlan, save, measured, on_event: Event | None) -> SweepOutcome:
    done = measured(()) if measured else set()
    path = plan.source.gguf_for_llama()
    shared = _sweep_basis(plan, path, ())
    if on_event:
        on_event("plan", {"tests": len(plan.configurations) * len(plan.tests)
                          - len(done & {(p, t) for p in plan.configurations for t in plan.tests})})
    return serve.run_server_sweep(str(path), list(plan.configurations), list(plan.tests), plan.repetitions,
                                  plan.server, save=lambda m: save(shared, m), done=lambda p, t: (p, t) in done,
                                  on_event=on_event)


def _sweep_basis(plan: BenchPlan, path, devices: tuple[str, ...]) -> SweepBasis:
    """What the records share. An architecture without a layout rule is benched all the same: its records hold what
    llama.cpp allocated and how fast it ran, with no theory beside them (each says why)."""
    source = plan.source
    geometry = source.llama_geometry() if has_layout_rule(source.llama_metadata) else None
    basis = None
    if geometry is not None:
        meta = source.llama_metadata
        work = speed.model_work(meta, geometry, speed.weights_of(meta, geometry))
        read = "the geometry twin" if source.is_catalog else "the GGUF"
        basis = WeightsBasis(work, f"weights from the tensor infos of {read}: "
                                   f"{work.decode_weight_bytes / 2**20:.2f} MiB read per decoded token")
    peak = runner.peak_bandwidth(gpu=any(p.n_gpu_layers for p in plan.configurations))
    machine = replace(sysinfo.this_machine(), memory_bandwidth=peak)
    # size and params as llama_model_size / llama_model_n_params count them, from the header llama.cpp loads: what a
    # llama-server record shows (its server loads the model, not us); a Llama() context's own figures replace them
    tensors = source.llama_metadata.tensors
    size = sum(t.n_bytes for t in tensors)
    n_params = sum(math.prod(t.shape) for t in tensors)
    return SweepBasis(source.model_block(source.llama_metadata.architecture, loaded=path, size_bytes=size or None,
                                         n_params=n_params or None),
                      geometry, basis, peak, machine, these_versions(), devices)
