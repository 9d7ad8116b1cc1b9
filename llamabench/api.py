"""The library: one function per job, each taking MODEL and keyword arguments named as llama.cpp names them.

    import llamabench as lb
    lb.inspect("model.gguf", n_ctx=32768).kv_bytes_per_token
    lb.verify("model.gguf", n_ctx=4096).ok
    lb.fit("model.gguf", n_ctx=8192, vram=["4GiB"], n_gpu_layers=[99]).rows[0].parts.weights

MODEL is a GGUF path, an https:// or hf:// URL, or a catalog id (llama.cpp then runs its geometry
twin). Values are parsed by the one parameter schema (`params.SCHEMA`), so 32768, "32k" and
["4096", "8k"] all work; a list where a sweep takes one. Each function returns a frozen dataclass
with `to_dict()` / `from_dict()`; the records are the ones the results files hold (`results=PATH`
appends them). Only calls that run llama.cpp load it (inspect and report never do).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .core import serial
from .core.errors import LlamabenchError, UsageError
from .core.safe_text import escaped
from .core.units import GIB
from .jobs.arguments import flag, model_argument
from .jobs.bench.job import SweepBasis, run_bench
from .jobs.bench.measure import Measurement, theory
from .jobs.bench.measure import roofline as roofline_block
from .jobs.bench.plan import BENCH_LISTS as BENCH_LISTS
from .jobs.bench.plan import BENCH_PARAMS as BENCH_PARAMS
from .jobs.bench.plan import BENCH_TESTS as BENCH_TESTS
from .jobs.bench.plan import BenchPlan, plan_bench
from .jobs.bench.serve import ServerOptions
from .jobs.fit.advice import describe_placement, run_line
from .jobs.fit.job import run_fit
from .jobs.fit.options import FIT_DEFAULTS as FIT_DEFAULTS
from .jobs.fit.options import FIT_LISTS as FIT_LISTS
from .jobs.fit.options import FIT_PARAMS as FIT_PARAMS
from .jobs.fit.options import cache_pairs as cache_pairs
from .jobs.fit.options import fit_request
from .jobs.fit.options import remote_model as remote_model
from .jobs.fit.options import runtime_config as runtime_config
from .jobs.fit.quants import QuantLine, list_quants, read_headers, wants_sweep
from .jobs.inspect.job import INSPECT_PARAMS as INSPECT_PARAMS
from .jobs.inspect.job import inspect_model
from .jobs.quality.job import ContextOutcome, plan_quality, run_quality
from .jobs.quality.lookup import KvQuality, fit_quality
from .jobs.quality.result import F16_BASE, QualityRow
from .jobs.roofline.job import predict
from .jobs.verify.job import exactness_matrix, verify_model
from .llama.worker import device_memory
from .memory import speculative
from .memory.verification import MatrixResult
from .model.architectures import no_rule_line
from .records import jsonl
from .records.records import (
    BenchRecord,
    FitRecord,
    InspectRecord,
    QualityRecord,
    Record,
    RecordRefused,
    RooflineRecord,
    VerifyRecord,
    append,
    read_records,
)
from .reporting.build import report_folder, write_report
from .reporting.kv_record import KvEfficiencyRecord
from .reporting.load import load_results
from .settings.bench_tests import BenchTest
from .settings.budget import Budget, Card
from .settings.params import DEFAULT_N_CTX, SCHEMA, Params
from .settings.sweep import parse_value
from .settings.values import Runtime
from .world import catalog, paths

PathLike = str | os.PathLike


def _save(results: PathLike | None, record: Record) -> Record:
    """The record, appended to `results` where given. One its own reader would refuse is not written, and the
    command goes on: a warning says so (the result is still returned and printed)."""
    if not results:
        return record.stamped()
    try:
        return append(Path(results), record)
    except RecordRefused as exc:
        print(escaped(f"llamabench: warning: {exc}"), file=sys.stderr)
        return record.stamped()


def _save_measurement(results: Path, record: BenchRecord) -> BenchRecord:
    """A bench record appended; one that would not read back is kept as a failed test that says why (no numbers
    the file could not hold), so the sweep goes on and --resume does not time it again."""
    try:
        return append(results, record)
    except RecordRefused as exc:
        failed = replace(record, samples_ns=(), reason=f"measured, but not recordable: {exc}"[:2000], server=None,
                         allocations=None, memory=None)
        return _save(results, failed)


# inspect ---------------------------------------------------------------------------------------
def inspect(model: str, *, results: PathLike | None = None, runtime=None, model_draft=None, **params) -> InspectRecord:
    """The layer layout and the theoretical KV / recurrent footprint, computed from the GGUF's metadata, in the
    context `runtime` creates: "llama-server" (the default, as `fit`: 4 unified slots unless n_seq / kv_unified
    say otherwise) or "llama-cpp-python" (Llama(): one sequence); `model_draft` (llama-server's -md) sizes the
    draft model's own context beside it."""
    found = inspect_model(model_argument(model), params, runtime, model_draft)
    record = InspectRecord(model=found.source.model_block(found.inspection.geometry.architecture),
                           inspection=found.inspection, kv_curve=found.kv_curve)
    return _save(results, record)


# verify ----------------------------------------------------------------------------------------
def verify(model: str, *, results: PathLike | None = None, runtime=None, model_draft=None, **params) -> VerifyRecord:
    """Theory against llama.cpp's own `llama_kv_cache: size` / `llama_memory_recurrent: size` lines (a dry run), in
    the context `runtime` creates (llama-server by default, as `inspect` and `fit`); `model_draft` (-md): the draft
    model's own context is dry-run and checked too."""
    found = verify_model(model_argument(model), params, runtime, model_draft)
    record = VerifyRecord(model=found.source.model_block(found.architecture, loaded=found.gguf), params=found.params,
                          footprint=found.footprint, allocations=found.allocations, checks=found.checks,
                          gguf=found.gguf, context_warning=found.context_warning,
                          no_rule=found.no_rule)
    return _save(results, record)


def verify_matrix(model: str) -> MatrixResult:
    """n_ctx 4096 / 131072 / 5000 x f16, q8_0, q4_0 and fa off x 1 and 4 sequences (unified or not) x swa_full."""
    return exactness_matrix(model_argument(model))


# fit -------------------------------------------------------------------------------------------
def fit(model: str, *, vram=None, ram=None, cpu_only: bool = False, reserve=None, verify: bool = False,
        emulate: bool = False,
        mmproj: str | None = None, no_mmproj_offload: bool = False, quant: str | None = None, remote: bool = False,
        results: PathLike | None = None, runtime=None, n_seq=None, kv_unified=None, cache_ram=None,
        ctx_checkpoints=None, rpc=None, model_draft=None, n_gpu_layers_draft=None, device_draft=None,
        backend=None, progress=None, _source=None, **params) -> FitRecord:
    """Does n_ctx fit on the card(s) beside the weights, with which KV type and placement, in the context the
    runtime creates (`runtime="llama-server"`, the default, or "llama-cpp-python"); `ram=` checks the host
    part; `verify=True` creates the answer for real (on the GPU, or an emulated card) and compares device by
    device; `emulate=True` sizes on an emulated card even on a GPU build (a card you do not have: every tensor
    type taken, no GPU's free memory as the budget). `vram="24GiB+12GiB"` is one machine with two cards,
    `rpc="HOST:PORT,..."` adds remote hosts (ggml-rpc-server) in front of them; `tensor_split=` fixes the -ts
    instead of searching it. `spec_type="draft-mtp"` (sized beside none by default where the model has an MTP
    layer) or `model_draft="draft.gguf"` (draft-simple; an EAGLE3 head with `spec_type="draft-eagle3"`) size
    llama-server's speculative decoding too, the draft on the target's cards or `device_draft="CUDA1"` ("none");
    `progress` (a callable taking a line) is told of each llama.cpp dry run the searches make. A card sized without
    it (an emulated card) answers as `backend` does ("cuda", "vulkan", "metal", "rocm"; "cpu": as it is): default
    what a named card runs, else CUDA; `op_offload=False` sizes llama-server's --no-op-offload."""
    request = fit_request(model_argument(model), params, local_budgets=default_budgets, vram=vram, ram=ram,
                          cpu_only=flag("cpu_only", cpu_only), reserve=reserve, verify=flag("verify", verify),
                          emulate=flag("emulate", emulate), mmproj=mmproj,
                          no_mmproj_offload=flag("no_mmproj_offload", no_mmproj_offload), quant=quant,
                          remote=flag("remote", remote), runtime=runtime,
                          n_seq=n_seq, kv_unified=kv_unified, cache_ram=cache_ram, ctx_checkpoints=ctx_checkpoints,
                          rpc=rpc, model_draft=model_draft, n_gpu_layers_draft=n_gpu_layers_draft,
                          device_draft=device_draft, backend=backend, progress=progress)
    if _source is None and quant is not None and wants_sweep(model_argument(model), quant):
        raise UsageError(f"--quant {quant} on a repository: lb.fit_quants({model!r}, quant={quant!r}) fits each "
                         "quant (the command: fit -hf OWNER/REPO --quant ...)")
    answer = run_fit(request, _source)
    record = FitRecord(model=answer.source.model_block(answer.result.architecture), fit=answer.result,
                       verify=answer.verification, quality=_fit_quality(answer, model, results))
    return _save(results, record)


@dataclass(frozen=True)
class QuantFit:
    """One quant of a repository: its file, size and bits per weight, and its whole fit answer (None: its header
    could not be read, `error` says why)."""

    quant: str
    file: str
    model: str  # hf://OWNER/REPO/FILE
    size_bytes: int
    n_params: int
    record: FitRecord | None = None
    error: str | None = None
    quality: QualityRow | None = None  # the weights' KLD against a base, where the results file measured it

    @property
    def bits_per_weight(self) -> float | None:
        return self.size_bytes * 8 / self.n_params if self.n_params and self.size_bytes else None

    def lines(self) -> tuple[QuantLine, ...]:
        """The answer at each budget and context (without speculative decoding)."""
        if self.record is None:
            return ()
        result = self.record.fit
        out = []
        for budget in result.budgets:
            for n_ctx in result.contexts:
                rows = result.rows_for(budget.label, n_ctx)
                if not rows:
                    continue
                best = result.recommended(budget.label, n_ctx)
                row = best or min(rows, key=lambda r: r.short_by)
                out.append(QuantLine(budget.label, n_ctx, f"{row.settings.type_k}/{row.settings.type_v}",
                                     describe_placement(row.placement, result.n_layer_all), best is not None,
                                     0 if best else row.short_by, max(r.max_n_ctx for r in rows),
                                     run_line(result, best) if best else ""))
        return tuple(out)


@dataclass(frozen=True)
class QuantFits:
    """`fit -hf OWNER/REPO --quant all`: every quant asked, fitted from its header, and the largest that fits."""

    repo: str
    quants: tuple[QuantFit, ...]
    bytes_read: int = 0
    seconds: float = 0.0

    def best(self, budget: str | None = None, n_ctx: int | None = None) -> tuple[QuantFit, QuantLine] | None:
        """The largest file that fits the (first) budget and context with some KV type."""
        fitting = [(q, line) for q in self.quants for line in q.lines() if line.fits
                   and (budget is None or line.budget == budget) and (n_ctx is None or line.n_ctx == n_ctx)]
        first = fitting[0][1] if fitting else None
        if budget is None and first is not None:  # the first budget and context of the answer
            fitting = [(q, line) for q, line in fitting if (line.budget, line.n_ctx) == (first.budget, first.n_ctx)]
        return max(fitting, key=lambda pair: pair[0].size_bytes, default=None)

    def to_dict(self) -> dict:
        best = self.best()
        quants = [{"quant": q.quant, "file": q.file, "model": q.model, "size_bytes": q.size_bytes,
                   "bits_per_weight": q.bits_per_weight, "error": q.error,
                   "quality": serial.to_dict(q.quality) if q.quality else None,
                   "fit": q.record.to_dict() if q.record else None} for q in self.quants]
        return {"repo": self.repo, "bytes_read": self.bytes_read, "seconds": self.seconds, "quants": quants,
                "summary": {"best": {"quant": best[0].quant, "budget": best[1].budget, "n_ctx": best[1].n_ctx,
                                     "command": best[1].command} if best else None}}


def fit_quants(model: str, *, quant: str = "all", results: PathLike | None = None, **kwargs) -> QuantFits:
    """Every quant of a Hugging Face repository (hf://OWNER/REPO; `quant` "all" or a comma list of tags) fitted from
    its header as `fit` fits a file, with the same keywords; the headers read side by side, a few at a time. Each
    quant's command names it as llama.cpp's -hf does (-hf OWNER/REPO:QUANT); a quant whose header cannot be read
    carries its error, and the others still answer."""
    model = model_argument(model)
    if not wants_sweep(model, quant):
        raise UsageError(f"{model}: fit_quants takes a repository, hf://OWNER/REPO (no :QUANT), and --quant")
    start = time.perf_counter()
    found = list_quants(model, quant)
    measured = _weights_quality(results)  # read once, before this run appends its own records
    read, bytes_read = read_headers(found)
    quants = []
    for r in read:
        url = found.url(r.quant)
        if r.source is None:
            quants.append(QuantFit(r.quant.tag, r.quant.file, url, r.quant.size_bytes, 0, error=r.error))
            continue
        meta = r.source.metadata
        size = r.quant.size_bytes or meta.file_bytes
        n_params = sum(math.prod(t.shape) for t in meta.tensors)
        try:
            record = fit(url, results=None, _source=r.source, **kwargs)
        except LlamabenchError as exc:
            quants.append(QuantFit(r.quant.tag, r.quant.file, url, size, n_params, error=str(exc)))
            continue
        quants.append(QuantFit(r.quant.tag, r.quant.file, url, size, n_params, _save(results, record),
                               quality=measured.get(r.source.label)))
    return QuantFits(found.repo, tuple(quants), bytes_read, time.perf_counter() - start)


def _weights_quality(results: PathLike | None) -> dict[str, QualityRow]:
    """Per model label, the newest measured quality of its weights against a base (quality --base-model), from the
    results file as it was before this run."""
    if not results or not Path(results).is_file():
        return {}
    return {record.model.label: row for record in read_records(Path(results)).records
            if isinstance(record, QualityRecord) for row in record.rows if row.ok and row.base != F16_BASE}


def _fit_quality(answer, model, results: PathLike | None) -> tuple[KvQuality, ...]:
    """The fit's lossy KV types at their contexts, with what the results file measured of this model (newest)."""
    source = answer.source
    measured = []
    if results and Path(results).is_file():
        for record in read_records(Path(results)).records:
            if isinstance(record, QualityRecord) and record.model.label == source.label:
                measured += [(row, record.text) for row in record.rows]
    pairs = [(r.settings.n_ctx, r.settings.type_k, r.settings.type_v) for r in answer.result.rows]
    given = os.fspath(model) if source.path is not None and source.url is None else None
    return fit_quality(pairs, measured, model=given, results=os.fspath(results) if results else None)


def default_budgets() -> list[Budget]:
    """fit without --vram: on a GPU build, its GPUs' free memory now (ggml_backend_dev_memory, as llama-fit-params
    takes it), one machine of all of them, labelled so; elsewhere the 16 and 24 GiB cards to compare."""
    gpus = [d for d in device_memory() if d.is_local_gpu]
    if not gpus:
        return list(SCHEMA["vram"].default)
    cards = tuple(Card(f"{d.name} free {d.free_bytes / GIB:.2f}GiB", d.free_bytes) for d in gpus)
    return [Budget("+".join(c.label for c in cards), sum(c.bytes for c in cards), cards if len(cards) > 1 else ())]


# bench -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchRun:
    """A sweep: the plan (configurations x tests), and the records it appended (all of them, failed ones too)."""

    model: str
    results: str  # the JSON Lines file the records were appended to
    configurations: tuple[Params, ...]
    tests: tuple[BenchTest, ...]
    repetitions: int
    records: tuple[BenchRecord, ...] = ()
    skipped: int = 0  # tests the results file already held (resume)
    interrupted: bool = False
    dry_run: bool = False
    runtime: str = "llama-cpp-python"
    commands: tuple[str, ...] = ()  # llama-server: what each configuration starts (or the URL it attaches to)

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.records)

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "BenchRun":
        return serial.from_dict(cls, data)


