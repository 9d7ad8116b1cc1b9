"""The one child entry point: every real llama.cpp context is created in a process of its own.

Run as `python -m llamabench.llama.child` with a job on stdin (JSON); `worker` is the parent side and
`messages` declares every job and event. Jobs: "bench" (create a context, time the tests), "create"
(create a context and report what it allocated, for `fit --verify`), "dry_runs" (no_alloc contexts, one
per request), "devices" and "tensors" (every tensor llama.cpp creates for a GGUF's metadata). Every event
is one JSON object on stdout, flushed at once, so the parent keeps what was measured even if this process
dies: a crash or an out-of-memory in llama.cpp ends one child, never the command.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Callable

from ..core.errors import LlamabenchError
from ..memory.divergence import n_chunks
from ..settings.bench_tests import BenchTest
from ..settings.params import Params
from ..world import sysinfo
from . import breakdown, engine, ggml_devices, user_model
from .engine import DryRunModel, Session
from .messages import (
    Alloc,
    Beat,
    BenchJob,
    CreateJob,
    Devices,
    DevicesJob,
    Done,
    DryFailed,
    DryRunSizes,
    DryRunsJob,
    Event,
    Failed,
    Fill,
    Loaded,
    LoadRequest,
    Measured,
    QualityChunk,
    QualityJob,
    QualityStep,
    QualityText,
    Recipe,
    RecipeJob,
    Tensors,
    TensorsJob,
    TestFailed,
    TextTokens,
    TokensJob,
    read_job,
    read_request,
    to_wire,
)
from .process import die_with_parent
from .scoring import Scoring, text_tokens


def emit(event: Event) -> None:
    sys.stdout.write(json.dumps(to_wire(event)) + "\n")
    sys.stdout.flush()


BEAT_EVERY_S = 1.0  # a load's progress beats, at most this often


def _load_beats():
    """A progress callback for llama.cpp's model load that emits a `Beat` at most every BEAT_EVERY_S."""
    last = [0.0]

    def beat(share: float) -> None:
        now = time.monotonic()
        if now - last[0] >= BEAT_EVERY_S:
            last[0] = now
            emit(Beat(f"load {share:.0%}"))
    return beat


def _create(job: CreateJob):
    """Create the job's context and emit its `Alloc` event; None (after a `Failed` event) on failure."""
    rss_before = sysinfo.process_rss_bytes()
    gpu_before = sysinfo.gpu_used_bytes()
    ggml_devices.emulate_backend(job.backend, job.backend_devices)
    devices_before = tuple(ggml_devices.device_memory())
    start = time.perf_counter()
    try:
        draft = (job.draft_path, job.draft_params, job.draft_rpc) if getattr(job, "draft_path", None) else None
        session = Session(job.path, job.params, rpc=job.rpc, threadpool=isinstance(job, BenchJob), draft=draft,
                          on_progress=_load_beats())
    except LlamabenchError as exc:
        emit(Failed(str(exc)))
        return None
    emit(Alloc(allocations=session.allocations, model_size_bytes=session.model_size_bytes, n_params=session.n_params,
               model_desc=session.model_desc, n_ctx=session.n_ctx, rss_before_bytes=rss_before,
               rss_after_bytes=sysinfo.process_rss_bytes(), gpu_used_before_bytes=gpu_before,
               gpu_used_after_bytes=sysinfo.gpu_used_bytes(), create_seconds=time.perf_counter() - start,
               devices_before=devices_before, devices=tuple(ggml_devices.device_memory())))
    return session


def create_and_bench(job: CreateJob) -> None:
    """A `CreateJob` ends once its context is created; a `BenchJob` times its tests in it."""
    session = _create(job)
    if session is None:
        return
    with session:
        if isinstance(job, BenchJob):
            measure_tests(session, list(job.tests), job.repetitions, emit)


