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

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .core import serial
from .core.errors import LlamabenchError, UsageError
from .jobs.arguments import checked, flag, model_argument, path_option
from .jobs.bench.estimate import PlanEstimate
from .jobs.bench.estimate import estimate as estimate_plan
from .jobs.bench.job import run_bench
from .jobs.bench.plan import BENCH_LISTS as BENCH_LISTS
from .jobs.bench.plan import BENCH_PARAMS as BENCH_PARAMS
from .jobs.bench.plan import BENCH_TESTS as BENCH_TESTS
from .jobs.bench.plan import plan_bench
from .jobs.bench.record import bench_record, measured_before, save_measurement
from .jobs.bench.serve import server_options
from .jobs.fit.job import run_fit
from .jobs.fit.options import FIT_DEFAULTS as FIT_DEFAULTS
from .jobs.fit.options import FIT_LISTS as FIT_LISTS
from .jobs.fit.options import FIT_PARAMS as FIT_PARAMS
from .jobs.fit.options import fit_request
from .jobs.fit.options import remote_model as remote_model
from .jobs.fit.options import runtime_config as runtime_config
from .jobs.fit.quant_fits import QuantFit as QuantFit
from .jobs.fit.quant_fits import QuantFits, fit_catalog_quants, fit_each
from .jobs.fit.quants import SweepWatch, asked_quants, catalog_quants, list_quants, read_headers, wants_sweep
from .jobs.fit.record import fit_record
from .jobs.inspect.job import INSPECT_PARAMS as INSPECT_PARAMS
from .jobs.inspect.job import inspect_record, inspection_of_run, quant_argument
from .jobs.quality.job import ContextOutcome, plan_quality, run_quality
from .jobs.quality.lookup import weights_quality
from .jobs.quality.record import merged, quality_record
from .jobs.roofline.job import predict, roofline_record
from .jobs.verify.job import exactness_matrix, verify_record
from .memory.verification import MatrixResult
from .records import jsonl
from .records.bench import BenchRecord
from .records.fit import FitRecord
from .records.inspect import InspectRecord, VerifyRecord
from .records.quality import QualityRecord
from .records.records import save
from .records.roofline import RooflineRecord
from .reporting.build import report_folder, write_report
from .reporting.kv_record import KvEfficiencyRecord
from .reporting.load import load_results
from .settings.bench_tests import BenchTest
from .settings.params import DEFAULT_N_CTX, Params
from .settings.sweep import cache_pairs as cache_pairs
from .settings.sweep import parse_value
from .settings.values import Runtime
from .world import catalog, hf_repo, paths
from .world.remote import bytes_read as remote_bytes_read

PathLike = str | os.PathLike


# inspect ---------------------------------------------------------------------------------------
@checked
def inspect(model: str, *, results: PathLike | None = None, runtime=None, model_draft=None, quant: str | None = None,
            **params) -> InspectRecord:
    """The layer layout and the theoretical KV / recurrent footprint, computed from the GGUF's metadata, in the
    context `runtime` creates: llama-server (the default, as `fit`: 4 unified slots unless n_seq / kv_unified
    say otherwise) or llama-cpp-python (Llama(): one sequence); `model_draft` (llama-server's -md) sizes the
    draft model's own context beside it; `quant` weighs the weights in that quant (a file: llama.cpp's recipe
    asked of it without writing; a catalog id: its published file, else the recipe)."""
    return save(path_option("results", results),
                inspect_record(model_argument(model), params, runtime, path_option("model_draft", model_draft),
                               quant_argument(quant)))


# verify ----------------------------------------------------------------------------------------
@checked
def verify(model: str, *, results: PathLike | None = None, runtime=None, model_draft=None, **params) -> VerifyRecord:
    """Theory against llama.cpp's own `llama_kv_cache: size` / `llama_memory_recurrent: size` lines (a dry run), in
    the context `runtime` creates (llama-server by default, as `inspect` and `fit`); `model_draft` (-md): the draft
    model's own context is dry-run and checked too."""
    return save(path_option("results", results),
                verify_record(model_argument(model), params, runtime, path_option("model_draft", model_draft)))


def verify_matrix(model: str) -> MatrixResult:
    """n_ctx 4096 / 131072 / 5000 x f16, q8_0, q4_0 and fa off x 1 and 4 sequences (unified or not) x swa_full."""
    return exactness_matrix(model_argument(model))