def bench(model: str, *, n_prompt=None, n_gen=None, n_depth=None, repetitions=None, results: PathLike | None = None,
          resume: bool = False, dry_run: bool = False, on_event: Callable[[str, dict], None] | None = None,
          rpc=None, runtime=None, server_cmd: str | None = None, url: str | None = None,
          server_bin: PathLike | None = None, concurrency=None, **params) -> BenchRun:
    """Real llama.cpp contexts, one child process per configuration: what each allocates, and ppN / tgN @ dD t/s.

    Every list expands (llama-bench's sweep); every test is appended to `results` (default
    reports/local/<label>/bench.jsonl) as soon as it is measured; a failed configuration is recorded
    with llama.cpp's reason and the sweep goes on; `resume` skips what `results` already holds. `rpc=
    "HOST:PORT,..."` spreads the model over ggml-rpc-servers too, as llama-bench --rpc (RPC devices first).

    `runtime="llama-server"` benches llama.cpp's llama-server through its HTTP API instead: one server per
    configuration, started from `server_cmd` (a llama-server line, e.g. what `fit` printed) or from the bench
    parameters (`n_seq` is its -np), found at `server_bin`, on PATH or among the built tools; or the running
    one at `url`. `concurrency` parallel requests, one slot each; each record holds the exact command and the
    server's own timings beside the client's clock.
    """
    resume, dry_run = flag("resume", resume), flag("dry_run", dry_run)
    server = _server_options(runtime, server_cmd, url, server_bin, concurrency)
    plan = plan_bench(model_argument(model), params, n_prompt=n_prompt, n_gen=n_gen, n_depth=n_depth,
                      repetitions=repetitions, results=results, rpc=rpc, server=server)
    run = BenchRun(plan.source.label, str(plan.target), plan.configurations, plan.tests, plan.repetitions,
                   dry_run=dry_run, runtime=plan.runtime,
                   commands=tuple(plan.server_command(p) for p in plan.configurations) if server else ())
    if dry_run:
        return run
    jsonl.check_destination(plan.target)  # before the first measurement, not after it
    written: list[BenchRecord] = []
    outcome = run_bench(plan, save=lambda shared, m: written.append(_save_measurement(plan.target,
                                                                                      _bench_record(shared, m))),
                        measured=_measured(plan) if resume else None, on_event=on_event)
    return replace(run, records=tuple(written), skipped=outcome.skipped, interrupted=outcome.interrupted)


