"""Run a sweep: one child process per cell, every measured test appended to the results at once."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .. import bandwidth, speed, stats, sysinfo, versions
from ..errors import LlamabenchError
from ..footprint import compute_footprint
from ..layout import ModelGeometry
from ..llama.alloc_log import MIB, Allocations
from ..llama.worker import run_child
from ..verification import printed_equal
from ..results.records import BenchRecord, ModelRef, append, read_records
from .plan import Cell, SweepSpec, Test, cells, record_key, tests


@dataclass
class SweepOutcome:
    records: list[BenchRecord] = field(default_factory=list)
    skipped: int = 0
    interrupted: bool = False

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.records)


def theory_block(geometry: ModelGeometry, cell: Cell) -> dict:
    try:
        fp = compute_footprint(geometry, cell.settings())
    except LlamabenchError as exc:
        return {"error": str(exc)}
    return {"n_ctx": fp.shape.n_ctx, "kv_bytes": fp.kv_bytes, "swa_kv_bytes": fp.swa_kv_bytes,
            "recurrent_state_bytes": fp.recurrent_state_bytes, "kv_bytes_per_token": fp.kv_bytes_per_token,
            "full_gqa_kv_bytes_per_token": fp.full_gqa_kv_bytes_per_token, "basis": "computed from GGUF metadata"}


def diff_block(theory: dict, alloc: Allocations | None) -> dict | None:
    if alloc is None or "kv_bytes" not in theory:
        return None
    kv_theory, rec_theory = theory["kv_bytes"] / MIB, theory["recurrent_state_bytes"] / MIB
    return {"kv_mib_llama_cpp": alloc.kv_mib, "kv_mib_theory": round(kv_theory, 2),
            "kv_diff_mib": round(alloc.kv_mib - kv_theory, 2), "kv_match": printed_equal(kv_theory, alloc.kv_mib),
            "recurrent_mib_llama_cpp": alloc.recurrent_mib, "recurrent_mib_theory": round(rec_theory, 2),
            "recurrent_diff_mib": round(alloc.recurrent_mib - rec_theory, 2),
            "recurrent_match": printed_equal(rec_theory, alloc.recurrent_mib)}


def _memory(alloc_event: dict) -> dict:
    gb, ga = alloc_event.get("gpu_used_before_bytes"), alloc_event.get("gpu_used_after_bytes")
    return {"rss_before_bytes": alloc_event["rss_before_bytes"], "rss_after_bytes": alloc_event["rss_after_bytes"],
            "rss_delta_bytes": alloc_event["rss_after_bytes"] - alloc_event["rss_before_bytes"],
            "gpu_used_before_bytes": gb, "gpu_used_after_bytes": ga,
            "gpu_delta_bytes": None if gb is None or ga is None else ga - gb,
            "gpu_note": None if gb is not None else sysinfo.gpu_note()}


@dataclass(frozen=True)
class WeightsBasis:
    """What the roofline of a bench record needs of the weights: all bytes, and those one decoded token reads."""

    all_bytes: int
    active_bytes: int
    basis: str


def roofline_block(geometry: ModelGeometry, weights: WeightsBasis | None, cell: Cell, test: Test,
                   avg_ts: float | None, peak_gbps: float | None) -> dict | None:
    """Bytes (and attention FLOPs) per token of this test, the bandwidth that achieves, and its share of the peak."""
    if weights is None:
        return None
    cost = speed.test_cost(geometry, cell.settings(), weights.all_bytes, weights.active_bytes, str(test.kind),
                           test.depth, test.n_tokens)
    achieved = cost.total_bytes * avg_ts / 1e9 if avg_ts else None
    gqa = speed.token_cost(geometry, cell.settings(), weights.active_bytes, test.depth + test.n_tokens // 2,
                           as_full_gqa=True) if test.kind == "tg" else None
    return {"bytes_per_token": cost.total_bytes, "weights_bytes": cost.weights_bytes, "kv_read_bytes": cost.kv_bytes,
            "recurrent_bytes": cost.recurrent_bytes, "attention_flops": cost.attention_flops,
            "full_gqa_bytes_per_token": gqa.total_bytes if gqa else None,
            "full_gqa_attention_flops": gqa.attention_flops if gqa else None,
            "achieved_gbps": round(achieved, 2) if achieved else None, "peak_gbps": peak_gbps,
            "mbu": round(achieved / peak_gbps, 4) if achieved and peak_gbps else None,
            "basis": f"{weights.basis}; KV read at the test's middle depth" if test.kind == "tg"
                     else f"{weights.basis}; every weight once per ubatch"}


def make_record(model: ModelRef, geometry: ModelGeometry, cell: Cell, test: Test, spec: SweepSpec,
                alloc_event: dict | None, *, reason: str | None = None, samples_ns: list[int] | None = None,
                machine: dict, versions_block: dict, weights: WeightsBasis | None = None) -> BenchRecord:
    theory = theory_block(geometry, cell)
    alloc = Allocations.from_dict(alloc_event["allocations"]) if alloc_event else None
    samples_ts = [stats.tokens_per_second(test.n_tokens, ns) for ns in samples_ns] if samples_ns else []
    if alloc_event:
        model = ModelRef(**{**asdict(model), "desc": alloc_event.get("model_desc"),
                            "size_bytes": alloc_event.get("model_size_bytes"), "n_params": alloc_event.get("n_params")})
    return BenchRecord(
        model, key=record_key(cell, test), status="ok" if samples_ns else "failed", reason=reason, test=test.name,
        params={**cell.to_dict(), "kind": str(test.kind), "n_tokens": test.n_tokens, "depth": test.depth,
                "n_prompt": test.n_tokens if test.kind == "pp" else 0,
                "n_gen": test.n_tokens if test.kind == "tg" else 0, "repetitions": spec.repetitions},
        samples_ns=samples_ns or [], samples_ts=samples_ts,
        avg_ts=stats.mean(samples_ts) if samples_ts else None,
        stddev_ts=stats.stddev(samples_ts) if samples_ts else None,
        allocations=alloc, theory=theory, diff=diff_block(theory, alloc),
        memory=_memory(alloc_event) if alloc_event else None, machine=machine, versions=versions_block,
        roofline=roofline_block(geometry, weights, cell, test, stats.mean(samples_ts) if samples_ts else None,
                                machine.get("memory_bandwidth", {}).get("peak_gbps")))


def recorded_keys(path: Path, label: str) -> set[str]:
    return {r.key for r in read_records(path).records if isinstance(r, BenchRecord) and r.model.label == label}


def machine_bandwidth(gpu: bool) -> dict:
    """The peak the MBU is measured against: NVML's for a GPU run, a STREAM-style probe on the CPU."""
    if gpu:
        peak = bandwidth.gpu_peak_gbps()
        if peak:
            return {"peak_gbps": round(peak, 1), "method": "NVML: max memory clock x bus width x 2"}
    probe = bandwidth.cached_measure()
    return {"peak_gbps": max(probe.copy_gbps, probe.triad_gbps), **probe.to_dict()}