# fit -------------------------------------------------------------------------------------------
@checked
def fit(model: str, *, vram=None, ram=None, cpu_only: bool = False, reserve=None, verify: bool = False,
        emulate: bool = False,
        mmproj: str | None = None, no_mmproj_offload: bool = False, quant: str | None = None, remote: bool = False,
        results: PathLike | None = None, runtime=None, n_seq=None, kv_unified=None, cache_ram=None,
        ctx_checkpoints=None, rpc=None, model_draft=None, n_gpu_layers_draft=None, device_draft=None,
        backend=None, unified: bool = False, wired_limit=None, progress=None, _source=None, _checked_only=False,
        **params) -> FitRecord:
    """Does n_ctx fit on the card(s) beside the weights, with which KV type and placement, in the context the
    runtime creates (`runtime`: llama-server, the default, or llama-cpp-python); `ram=` checks the host
    part; `verify=True` creates the answer for real (on the GPU, or an emulated card) and compares device by
    device; `emulate=True` sizes on an emulated card even on a GPU build (a card you do not have: every tensor
    type taken, no GPU's free memory as the budget). `vram="24GiB+12GiB"` is one machine with two cards,
    `rpc="HOST:PORT,..."` adds remote hosts (ggml-rpc-server) in front of them; `tensor_split=` fixes the -ts
    instead of searching it. `spec_type="draft-mtp"` (sized beside none by default where the model has an MTP
    layer) or `model_draft="draft.gguf"` (draft-simple; an EAGLE3 head with `spec_type="draft-eagle3"`) size
    llama-server's speculative decoding too, the draft on the target's cards or `device_draft="CUDA1"` ("none");
    `progress` (a callable taking a line) is told of each llama.cpp dry run the searches make. A card sized without
    it (an emulated card) answers as `backend` does ("cuda", "vulkan", "metal", "rocm"; "cpu": as it is): default
    what a named card runs, else CUDA; `op_offload=False` sizes llama-server's --no-op-offload. A unified machine
    (`vram="apple-m4-pro-24gb"`, or `vram="24GB", unified=True`) is one pool: the device's buffers within its ceiling
    (Metal's working set; `wired_limit` MiB as iogpu.wired_limit_mb sets it), everything within the RAM less
    `reserve` for the OS (default 4 GiB)."""
    if isinstance(quant, str):
        asked_quants(quant)  # a --quant naming nothing ("", ","): one line, before anything is read
    request = fit_request(model_argument(model), params, vram=vram, ram=ram,
                          cpu_only=flag("cpu_only", cpu_only), reserve=reserve, verify=flag("verify", verify),
                          emulate=flag("emulate", emulate), mmproj=path_option("mmproj", mmproj),
                          no_mmproj_offload=flag("no_mmproj_offload", no_mmproj_offload), quant=quant_argument(quant),
                          remote=flag("remote", remote), runtime=runtime,
                          n_seq=n_seq, kv_unified=kv_unified, cache_ram=cache_ram, ctx_checkpoints=ctx_checkpoints,
                          rpc=rpc, model_draft=path_option("model_draft", model_draft),
                          n_gpu_layers_draft=n_gpu_layers_draft,
                          device_draft=device_draft, backend=backend, unified=flag("unified", unified),
                          wired_limit=wired_limit, progress=progress)
    if _checked_only:  # fit_quants: the keywords checked once, before any quant is weighed
        return request
    if _source is None and quant is not None and wants_sweep(model_argument(model), quant):
        raise UsageError(f"--quant {quant} on a repository: lb.fit_quants({model!r}, quant={quant!r}) fits each "
                         "quant (the command: fit -hf OWNER/REPO --quant ...)")
    results = path_option("results", results)
    return save(results, fit_record(run_fit(request, _source), model, results))