def _server_options(runtime, server_cmd, url, server_bin, concurrency) -> ServerOptions | None:
    chosen = parse_value("runtime", runtime, listed=False) if runtime is not None else Runtime.LLAMA_CPP_PYTHON
    given = [name for name, v in (("server_cmd", server_cmd), ("url", url), ("server_bin", server_bin),
                                  ("concurrency", concurrency)) if v is not None]
    if chosen is not Runtime.LLAMA_SERVER:
        if given:
            raise UsageError(f"{', '.join(given)}: only with runtime llama-server (--runtime llama-server)")
        return None
    if server_cmd and url:
        raise UsageError("give --server-cmd (a server to start) or --url (one running), not both")
    c = parse_value("concurrency", concurrency, listed=False) if concurrency is not None else 1
    return ServerOptions(server_cmd or None, url or None, str(server_bin) if server_bin else None, c)


def _measured(plan: BenchPlan) -> Callable[[tuple[str, ...]], set[tuple[Params, BenchTest]]]:
    """resume: the tests the results file holds already, of this model on these devices, by this runtime (and
    as many parallel requests)."""
    concurrency = plan.server.concurrency if plan.server else 1

    def measured(devices: tuple[str, ...]) -> set[tuple[Params, BenchTest]]:
        return {(r.params, r.test) for r in read_records(plan.target).records
                if isinstance(r, BenchRecord) and r.model.label == plan.source.label and r.devices == devices
                and r.runtime == plan.runtime and r.concurrency == concurrency}

    return measured