def measure_tests(session, tests: list[BenchTest], repetitions: int, emit: Callable[[Event], None], *,
                  refill: bool = False) -> None:
    """Fill the context once and measure the depths in increasing order; `emit` gets each `Fill`, `Measured` and
    `TestFailed` event.

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
                emit(Fill(depth=_depth, done=done, total=_need, seconds=time.perf_counter() - _start))

            try:
                session.decode(need, on_chunk=on_chunk)
            except LlamabenchError as exc:
                for t in tests:
                    if t.depth >= depth:
                        emit(TestFailed(t.name, f"filling to depth {depth}: {exc}"))
                return
        snap = session.snapshot()
        for t in (t for t in tests if t.depth == depth):
            if depth + t.n_tokens > session.n_ctx:
                emit(TestFailed(t.name, f"depth {depth} + {t.n_tokens} tokens exceeds n_ctx {session.n_ctx}"))
                continue
            run = session.decode if t.kind == "pp" else session.generate
            warmup = min(session.n_batch, t.n_tokens) if t.kind == "pp" else 1
            try:
                session.restore(snap)
                run(warmup)
                emit(Beat(f"{t.name} warm-up"))
                samples = []
                for i in range(repetitions):
                    session.restore(snap)
                    t0 = time.perf_counter_ns()
                    run(t.n_tokens)
                    samples.append(time.perf_counter_ns() - t0)
                    emit(Beat(f"{t.name} repetition {i + 1}"))
            except LlamabenchError as exc:
                emit(TestFailed(t.name, str(exc)))
                continue
            emit(Measured(t.name, tuple(samples)))
        session.restore(snap)


def score_quality(job: QualityJob) -> None:
    """The text scored by the base and every choice side by side (llama.scoring), a `QualityChunk` per chunk."""
    with Scoring(job.path, job.base_path, job.params, list(job.choices), rpc=job.rpc,
                 on_progress=_load_beats()) as scoring:
        tokens = scoring.tokenize(job.text)
        n_ctx = job.params.n_ctx
        total = n_chunks(len(tokens), n_ctx, job.chunks)
        emit(QualityText(len(tokens), total, scoring.n_vocab, scoring.n_ctx_train, scoring.rows))
        if total == 0:
            raise LlamabenchError(f"the text is {len(tokens):,} tokens long; -c {n_ctx} needs at least {n_ctx:,} "
                                  "(one chunk): a longer text (-f FILE) or a smaller -c")
        last = [time.monotonic()]

        def step(chunk: int, done: int, of: int, seconds: float) -> None:
            if time.monotonic() - last[0] >= BEAT_EVERY_S:  # progress, and the beat a remote device's deadline counts
                last[0] = time.monotonic()
                emit(QualityStep(chunk, done, of, seconds))

        scoring.score(tokens, job.chunks,
                      on_chunk=lambda done, of, seconds, stats: emit(QualityChunk(done, of, seconds, stats)),
                      on_step=step)


MODELS_KEPT = 24  # no_alloc models kept loaded, one per placement: tensor metadata only, a reload costs ~1 s


def serve_dry_runs(job: DryRunsJob) -> None:
    """Load once with no_alloc, then answer one dry-run context per `ContextRequest` on stdin until EOF.

    A `LoadRequest` switches to another placement (-ngl, --n-cpu-moe, -ts, devices); the models of the last
    MODELS_KEPT placements stay loaded, so a search that comes back to one does not load it again.
    """
    models: dict[tuple, DryRunModel] = {}
    ggml_devices.emulate_backend(job.backend, job.backend_devices)

    def load(placement: Params, rpc: tuple[str, ...] | None):
        key = (placement, rpc)
        if key in models:
            models[key] = models.pop(key)  # most recent last
        else:
            try:
                target = (job.target_path, placement) if job.target_path else None
                models[key] = DryRunModel(job.path, placement, rpc=rpc, target=target)
            except LlamabenchError as exc:
                emit(Failed(str(exc)))
                return None
            if len(models) > MODELS_KEPT:
                models.pop(next(iter(models))).close()
        model = models[key]
        emit(Loaded(model.size, model.n_params, model.host_tensors, breakdown.unavailable()))
        return model

    model = load(job.params, job.rpc)
    if model is None:
        return
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = read_request(json.loads(line))
            if isinstance(request, LoadRequest):
                model = load(request.params, request.rpc)
                if model is None:
                    return
                continue
            try:
                dry = model.context(request.params)
            except LlamabenchError as exc:
                emit(DryFailed(str(exc)))
                continue
            emit(DryRunSizes(dry.allocations, dry.n_ctx, dry.n_ctx_seq, dry.n_seq_max))
    finally:
        for kept in models.values():
            kept.close()


def main() -> int:
    die_with_parent()
    line = json.loads(sys.stdin.readline())
    try:
        job = read_job(line)
        if isinstance(job, DryRunsJob):
            serve_dry_runs(job)
            return 0
        if isinstance(job, DevicesJob):  # asked in a child: on CUDA the query makes a context on every GPU
            emit(Devices(tuple(ggml_devices.device_memory())))
            return 0
        if isinstance(job, TensorsJob):  # a bad value may make llama.cpp abort: it ends this process only
            emit(Tensors(user_model.model_tensors(job.metadata)))
        elif isinstance(job, RecipeJob):
            emit(Recipe(engine.quantize_recipe(job.path, job.ftype)))
        elif isinstance(job, QualityJob):
            score_quality(job)
        elif isinstance(job, TokensJob):
            emit(TextTokens(*text_tokens(job.path, job.text, job.base_path)))
        else:
            create_and_bench(job)
    except LlamabenchError as exc:  # llama.cpp's refusal, in its words
        emit(Failed(str(exc)))
        return 1
    except Exception as exc:  # report, then let the parent record the failure
        emit(Failed(f"{type(exc).__name__}: {exc}"))
        return 1
    emit(Done())
    return 0


if __name__ == "__main__":
    sys.exit(main())
