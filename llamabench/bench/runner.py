"""Run a sweep: one child process per cell, every measured test appended to the results at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from .. import stats, sysinfo, versions
from ..alloc_log import MIB
from ..errors import LlamabenchError
from ..footprint import CacheSettings, compute_footprint
from ..layout import ModelGeometry
from .plan import Cell, SweepSpec, Test, cells, record_key, tests
from .results import SCHEMA, append_record, recorded_keys

STDERR_TAIL = 1500


@dataclass
class ModelInfo:
    label: str  # catalog id or file stem: what --resume matches on
    path: str
    architecture: str
    is_twin: bool
    geometry: ModelGeometry


@dataclass
class SweepOutcome:
    records: list[dict] = field(default_factory=list)
    skipped: int = 0
    interrupted: bool = False


def theory_block(geometry: ModelGeometry, cell: Cell) -> dict:
    settings = CacheSettings(n_ctx=cell.n_ctx, type_k=cell.type_k, type_v=cell.type_v, flash_attn=cell.flash_attn,
                             n_batch=cell.n_batch, n_ubatch=cell.n_ubatch)
    try:
        fp = compute_footprint(geometry, settings)
    except LlamabenchError as exc:
        return {"error": str(exc)}
    return {"n_ctx": fp.shape.n_ctx, "kv_bytes": fp.kv_bytes, "swa_kv_bytes": fp.swa_kv_bytes,
            "recurrent_state_bytes": fp.recurrent_state_bytes, "kv_bytes_per_token": fp.kv_bytes_per_token,
            "full_gqa_kv_bytes_per_token": fp.full_gqa_kv_bytes_per_token,
            "basis": "computed from GGUF metadata"}


def diff_block(theory: dict, alloc: dict | None) -> dict | None:
    if not alloc or "kv_bytes" not in theory:
        return None
    kv_mib = round(sum(c["size_mib"] for c in alloc["kv_caches"]), 2)
    rec_mib = round(sum(r["size_mib"] for r in alloc["recurrent"]), 2)
    kv_theory, rec_theory = theory["kv_bytes"] / MIB, theory["recurrent_state_bytes"] / MIB
    return {"kv_mib_llama_cpp": kv_mib, "kv_mib_theory": round(kv_theory, 2),
            "kv_diff_mib": round(kv_mib - kv_theory, 2), "kv_match": abs(kv_mib - kv_theory) <= 0.005 + 1e-9,
            "recurrent_mib_llama_cpp": rec_mib, "recurrent_mib_theory": round(rec_theory, 2),
            "recurrent_diff_mib": round(rec_mib - rec_theory, 2),
            "recurrent_match": abs(rec_mib - rec_theory) <= 0.005 + 1e-9}


def _record(model: ModelInfo, cell: Cell, test: Test, spec: SweepSpec, alloc_event: dict | None,
            *, status: str, reason: str | None = None, samples_ns: list[int] | None = None,
            machine: dict, versions_block: dict) -> dict:
    theory = theory_block(model.geometry, cell)
    alloc = alloc_event["allocations"] if alloc_event else None
    samples_ts = [stats.tokens_per_second(test.n_tokens, ns) for ns in samples_ns] if samples_ns else []
    memory = None
    if alloc_event:
        gb, ga = alloc_event.get("gpu_used_before_bytes"), alloc_event.get("gpu_used_after_bytes")
        memory = {"rss_before_bytes": alloc_event["rss_before_bytes"], "rss_after_bytes": alloc_event["rss_after_bytes"],
                  "rss_delta_bytes": alloc_event["rss_after_bytes"] - alloc_event["rss_before_bytes"],
                  "gpu_used_before_bytes": gb, "gpu_used_after_bytes": ga,
                  "gpu_delta_bytes": None if gb is None or ga is None else ga - gb,
                  "gpu_note": None if gb is not None else "not available (no NVML / no NVIDIA GPU)"}
    return {
        "schema": SCHEMA,
        "key": record_key(cell, test),
        "status": status,
        "reason": reason,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": {"label": model.label, "path": model.path, "architecture": model.architecture,
                  "is_twin": model.is_twin,
                  "desc": alloc_event.get("model_desc") if alloc_event else None,
                  "size_bytes": alloc_event.get("model_size_bytes") if alloc_event else None,
                  "n_params": alloc_event.get("n_params") if alloc_event else None},
        "test": test.name,
        "params": {**cell.to_dict(), "kind": test.kind, "n_tokens": test.n_tokens, "depth": test.depth,
                   "n_prompt": test.n_tokens if test.kind == "pp" else 0,
                   "n_gen": test.n_tokens if test.kind == "tg" else 0, "repetitions": spec.repetitions},
        "samples_ns": samples_ns or [],
        "samples_ts": samples_ts,
        "avg_ts": stats.mean(samples_ts) if samples_ts else None,
        "stddev_ts": stats.stddev(samples_ts) if samples_ts else None,
        "llama_cpp": alloc,
        "theory": theory,
        "diff": diff_block(theory, alloc),
        "memory": memory,
        "machine": machine,
        "versions": versions_block,
    }


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def run_sweep(
    model: ModelInfo,
    spec: SweepSpec,
    results_path: Path,
    *,
    resume: bool = False,
    on_event: Callable[[str, dict], None] | None = None,
) -> SweepOutcome:
    outcome = SweepOutcome()
    done = recorded_keys(results_path, model.label) if resume else set()
    machine, versions_block = sysinfo.machine_block(), versions.versions_block()
    plan_tests = tests(spec)
    plan_cells = cells(spec)
    notify = on_event or (lambda kind, data: None)

    def save(record: dict) -> None:
        append_record(results_path, record)
        outcome.records.append(record)
        notify("record", record)

    for index, cell in enumerate(plan_cells):
        todo = [t for t in plan_tests if record_key(cell, t) not in done]
        outcome.skipped += len(plan_tests) - len(todo)
        if not todo:
            continue
        notify("cell", {"index": index, "total": len(plan_cells), "cell": cell})
        job = {"path": model.path, "cell": cell.to_dict(), "repetitions": spec.repetitions,
               "tests": [{"name": t.name, "kind": t.kind, "n_tokens": t.n_tokens, "depth": t.depth} for t in todo]}
        by_name = {t.name: t for t in todo}
        reported: set[str] = set()
        alloc_event = None
        failure = None
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen([sys.executable, "-m", "llamabench.bench.child"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        try:
            proc.stdin.write(json.dumps(job))
            proc.stdin.close()
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                kind = event.get("event")
                if kind == "alloc":
                    alloc_event = event
                    notify("alloc", {"cell": cell, **event})
                elif kind == "fill":
                    notify("fill", {"cell": cell, **event})
                elif kind == "test":
                    test = by_name[event["name"]]
                    reported.add(test.name)
                    save(_record(model, cell, test, spec, alloc_event, status="ok", samples_ns=event["samples_ns"],
                                 machine=machine, versions_block=versions_block))
                elif kind == "test_failed":
                    test = by_name[event["name"]]
                    reported.add(test.name)
                    save(_record(model, cell, test, spec, alloc_event, status="failed", reason=event["reason"],
                                 machine=machine, versions_block=versions_block))
                elif kind == "failed":
                    failure = event["reason"]
            proc.wait()
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            outcome.interrupted = True
            return outcome
        stderr = proc.stderr.read() if proc.stderr else ""
        if failure is None and proc.returncode != 0:
            tail = " ".join(stderr.strip().splitlines()[-3:])[-STDERR_TAIL:]
            failure = f"child process {_signal_name(proc.returncode)}" + (f": {tail}" if tail else "")
        for test in todo:
            if test.name not in reported:
                save(_record(model, cell, test, spec, alloc_event, status="failed",
                             reason=failure or "the child process ended before this test",
                             machine=machine, versions_block=versions_block))
        notify("cell_done", {"index": index, "total": len(plan_cells), "cell": cell})
    return outcome