def _bench_record(shared: SweepBasis, m: Measurement) -> BenchRecord:
    """One measurement as a record: the theory beside it, and its roofline (from the record's t/s)."""
    # llama-server's context: the outputs and rollback planes its --spec-type adds (memory.speculative)
    params = speculative.target_context(m.params, slots=m.params.n_seq) if m.runtime == "llama-server" else m.params
    fp, error = theory(shared.geometry, params, no_rule=no_rule_line(shared.model.architecture))
    record = BenchRecord.of(shared.model, m, footprint=fp, theory_error=error, machine=shared.machine,
                            versions=shared.versions, roofline=None)
    block = roofline_block(shared.geometry, shared.weights, m.params, m.test, record.avg_ts, shared.peak.peak_gbps)
    return replace(record, devices=shared.devices, roofline=block)


# roofline --------------------------------------------------------------------------------------
def roofline(model: str, *, card: str | None = None, bandwidth=None, tflops=None, bw_eff=None, compute_eff=None,
             calibrate: PathLike | None = None, quant: str | None = None, results: PathLike | None = None,
             tensor_split=None, link=None, link_ms=None, n_gpu_layers=None, n_cpu_moe=None, ram_bandwidth=None,
             **params) -> RooflineRecord:
    """Predicted decode t/s at depths up to n_ctx from the bytes each token reads, beside the same model as full
    GQA: on a named card, a bandwidth, or calibrated on two measured depths of a bench results file; with
    `n_gpu_layers` or `n_cpu_moe`, fit's placement with part of the model in system RAM priced beside it."""
    found = predict(model_argument(model), params, bench_records=_bench_records, card=card, bandwidth=bandwidth,
                    tflops=tflops, bw_eff=bw_eff, compute_eff=compute_eff, calibrate=calibrate, quant=quant,
                    tensor_split=tensor_split, link=link, link_ms=link_ms, n_gpu_layers=n_gpu_layers,
                    n_cpu_moe=n_cpu_moe, ram_bandwidth=ram_bandwidth)
    record = RooflineRecord(model=found.source.model_block(found.architecture), params=found.params,
                            speed_model=found.speed_model, weights_read_per_token=found.weights_read_per_token,
                            weights_basis=found.weights_basis, rows=found.rows,
                            split_basis=found.split_basis)
    return _save(results, record)