@checked
def fit_quants(model: str, *, quant: str = "all", results: PathLike | None = None,
               on_quant: Callable[[str], None] | None = None, **kwargs) -> QuantFits:
    """Every quant of a Hugging Face repository (hf://OWNER/REPO; `quant` "all" or a comma list of tags) fitted from
    its header as `fit` fits a file, with the same keywords; the headers read side by side, a few at a time, each
    quant fitted as its header arrives and told to `on_quant` (a callable taking a line). Each quant's command names it
    as llama.cpp's -hf does (-hf OWNER/REPO:QUANT); a quant whose header cannot be read carries its error, and the
    others still answer. A sweep weighs MAX_QUANTS quants at most (a UsageError past it, before any header is read)
    and stops at SWEEP_SECONDS (DeadlinePassed), both saying how to narrow it."""
    model = model_argument(model)
    if not isinstance(quant, str):
        raise UsageError(f"quant: 'all' or a comma list of quants, e.g. 'Q4_K_M,Q8_0' (not {quant!r})")
    asked_quants(quant)  # none named, or too many: said before the hub is asked
    quant_argument(quant)  # a name too long to be one
    if not wants_sweep(model, quant):
        raise UsageError(f"{model}: fit_quants takes a repository, hf://OWNER/REPO (no :QUANT), a catalog id or a GGUF "
                         "file, and --quant all or a comma list")
    fit(model, _checked_only=True, **kwargs)  # the fit's own keywords, checked once: one line, not one row a quant
    start = time.perf_counter()
    watch = SweepWatch(model, on_quant)
    results = path_option("results", results)
    if not hf_repo.names_a_repo(model):  # a catalog id (its published files, or the recipe's) or a file (the recipe's)
        quants = fit_catalog_quants(model, catalog_quants(model, quant),
                                    fit_one=lambda name: fit(model, quant=name, results=None, **kwargs),
                                    keep=lambda record: save(results, record), watch=watch)
        return QuantFits(model, quants, 0, time.perf_counter() - start)
    found = list_quants(model, quant)
    measured = weights_quality(results)  # read once, before this run appends its own records
    before = remote_bytes_read()
    with read_headers(found) as read:
        quants = fit_each(found, read, measured, fit_one=lambda url, source: fit(url, results=None, _source=source,
                                                                                  **kwargs),
                          keep=lambda record: save(results, record), watch=watch)
    return QuantFits(found.repo, quants, remote_bytes_read() - before, time.perf_counter() - start)


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
    runtime: str = Runtime.LLAMA_CPP_PYTHON.value
    commands: tuple[str, ...] = ()  # llama-server: what each configuration starts (or the URL it attaches to)
    estimate: PlanEstimate | None = None  # --dry-run: the plan's tokens and, where a run calibrates it, its time

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.records)

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "BenchRun":
        return serial.from_dict(cls, data)


@checked
def bench(model: str, *, n_prompt=None, n_gen=None, n_depth=None, repetitions=None, results: PathLike | None = None,
          resume: bool = False, dry_run: bool = False, on_event: Callable[[str, dict], None] | None = None,
          rpc=None, runtime=None, server_cmd: str | None = None, url: str | None = None,
          server_bin: PathLike | None = None, concurrency=None, **params) -> BenchRun:
    """Real llama.cpp contexts, one child process per configuration: what each allocates, and ppN / tgN @ dD t/s.

    Every list expands (llama-bench's sweep); every test is appended to `results` (default
    reports/local/<label>/bench.jsonl) as soon as it is measured; a failed configuration is recorded
    with llama.cpp's reason and the sweep goes on; `resume` skips what `results` already holds. `rpc=
    "HOST:PORT,..."` spreads the model over ggml-rpc-servers too, as llama-bench --rpc (RPC devices first).

    `runtime` llama-server benches llama.cpp's llama-server through its HTTP API instead: one server per
    configuration, started from `server_cmd` (a llama-server line, e.g. what `fit` printed) or from the bench
    parameters (`n_seq` is its -np), found at `server_bin`, on PATH or among the built tools; or the running
    one at `url`. `concurrency` parallel requests, one slot each; each record holds the exact command and the
    server's own timings beside the client's clock.
    """
    resume, dry_run = flag("resume", resume), flag("dry_run", dry_run)
    server = server_options(runtime, server_cmd, url, server_bin, concurrency)
    plan = plan_bench(model_argument(model), params, n_prompt=n_prompt, n_gen=n_gen, n_depth=n_depth,
                      repetitions=repetitions, results=path_option("results", results), rpc=rpc, server=server)
    run = BenchRun(plan.source.label, str(plan.target), plan.configurations, plan.tests, plan.repetitions,
                   dry_run=dry_run, runtime=plan.runtime,
                   commands=tuple(plan.server_command(p) for p in plan.configurations) if server else ())
    if dry_run:  # with resume: what the results file holds already, as the run would skip it
        planned = {(p, t) for p in plan.configurations for t in plan.tests}
        held = (len(measured_before(plan)(()) & planned) if resume and not plan.hosts and plan.target.is_file()
                else 0)
        return replace(run, estimate=estimate_plan(plan), skipped=held)
    jsonl.check_destination(plan.target)  # before the first measurement, not after it
    written: list[BenchRecord] = []
    outcome = run_bench(plan, save=lambda shared, m: written.append(save_measurement(plan.target,
                                                                                     bench_record(shared, m))),
                        measured=measured_before(plan) if resume else None, on_event=on_event)
    return replace(run, records=tuple(written), skipped=outcome.skipped, interrupted=outcome.interrupted)


