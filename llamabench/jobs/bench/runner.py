"""Run a sweep: one child process per configuration, every measured test handed over the moment it exists.

The caller (`api.bench`) turns each `Measurement` into a record and appends it, so what was measured
is on disk before the next test starts; a crashed child ends its own configuration, never the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from ...core.errors import Stalled
from ...llama.messages import Alloc, BenchJob, Fill, Measured, TestFailed, to_wire
from ...llama.worker import run_job
from ...memory.unified import unified_memory
from ...records.bench import DeviceMemory, Measurement, Memory
from ...settings.bench_tests import BenchTest
from ...settings.params import Params
from ...world import bandwidth, sysinfo
from ...world.bandwidth import PeakBandwidth

Event = Callable[[str, dict], None]  # progress: ("cell" | "alloc" | "fill" | "measured" | "cell_done", data)


@dataclass(frozen=True)
class SweepOutcome:
    skipped: int  # tests `done` said were measured already
    interrupted: bool = False


class PendingCells:
    """The configurations of a sweep that still have tests to run, each announced ("cell") as it comes;
    `skipped` counts the tests `done` said were measured already. What both runtimes' sweeps walk."""

    def __init__(self, configurations: list[Params], tests: list[BenchTest],
                 done: Callable[[Params, BenchTest], bool], notify: Event):
        self.configurations, self.tests, self.done, self.notify = configurations, tests, done, notify
        self.skipped = 0

    def __iter__(self) -> Iterator[tuple[int, Params, list[BenchTest]]]:
        for index, params in enumerate(self.configurations):
            todo = [t for t in self.tests if not self.done(params, t)]
            self.skipped += len(self.tests) - len(todo)
            if todo:
                self.notify("cell", {"index": index, "total": len(self.configurations), "params": params})
                yield index, params, todo


def peak_bandwidth(gpu: bool) -> PeakBandwidth:
    """The peak the MBU is measured against: NVML's for a GPU run, a STREAM-style probe on the CPU."""
    if gpu:
        peak = sysinfo.gpu_peak_gbps()
        if peak:
            return PeakBandwidth(round(peak, 1), "NVML: max memory clock x bus width x 2")
    probe = bandwidth.cached_measure()
    return PeakBandwidth(max(probe.copy_gbps, probe.triad_gbps), probe.method, probe)


def _memory(alloc: Alloc) -> Memory:
    gb = alloc.gpu_used_before_bytes
    devices = tuple(DeviceMemory(d.name, d.description, d.total_bytes, d.free_bytes, alloc.free_before(d))
                    for d in alloc.devices)
    pool = next((unified_memory(d.name, d.total_bytes, alloc.allocations, sysinfo.total_ram_bytes())
                 for d in alloc.devices if d.unified), None)
    return Memory(alloc.rss_before_bytes, alloc.rss_after_bytes, gb, alloc.gpu_used_after_bytes,
                  None if gb is not None else sysinfo.gpu_note(), devices, pool)


def run_sweep(path: str, configurations: list[Params], tests: list[BenchTest], repetitions: int, *,
              save: Callable[[Measurement], None], done: Callable[[Params, BenchTest], bool] = lambda p, t: False,
              on_event: Event | None = None, rpc: list[str] | str | None = None) -> SweepOutcome:
    """Every configuration in a child of its own; `save` gets each Measurement at once; `done` says what to skip."""
    notify = on_event or (lambda kind, data: None)
    cells = PendingCells(configurations, tests, done, notify)
    for index, params, todo in cells:
        by_name = {t.name: t for t in todo}
        reported: set[str] = set()
        state: dict[str, Alloc | None] = {"alloc": None}

        def keep(test: BenchTest, samples_ns: tuple[int, ...] = (), reason: str | None = None) -> None:
            m = _measurement(params, test, repetitions, samples_ns, reason, state["alloc"])
            reported.add(test.name)
            save(m)
            notify("measured", {"measurement": m})

        def on_child(event) -> None:
            if isinstance(event, Alloc):
                state["alloc"] = event
                notify("alloc", {"params": params, **to_wire(event)})
            elif isinstance(event, Fill):
                notify("fill", {"params": params, **to_wire(event)})
            elif isinstance(event, Measured):
                keep(by_name[event.name], event.samples_ns)
            elif isinstance(event, TestFailed):
                keep(by_name[event.name], reason=event.reason)

        job = BenchJob(path, params, rpc, repetitions=repetitions, tests=tuple(todo))
        try:
            child = run_job(job, on_child)
        except KeyboardInterrupt:
            return SweepOutcome(cells.skipped, interrupted=True)
        failure = _failure(child, params, rpc)
        for test in todo:
            if test.name not in reported:
                keep(test, reason=failure)
        notify("cell_done", {"index": index, "total": len(configurations), "params": params})
        if child.stalled:  # a device that stopped answering: every later configuration would wait as long
            raise Stalled(f"{failure}; the tests measured before it are kept")
    return SweepOutcome(cells.skipped)


def _measurement(params: Params, test: BenchTest, repetitions: int, samples_ns: tuple[int, ...],
                 reason: str | None, alloc: Alloc | None) -> Measurement:
    """One test's result, with what its context allocated (None: the context was never created)."""
    if alloc is None:
        return Measurement(params=params, test=test, repetitions=repetitions, samples_ns=samples_ns, reason=reason)
    return Measurement(params=params, test=test, repetitions=repetitions, samples_ns=samples_ns, reason=reason,
                       allocations=alloc.allocations, memory=_memory(alloc), model_desc=alloc.model_desc,
                       model_size_bytes=alloc.model_size_bytes, n_params=alloc.n_params)


def _failure(child, params: Params, rpc) -> str:
    """Why the tests a child did not report failed: its own failure, and what can kill it by a signal, the advice
    first (a table shows a reason's start)."""
    failure = child.failure or "the child process ended before this test"
    return f"llama.cpp {failure}: {_died_why(params, rpc)}" if child.returncode < 0 and not child.stalled \
        and _died_why(params, rpc) else failure


def _died_why(params, rpc) -> str:
    """What can kill llama.cpp by a signal in a bench, in words, the remedy first: the CPU's repacked weights
    (CPU_REPACK / AMX fault on some CPUs), and a --rpc host that closed or answered garbage (its client aborts)."""
    hosts = [rpc] if isinstance(rpc, str) else list(rpc or ())
    causes = ["rerun with --repack 0 (-nr 1): the CPU's repacked weights (CPU_REPACK / AMX) fault on some CPUs"] \
        if params.repack else []
    if hosts:
        causes.append(f"check the --rpc host ({', '.join(hosts)}): one that closed the connection or answered "
                      "garbage aborts its client")
    return "; or ".join(causes)