def _bench_records(path: Path) -> tuple[list[BenchRecord], tuple[str, ...]]:
    """The bench records of a results file (roofline --calibrate), and its warnings: one per line passed over."""
    read = read_records(path)
    return [r for r in read.records if isinstance(r, BenchRecord)], read.warnings


# quality ---------------------------------------------------------------------------------------
def quality(model: str, *, text_file: PathLike | None = None, chunks=None, base_model: PathLike | None = None,
            results: PathLike | None = None, rpc=None, on_event: Callable[[str, dict], None] | None = None,
            **params) -> QualityRecord:
    """What each lossy choice costs in quality, measured as llama-perplexity --kl-divergence measures it: mean KLD
    (with its ±), its 99th percentile and maximum, the PPL of the choice and of the base, the same-top-token rate.

    The KV types (`type_k` / `type_v`, paired as fit pairs them; default q8_0 and q4_0) are scored against the same
    model with f16 KV; with `base_model` the model's weights are scored against that file's logits (both f16 KV).
    `n_ctx` may be a list (the base is made per context); `text_file` is a UTF-8 text (default: Python's
    pydoc_data.topics), cut into `chunks` chunks at most (default all). Each context's record is appended to
    `results` as it ends; a run stopped by Ctrl-C keeps the chunks it finished (the rows say how many; `interrupted`
    is set) and measures no further context. `on_event(kind, data)` hears "context", "text" and "chunk"."""
    plan = plan_quality(model_argument(model), params, text_file=text_file,
                        chunks=parse_value("chunks", chunks, listed=False) if chunks is not None else None,
                        base_model=os.fspath(base_model) if base_model is not None else None,
                        rpc=parse_value("rpc", rpc, listed=False) if rpc else None)
    if results:
        jsonl.check_destination(Path(results))  # before the first chunk, not after it
    kept: list[QualityRecord] = []

    def save(outcome: ContextOutcome) -> None:
        kept.append(_save(results, _quality_record(plan, [outcome])))

    run_quality(plan, save=save, notify=on_event)
    return kept[0] if len(kept) == 1 else _quality_record(plan, [], records=kept)