# roofline --------------------------------------------------------------------------------------
@checked
def roofline(model: str, *, card: str | None = None, backend: str | None = None, bandwidth=None, tflops=None,
             bw_eff=None, compute_eff=None, calibrate: PathLike | None = None, quant: str | None = None,
             results: PathLike | None = None, tensor_split=None, link=None, link_ms=None, n_gpu_layers=None,
             n_cpu_moe=None, ram_bandwidth=None, **params) -> RooflineRecord:
    """What llama-bench would print for MODEL on a machine, test by test (`n_prompt`, `n_gen`, `n_depth`, as
    llama-bench's -p -n -d), predicted from the bytes and FLOPs each step costs at the efficiencies `backend`'s
    kernels reached in published runs: on a named `card` (several joined by +), a `bandwidth`, or this machine's
    CPU; `calibrate` scales it to a bench results file of this model; with `n_gpu_layers` or `n_cpu_moe`, fit's
    placement with part of the model in system RAM priced beside it (at `ram_bandwidth`, else the card's typical
    host RAM)."""
    found = predict(model_argument(model), params, card=card, backend=backend, bandwidth=bandwidth, tflops=tflops,
                    bw_eff=bw_eff, compute_eff=compute_eff, calibrate=path_option("calibrate", calibrate),
                    quant=quant, tensor_split=tensor_split, link=link, link_ms=link_ms, n_gpu_layers=n_gpu_layers,
                    n_cpu_moe=n_cpu_moe, ram_bandwidth=ram_bandwidth)
    return save(results, roofline_record(found))


# quality ---------------------------------------------------------------------------------------
@checked
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
    results = path_option("results", results)
    plan = plan_quality(model_argument(model), params, text_file=path_option("text_file", text_file),
                        chunks=parse_value("chunks", chunks, listed=False) if chunks is not None else None,
                        base_model=path_option("base_model", base_model),
                        rpc=parse_value("rpc", rpc, listed=False) if rpc else None)
    if results:
        jsonl.check_destination(Path(results))  # before the first chunk, not after it
    kept: list[QualityRecord] = []

    def keep(outcome: ContextOutcome) -> None:
        kept.append(save(results, quality_record(plan, outcome)))

    run_quality(plan, save=keep, notify=on_event)
    return kept[0] if len(kept) == 1 else merged(kept)


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


def report(results, *, out_dir: PathLike | None = None, compare=()) -> Report:
    """record.json (kv_efficiency records), report.md and plots from result files only; one series per machine."""
    listed = [results] if isinstance(results, (str, os.PathLike)) else results
    if not isinstance(listed, (list, tuple)):
        raise UsageError(f"results: a results file or a list of them, not {type(results).__name__}")
    files = [Path(path_option("results", r)) for r in listed]
    if compare and (isinstance(compare, str) or not isinstance(compare, (list, tuple))):
        raise UsageError(f"compare: a list of catalog ids, not {type(compare).__name__}")
    comparisons = parse_value("compare", list(compare), listed=True) if compare else ()
    for model_id in comparisons:
        catalog.get_entry(model_id)  # a clear error for an unknown id, before any work
    models, warnings = load_results(files)
    if not models:
        raise UsageError("no records to report")
    out = Path(path_option("out_dir", out_dir)) if out_dir else None
    written = []
    for label, results_of in models.items():
        runs = results_of.bench or results_of.quality or []
        # the theory of the base (f16 KV) where a run holds it: the records of the other types are their own
        run = next((r for r in reversed(runs) if (r.params.type_k, r.params.type_v) == ("f16", "f16")),
                   runs[-1] if runs else None)
        if results_of.latest_inspect is None and run is not None:
            results_of.inspect.append(inspection_of_run(run))
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
