"""The one child entry point: every real llama.cpp context is created in a process of its own.

Run as `python -m llamabench.llama.child` with a job on stdin (JSON); `worker.run_child` is the
parent side. Jobs: "bench" (create a context, time the tests) and "create" (create a context and
report what it allocated, for `fit --verify`). Every message is one JSON object on stdout, flushed
at once, so the parent keeps what was measured even if this process dies: a crash or an
out-of-memory in llama.cpp ends one child, never the command.
"""

from __future__ import annotations

import json
import sys
import time

from .. import serial, sysinfo
from ..errors import LlamabenchError
from ..params import BenchTest, Params
from . import breakdown, engine
from .engine import DryRunModel, Session
from .process import die_with_parent


def emit(event: str, **data) -> None:
    sys.stdout.write(json.dumps({"event": event, **data}) + "\n")
    sys.stdout.flush()


def _create(job: dict):
    """Create the job's context and emit its "alloc" event; None (after a "failed" event) on failure."""
    params = Params.from_dict(job["params"])
    rpc = job.get("rpc")
    rss_before = sysinfo.process_rss_bytes()
    gpu_before = sysinfo.gpu_used_bytes()
    devices_before = {(d["name"], d["description"]): d["free_bytes"] for d in engine.device_memory()}
    start = time.perf_counter()
    try:
        session = Session(job["path"], params, rpc=rpc, threadpool=job["job"] == "bench")
    except LlamabenchError as exc:
        emit("failed", reason=str(exc))
        return None
    emit("alloc", allocations=session.allocations.to_dict(), model_size_bytes=session.model_size_bytes,
         n_params=session.n_params, model_desc=session.model_desc, n_ctx=session.n_ctx,
         rss_before_bytes=rss_before, rss_after_bytes=sysinfo.process_rss_bytes(),
         gpu_used_before_bytes=gpu_before, gpu_used_after_bytes=sysinfo.gpu_used_bytes(),
         create_seconds=time.perf_counter() - start,
         devices=[{**d, "free_before_bytes": devices_before.get((d["name"], d["description"]))}
                  for d in engine.device_memory()])
    return session


def run_job(job: dict) -> None:
    session = _create(job)
    if session is None:
        return
    with session:
        if job["job"] == "bench":
            tests = [serial.from_dict(BenchTest, t) for t in job["tests"]]
            measure_tests(session, tests, job["repetitions"], emit)


def measure_tests(session, tests: list[BenchTest], repetitions: int, emit, *, refill: bool = False) -> None:
    """Fill the context once and measure the depths in increasing order.

    Before each test and each repetition the sequence is restored to the depth's snapshot, so every
    repetition starts at the same depth. `refill=True` instead clears the context and fills from
    zero for every depth, as llama-bench does (kept for benchmarks/depth_sweep.py).
    """
    depths = sorted({t.depth for t in tests})
    snap = session.snapshot()
    for depth in depths:
        if refill:
            session.clear()
        else:
            session.restore(snap)
        need = depth - session.position
        if need > 0:
            fill_start = time.perf_counter()
            done = 0

            def on_chunk(n, _need=need, _start=fill_start, _depth=depth):
                nonlocal done
                done += n
                emit("fill", depth=_depth, done=done, total=_need, seconds=time.perf_counter() - _start)

            try:
                session.decode(need, on_chunk=on_chunk)
            except LlamabenchError as exc:
                for t in tests:
                    if t.depth >= depth:
                        emit("test_failed", name=t.name, reason=f"filling to depth {depth}: {exc}")
                return
        snap = session.snapshot()
        for t in (t for t in tests if t.depth == depth):
            if depth + t.n_tokens > session.n_ctx:
                emit("test_failed", name=t.name,
                     reason=f"depth {depth} + {t.n_tokens} tokens exceeds n_ctx {session.n_ctx}")
                continue
            run = session.decode if t.kind == "pp" else session.generate
            warmup = min(session.n_batch, t.n_tokens) if t.kind == "pp" else 1
            try:
                session.restore(snap)
                run(warmup)
                samples = []
                for _ in range(repetitions):
                    session.restore(snap)
                    t0 = time.perf_counter_ns()
                    run(t.n_tokens)
                    samples.append(time.perf_counter_ns() - t0)
            except LlamabenchError as exc:
                emit("test_failed", name=t.name, reason=str(exc))
                continue
            emit("test", name=t.name, samples_ns=samples)
        session.restore(snap)


MODELS_KEPT = 24  # no_alloc models kept loaded, one per placement: tensor metadata only, a reload costs ~1 s


def serve_dry_runs(job: dict) -> None:
    """Load once with no_alloc, then answer one dry-run context per settings line on stdin until EOF.

    A line {"load": PARAMS, "rpc": [...]} switches to another placement (-ngl, --n-cpu-moe, -ts, devices); the models of the last
    MODELS_KEPT placements stay loaded, so a search that comes back to one does not load it again.
    """
    models: dict[str, DryRunModel] = {}

    def load(placement: dict, rpc):
        key = json.dumps([placement, rpc], sort_keys=True)
        if key in models:
            models[key] = models.pop(key)  # most recent last
        else:
            try:
                models[key] = DryRunModel(job["path"], Params.from_dict(placement), rpc=rpc)
            except LlamabenchError as exc:
                emit("failed", reason=str(exc))
                return None
            if len(models) > MODELS_KEPT:
                models.pop(next(iter(models))).close()
        model = models[key]
        emit("loaded", model_size_bytes=model.size, n_params=model.n_params,
             host_tensors=None if model.host_tensors is None else list(model.host_tensors),
             breakdown_unavailable=breakdown.unavailable())
        return model

    model = load(job["params"], job.get("rpc"))
    if model is None:
        return
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            if "load" in request:
                model = load(request["load"], request.get("rpc", job.get("rpc")))
                if model is None:
                    return
                continue
            try:
                dry = model.context(Params.from_dict(request))
            except LlamabenchError as exc:
                emit("dry_failed", reason=str(exc))
                continue
            emit("dry", allocations=dry.allocations.to_dict(), n_ctx=dry.n_ctx, n_ctx_seq=dry.n_ctx_seq,
                 n_seq_max=dry.n_seq_max)
    finally:
        for kept in models.values():
            kept.close()


def main() -> int:
    die_with_parent()
    job = json.loads(sys.stdin.readline())
    try:
        if job["job"] == "dry_runs":
            serve_dry_runs(job)
            return 0
        if job["job"] == "devices":  # asked in a child: on CUDA the query makes a context on every GPU
            emit("devices", devices=engine.device_memory())
            return 0
        run_job(job)
    except Exception as exc:  # report, then let the parent record the failure
        emit("failed", reason=f"{type(exc).__name__}: {exc}")
        return 1
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