def _quality_record(plan, outcomes: list[ContextOutcome], *, records: list[QualityRecord] = ()) -> QualityRecord:
    """One context's outcome as a record, or several contexts' records as one (their rows in order)."""
    if records:
        first = records[0]
        warnings = [r.context_warning for r in records if r.context_warning]
        return replace(first, rows=tuple(row for r in records for row in r.rows),
                       rows_per_decode=max(r.rows_per_decode for r in records),
                       context_warning="; ".join(warnings) or None, interrupted=any(r.interrupted for r in records))
    outcome = outcomes[0]
    return QualityRecord(model=plan.source.model_block(plan.source.metadata.architecture),
                         params=plan.params.replace(n_ctx=outcome.n_ctx),
                         text=outcome.text, rows=outcome.rows,
                         base_model=plan.base.model_block(plan.base.metadata.architecture) if plan.base else None,
                         chunks_asked=plan.chunks, rows_per_decode=outcome.rows_per_decode,
                         context_warning=outcome.context_warning, interrupted=outcome.interrupted)


# report ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelReport:
    label: str
    out_dir: str
    files: tuple[str, ...]
    kv_efficiency: tuple[KvEfficiencyRecord, ...]


@dataclass(frozen=True)
class Report:
    """What `report` wrote: one folder per model, with its kv_efficiency records. Runs no model."""

    models: tuple[ModelReport, ...]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Report":
        return serial.from_dict(cls, data)