def run_sweep(model: ModelRef, geometry: ModelGeometry, spec: SweepSpec, results_path: Path, *, resume: bool = False,
              on_event: Callable[[str, dict], None] | None = None, weights: WeightsBasis | None = None,
              measure_bandwidth: bool = True) -> SweepOutcome:
    outcome = SweepOutcome()
    done = recorded_keys(results_path, model.label) if resume else set()
    machine, versions_block = sysinfo.machine_block(), versions.versions_block()
    if measure_bandwidth:
        machine["memory_bandwidth"] = machine_bandwidth(gpu=any(c.n_gpu_layers for c in cells(spec)))
    plan_tests, plan_cells = tests(spec), cells(spec)
    notify = on_event or (lambda kind, data: None)

    def save(record: BenchRecord) -> None:
        append(results_path, record)
        outcome.records.append(record)
        notify("record", record)

    for index, cell in enumerate(plan_cells):
        todo = [t for t in plan_tests if record_key(cell, t) not in done]
        outcome.skipped += len(plan_tests) - len(todo)
        if not todo:
            continue
        notify("cell", {"index": index, "total": len(plan_cells), "cell": cell})
        job = {"job": "bench", "path": model.path, "settings": asdict(cell.settings()),
               "n_gpu_layers": cell.n_gpu_layers, "n_threads": cell.n_threads, "extra_bufts": not cell.no_repack,
               "threads": {"n_threads": cell.n_threads, "poll": cell.poll, "prio": spec.prio, "cpu_mask": cell.cpu_mask,
                           "cpu_strict": cell.cpu_strict},
               "repetitions": spec.repetitions,
               "tests": [{"name": t.name, "kind": str(t.kind), "n_tokens": t.n_tokens, "depth": t.depth} for t in todo]}
        by_name = {t.name: t for t in todo}
        reported: set[str] = set()
        state: dict = {"alloc": None}

        def on_child(event: dict) -> None:
            kind = event.get("event")
            if kind == "alloc":
                state["alloc"] = event
                notify("alloc", {"cell": cell, **event})
            elif kind == "fill":
                notify("fill", {"cell": cell, **event})
            elif kind in ("test", "test_failed"):
                test = by_name[event["name"]]
                reported.add(test.name)
                save(make_record(model, geometry, cell, test, spec, state["alloc"], reason=event.get("reason"),
                                 samples_ns=event.get("samples_ns"), machine=machine, versions_block=versions_block,
                                 weights=weights))

        try:
            child = run_child(job, on_child)
        except KeyboardInterrupt:
            outcome.interrupted = True
            return outcome
        failure = child.failure or "the child process ended before this test"
        if child.returncode < 0 and not cell.no_repack:
            failure += ("; llama.cpp died with the CPU's repacked weights on (CPU_REPACK / AMX): "
                        "rerun with --repack 0 to rule them out")
        for test in todo:
            if test.name not in reported:
                save(make_record(model, geometry, cell, test, spec, state["alloc"], reason=failure,
                                 machine=machine, versions_block=versions_block))
        notify("cell_done", {"index": index, "total": len(plan_cells), "cell": cell})
    return outcome