def _inspection_of_run(record: BenchRecord | QualityRecord) -> InspectRecord:
    """The inspect record a bench's or a quality run's results leave out, from the model its records name (a catalog
    id's twin: the id; a file: its path), at the run's parameters. Metadata only: nothing runs."""
    model = record.model.label if record.model.is_twin else (record.model.path or record.model.label)
    p = record.params
    try:
        return inspect(model, n_ctx=p.n_ctx, type_k=p.type_k, type_v=p.type_v, flash_attn=p.flash_attn,
                       n_seq=p.n_seq, kv_unified=p.kv_unified, swa_full=p.swa_full)  # the run's own context
    except LlamabenchError as exc:
        raise LlamabenchError(f"{record.model.label}: the results hold no inspect record, and the model they name "
                              f"cannot be read again ({exc})",
                              hint="run `llamabench inspect MODEL --results FILE` for this model") from None


def report(results, *, out_dir: PathLike | None = None, compare=()) -> Report:
    """record.json (kv_efficiency records), report.md and plots from result files only; one series per machine."""
    files = [Path(results)] if isinstance(results, (str, os.PathLike)) else [Path(r) for r in results]
    comparisons = parse_value("compare", list(compare), listed=True) if compare else ()
    for model_id in comparisons:
        catalog.get_entry(model_id)  # a clear error for an unknown id, before any work
    models, warnings = load_results(files)
    if not models:
        raise UsageError("no records to report")
    out = Path(out_dir) if out_dir else None
    written = []
    for label, results_of in models.items():
        run = (results_of.bench or results_of.quality or [None])[-1]
        if results_of.latest_inspect is None and run is not None:
            results_of.inspect.append(_inspection_of_run(run))
            warnings.append(f"{label}: the results hold no inspect record: the layout and theory were read from the "
                            f"model's metadata again, at the {run.kind.value} run's parameters")
        # the label comes from the results file: one cleaned folder name, checked to stay inside the parent
        target = out if out and len(models) == 1 else report_folder(out or paths.reports_dir(), label)
        files_written, records = write_report(results_of, target, compare=list(comparisons),
                                              sources=[str(p) for p in files])
        written.append(ModelReport(label, str(target), tuple(files_written), tuple(records)))
    return Report(tuple(written), tuple(warnings))


__all__ = ["inspect", "verify", "verify_matrix", "fit", "fit_quants", "QuantFits", "bench", "roofline", "quality",
           "report", "BenchRun",
           "MatrixResult", "Report", "ModelReport", "DEFAULT_N_CTX", "LlamabenchError"]
