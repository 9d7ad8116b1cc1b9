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
from typing import Any, Callable

from . import catalog, paths, serial, speed, sysinfo
from . import remote as remote_reader  # fit() has a parameter named remote
from .bench import runner
from .bench.measure import Measurement, WeightsBasis, roofline as roofline_block, theory
from .errors import EngineError, LlamabenchError, UsageError
from .fit.job import FitSession, with_remote_hosts
from .fit.search import Placement, PlacementKind
from .fit.verify import verify_fit
from .fit.probe import buffer_name
from .llama import engine, rpc as rpc_mod
from .footprint import compute_footprint, kv_curve
from .inspection import inspect as inspect_metadata
from .layer_split import layer_counts, layer_devices
from .layout import geometry_from_metadata
from .llama.worker import device_memory, dry_runs
from .params import (DEFAULT_N_CTX, MAX_FIT_CELLS, SCHEMA, BenchTest, Budget, Card, Params, bench_tests,
                     check_plan_size, expand, parse_value, params_from)
from .projector import projector_from_metadata
from .runtimes import RuntimeConfig, parse_runtime
from .report.build import report_folder, write_report
from .report.kv_record import KvEfficiencyRecord
from .report.load import load_results
from .results import jsonl
from .results.records import (BenchRecord, FitRecord, InspectRecord, Record, RooflineRecord, RooflineRow,
                              VerifyRecord, append, read_records)
from .source import ModelSource, read_any, resolve
from .twin.shape import published_weights
from .verification import MatrixCell, MatrixResult, compare, describe, matrix_params
from .versions import these_versions
from .units import GIB

PathLike = str | os.PathLike


def _values(given: dict[str, Any], allowed: tuple[str, ...], lists: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keyword arguments of one API call, checked against the schema and parsed; defaults filled in."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise UsageError(f"unknown parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
                         hint="takes: " + ", ".join(allowed))
    out = {}
    for name in allowed:
        listed = name in lists
        if name in given and given[name] is not None and (listed or given[name] != ()):
            out[name] = parse_value(name, given[name], listed=listed)
        else:
            default = SCHEMA[name].default
            out[name] = (default if isinstance(default, tuple) or default is None else (default,)) if listed else default
    return out


def _save(results: PathLike | None, record: Record) -> Record:
    return append(Path(results), record) if results else record.stamped()


# inspect ---------------------------------------------------------------------------------------
INSPECT_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_seq", "kv_unified", "swa_full", "n_batch",
                  "n_ubatch", "n_rs_seq")


def inspect(model: str, *, results: PathLike | None = None, **params) -> InspectRecord:
    """The layer layout and the theoretical KV / recurrent footprint, computed from the GGUF's metadata."""
    values = _values(params, INSPECT_PARAMS)
    source = resolve(model)
    p = params_from(values)
    result = inspect_metadata(source.metadata, p, source.entry)
    top = max(result.geometry.n_ctx_train, result.footprint.shape.n_ctx)
    record = InspectRecord(model=source.model_block(result.geometry.architecture), inspection=result,
                           kv_curve=kv_curve(result.geometry, p, top))
    return _save(results, record)


# verify ----------------------------------------------------------------------------------------
def verify(model: str, *, results: PathLike | None = None, **params) -> VerifyRecord:
    """Theory against llama.cpp's own `llama_kv_cache: size` / `llama_memory_recurrent: size` lines (a dry run)."""
    values = _values(params, INSPECT_PARAMS)
    source = resolve(model)
    p = params_from(values)
    result = inspect_metadata(source.metadata, p, source.entry)  # validates the parameters before llama.cpp runs
    fp = result.footprint
    path = source.gguf_for_llama()
    sized = p.replace(n_ctx=fp.shape.n_ctx)
    dry = dry_runs(str(path), [sized])[0]
    record = VerifyRecord(model=source.model_block(result.geometry.architecture, loaded=path), params=sized,
                          footprint=fp, allocations=dry.allocations, checks=compare(fp, dry.allocations),
                          gguf=str(path), context_warning=result.context_warning)
    return _save(results, record)


def verify_matrix(model: str) -> MatrixResult:
    """n_ctx 4096 / 131072 / 5000 x f16, q8_0, q4_0 and fa off x 1 and 4 sequences (unified or not) x swa_full."""
    start = time.perf_counter()
    source = resolve(model)
    path = str(source.gguf_for_llama())
    geometry = source.llama_geometry()
    cells = matrix_params(geometry.has_swa)
    out = []
    for p, dry in zip(cells, dry_runs(path, cells)):
        checks = compare(compute_footprint(geometry, p), dry.allocations)
        out.append(MatrixCell(p, tuple(f"{describe(p)}: {c.mismatch()}" for c in checks if not c.ok)))
    st = os.stat(path)
    return MatrixResult(model, path, st.st_size, st.st_blocks * 512, time.perf_counter() - start, tuple(out))


# fit -------------------------------------------------------------------------------------------
FIT_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_ubatch", "n_gpu_layers", "n_cpu_moe", "tensor_split",
              "split_mode", "main_gpu")
FIT_LISTS = ("n_ctx", "type_k", "type_v", "n_gpu_layers", "n_cpu_moe")
FIT_DEFAULTS = {"type_k": ("f16", "q8_0", "q4_0"), "type_v": ("f16", "q8_0", "q4_0")}


def cache_pairs(type_k: tuple[str, ...], type_v: tuple[str, ...]) -> list[tuple[str, str]]:
    """-ctk / -ctv lists paired as llama-bench pairs them for fit: same length, or one of them single."""
    if len(type_k) == len(type_v):
        return list(zip(type_k, type_v))
    if len(type_k) == 1:
        return [(type_k[0], v) for v in type_v]
    if len(type_v) == 1:
        return [(k, type_v[0]) for k in type_k]
    raise UsageError("-ctk and -ctv lists must have the same length (they are paired), or one of them a single type")


def remote_model(model_id: str, quant: str | None) -> str:
    """The hf:// path of a catalog model's published quant."""
    entry = catalog.get_entry(model_id)
    quants = {q.name: q for q in entry.published_quants if q.hf}
    name = quant or "Q4_K_M"
    if name not in quants:
        raise UsageError(f"{model_id}: no Hugging Face location for {name} in the catalog",
                         hint="published with a location: " + (", ".join(quants) or "none"))
    return "hf://" + quants[name].hf


def runtime_config(runtime=None, *, n_seq=None, kv_unified=None, cache_ram=None,
                   ctx_checkpoints=None) -> RuntimeConfig:
    """The runtime a fit sizes, from the keywords as the schema spells them (None: the runtime's default)."""
    def value(name, raw):
        return parse_value(name, raw, listed=False) if raw is not None else SCHEMA[name].default

    return RuntimeConfig(parse_runtime(value("runtime", runtime)),
                         n_parallel=None if n_seq is None else parse_value("n_seq", n_seq, listed=False),
                         kv_unified=None if kv_unified is None else parse_value("kv_unified", kv_unified, listed=False),
                         cache_ram_mib=value("cache_ram", cache_ram),
                         ctx_checkpoints=value("ctx_checkpoints", ctx_checkpoints))


def fit(model: str, *, vram=None, ram=None, cpu_only: bool = False, reserve=None, verify: bool = False,
        emulate: bool = False,
        mmproj: str | None = None, no_mmproj_offload: bool = False, quant: str | None = None, remote: bool = False,
        results: PathLike | None = None, runtime=None, n_seq=None, kv_unified=None, cache_ram=None,
        ctx_checkpoints=None, rpc=None, **params) -> FitRecord:
    """Does n_ctx fit on the card(s) beside the weights, with which KV type and placement, in the context the
    runtime creates (`runtime="llama-server"`, the default, or "llama-cpp-python"); `ram=` checks the host
    part; `verify=True` creates the answer for real (on the GPU, or an emulated card) and compares device by
    device; `emulate=True` sizes on an emulated card even on a GPU build (a card you do not have: every tensor
    type taken, no GPU's free memory as the budget). `vram="24GiB+12GiB"` is one machine with two cards,
    `rpc="HOST:PORT,..."` adds remote hosts (ggml-rpc-server) in front of them; `tensor_split=` fixes the -ts
    instead of searching it."""
    given = {k: v for k, v in params.items()}
    for name, default in FIT_DEFAULTS.items():
        given.setdefault(name, default)
    values = _values(given, FIT_PARAMS, FIT_LISTS)
    budgets = (list(parse_value("vram", vram, listed=True)) if vram is not None
               else list(SCHEMA["vram"].default) if cpu_only or emulate else default_budgets())
    reserve_bytes = parse_value("reserve", reserve, listed=False) if reserve is not None else SCHEMA["reserve"].default
    ram_budget = parse_value("ram", ram, listed=False) if ram is not None else None
    if cpu_only and ram_budget is None:
        raise UsageError("--cpu-only puts everything in system RAM: give its size with --ram SIZE")
    config = runtime_config(runtime, n_seq=n_seq, kv_unified=kv_unified or None, cache_ram=cache_ram,
                            ctx_checkpoints=ctx_checkpoints)
    contexts = list(values["n_ctx"])
    if any(c == 0 for c in contexts):
        raise UsageError("n_ctx 0 is not allowed in fit: give the context length")
    pairs = cache_pairs(values["type_k"], values["type_v"])
    given = {name: values[name] if params.get(name) not in (None, (), []) else () for name in ("n_gpu_layers", "n_cpu_moe")}
    placements = ([Placement(PlacementKind.NGL, n) for n in given["n_gpu_layers"]]
                  + [Placement(PlacementKind.N_CPU_MOE, n) for n in given["n_cpu_moe"]])
    if not config.is_server and given["n_cpu_moe"]:
        raise UsageError("Llama() cannot keep experts in RAM (llama-cpp-python has no tensor buffer overrides)",
                         hint="use -ngl, or --runtime llama-server")
    if not config.is_server and (cache_ram is not None or ctx_checkpoints is not None):
        raise UsageError("--cache-ram and --ctx-checkpoints are llama-server's: Llama() keeps neither")
    if cpu_only and emulate:
        raise UsageError("--cpu-only puts everything in system RAM: it does not go with --emulate (a card)")
    if cpu_only and placements:
        raise UsageError("--cpu-only puts everything in system RAM: it does not go with -ngl or --n-cpu-moe")
    rpc_hosts = parse_value("rpc", rpc, listed=False) if rpc not in (None, "", ()) else ()
    if cpu_only and (rpc_hosts or any(b.multi for b in budgets)):
        raise UsageError("--cpu-only puts everything in system RAM: it does not go with several cards or --rpc")
    if rpc_hosts and not config.is_server:
        raise UsageError("Llama() cannot reach remote hosts (llama-cpp-python 0.3.36 has no --rpc)",
                         hint="use --runtime llama-server")
    budgets = with_remote_hosts(budgets, rpc_hosts)
    tensor_split = values["tensor_split"]
    for b in budgets:
        if tensor_split and len(tensor_split) != len(b.devices):
            raise UsageError(f"-ts gives {len(tensor_split)} proportions, but {b.label} has {len(b.devices)} devices")
        if isinstance(reserve_bytes, tuple) and len(reserve_bytes) != len(b.devices):
            raise UsageError(f"--reserve gives {len(reserve_bytes)} sizes, but {b.label} has {len(b.devices)} devices"
                             + (" (the --rpc hosts come first)" if rpc_hosts else ""))
    dry_run_hosts, local_offset = rpc_hosts, 0
    if values["split_mode"] == "none":  # one device: the -mg card, with its own reserve; no -ts
        mg = values["main_gpu"]
        budgets = _split_mode_budgets(budgets, "none", mg)
        reserve_bytes = reserve_bytes[mg] if isinstance(reserve_bytes, tuple) else reserve_bytes
        tensor_split = ()
        dry_run_hosts = (rpc_hosts[mg],) if mg < len(rpc_hosts) else ()
        local_offset = max(0, mg - len(rpc_hosts))
    elif values["main_gpu"]:
        raise UsageError("-mg picks the device of -sm none: give -sm none with it")

    check_plan_size("fit's evaluations", {"budgets": len(budgets), "contexts": len(contexts), "KV types": len(pairs),
                                          "placements": len(placements)}, MAX_FIT_CELLS)
    source = resolve(remote_model(model, quant) if remote else model)
    if source.url and verify:
        raise UsageError(f"--verify creates the model for real: download {source.url} (llamabench read only its "
                         "header) and give the file, or verify a catalog id on its twin")
    start = time.perf_counter()
    session = FitSession.open(source, flash_attn=values["flash_attn"], n_ubatch=values["n_ubatch"],
                              reserve=reserve_bytes, verify=verify, ram_mode=cpu_only, runtime=config,
                              ram=None if cpu_only else ram_budget, remote=dry_run_hosts,
                              n_cards=max(len(b.devices) for b in budgets), tensor_split=tensor_split,
                              local_offset=local_offset, emulate=emulate)
    if cpu_only:
        budgets = [Budget(f"{ram_budget.label} RAM", ram_budget.bytes)]
    if mmproj == "published":
        if not (source.entry and source.entry.mmproj):
            raise UsageError(f"{model}: the catalog names no published projector for it")
        mmproj = "hf://" + source.entry.mmproj
    server_args: tuple[str, ...] = ("--rpc", ",".join(rpc_hosts)) if rpc_hosts else ()
    if values["split_mode"] == "none":
        server_args += ("-sm", "none", "-mg", str(values["main_gpu"]))
    if cpu_only and session.gpu_build and config.is_server:  # no device, as sized: no GPU buffers for offloaded ops
        server_args += ("-dev", "none")
    if mmproj:
        session.add_projector(projector_from_metadata(read_any(mmproj)), offload=not no_mmproj_offload)
        shown = remote_reader.redact(mmproj) if remote_reader.is_remote(mmproj) else mmproj  # printed: no password
        server_args += ("--mmproj", shown) + (("--no-mmproj-offload",) if no_mmproj_offload else ())
    if any(p.kind is PlacementKind.N_CPU_MOE for p in placements) and not session.weights.has_experts():
        raise UsageError(f"{model} has no routed experts: --n-cpu-moe does not apply")
    result = session.evaluate(budgets, contexts, pairs, placements or None, server_args=server_args)
    result = replace(result, seconds=time.perf_counter() - start)
    verification = verify_fit(result, session, given=bool(placements)) if verify else None
    record = FitRecord(model=source.model_block(result.architecture), fit=result, verify=verification)
    return _save(results, record)


def default_budgets() -> list[Budget]:
    """fit without --vram: on a GPU build, its GPUs' free memory now (ggml_backend_dev_memory, as llama-fit-params
    takes it), one machine of all of them, labelled so; elsewhere the 16 and 24 GiB cards to compare."""
    gpus = [d for d in device_memory() if d["is_gpu"] and not d["name"].startswith("RPC")]
    if not gpus:
        return list(SCHEMA["vram"].default)
    cards = tuple(Card(f"{d['name']} free {d['free_bytes'] / GIB:.2f}GiB", d["free_bytes"]) for d in gpus)
    return [Budget("+".join(c.label for c in cards), sum(c.bytes for c in cards), cards if len(cards) > 1 else ())]


def _split_mode_budgets(budgets: list[Budget], split_mode: str, main_gpu: int) -> list[Budget]:
    """-sm none: the model on the -mg device alone, so each machine is sized by that one card."""
    if split_mode != "none":
        return budgets
    out = []
    for b in budgets:
        if main_gpu >= len(b.devices):
            raise UsageError(f"-mg {main_gpu}: {b.label} has {len(b.devices)} device(s), numbered from 0")
        card = b.devices[main_gpu]
        out.append(Budget(card.label, card.bytes, (card,) if card.remote else ()))
    return out


# bench -----------------------------------------------------------------------------------------
BENCH_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_gpu_layers", "n_cpu_moe", "n_batch", "n_ubatch",
                "n_threads", "repack", "poll", "cpu_mask", "cpu_strict", "prio")
BENCH_PARAMS += ("tensor_split", "split_mode", "main_gpu")
BENCH_LISTS = tuple(n for n in BENCH_PARAMS if n not in ("prio", "tensor_split", "split_mode", "main_gpu"))
BENCH_TESTS = ("n_prompt", "n_gen", "n_depth")


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
          rpc=None, **params) -> BenchRun:
    """Real llama.cpp contexts, one child process per configuration: what each allocates, and ppN / tgN @ dD t/s.

    Every list expands (llama-bench's sweep); every test is appended to `results` (default
    reports/local/<label>/bench.jsonl) as soon as it is measured; a failed configuration is recorded
    with llama.cpp's reason and the sweep goes on; `resume` skips what `results` already holds. `rpc=
    "HOST:PORT,..."` spreads the model over ggml-rpc-servers too, as llama-bench --rpc (RPC devices first).
    """
    values = _values(params, BENCH_PARAMS, BENCH_LISTS)
    hosts = parse_value("rpc", rpc, listed=False) if rpc not in (None, "", ()) else ()
    tests_values = _values({"n_prompt": n_prompt, "n_gen": n_gen, "n_depth": n_depth}, BENCH_TESTS, BENCH_TESTS)
    reps = parse_value("repetitions", repetitions, listed=False) if repetitions is not None else SCHEMA["repetitions"].default
    values["n_threads"] = tuple(dict.fromkeys(n or sysinfo.physical_cores() for n in values["n_threads"]))  # 0: cores
    configurations = expand(values)
    if any(p.n_ctx == 0 for p in configurations):
        raise UsageError("n_ctx 0 is not allowed in a sweep: give the context length")
    tests = bench_tests(tests_values["n_prompt"], tests_values["n_gen"], tests_values["n_depth"])
    if not tests:
        raise UsageError("nothing to measure: -p and -n are both 0")
    source = resolve(model)
    if source.url:
        raise UsageError(f"bench runs the model itself: download {source.url} (llamabench read only its header) and "
                         "give the file, or give a catalog id to bench its geometry twin")
    target = Path(results) if results else paths.reports_dir() / source.label / "bench.jsonl"
    plan = BenchRun(source.label, str(target), tuple(configurations), tuple(tests), reps, dry_run=dry_run)
    if dry_run:
        return plan
    jsonl.check_destination(target)  # before the first measurement, not after it
    for host in hosts:
        if why := rpc_mod.reachable(host):
            raise EngineError(f"--rpc {host}: no ggml-rpc-server can be reached there ({why})")
    # named devices: the RPC hosts first, then this build's GPUs (llama-bench --rpc's order); none without --rpc
    devices = tuple(buffer_name(h) for h in hosts) + tuple(engine.gpu_devices()) if hosts else ()
    if hosts and not rpc_mod.available():
        raise EngineError("--rpc needs llama.cpp's RPC backend: reinstall llama-cpp-python with CMAKE_ARGS=-DGGML_RPC=on "
                          "(make install does)")
    done: set[tuple[Params, BenchTest]] = set()
    if resume:
        done = {(r.params, r.test) for r in read_records(target).records
                if isinstance(r, BenchRecord) and r.model.label == source.label and r.devices == devices}
    path = source.gguf_for_llama()
    geometry = source.llama_geometry()
    model_ref = source.model_block(geometry.architecture, loaded=path)
    weights, active = speed.weights_per_token(source.llama_metadata, geometry)
    basis = WeightsBasis(weights.total_bytes + weights.tied_output_bytes, active,
                         f"weights from the tensor infos of {'the geometry twin' if source.is_catalog else 'the GGUF'}: "
                         f"{active / 2**20:.2f} MiB read per decoded token")
    peak = runner.peak_bandwidth(gpu=any(p.n_gpu_layers for p in configurations))
    machine = replace(sysinfo.this_machine(), memory_bandwidth=peak)
    versions = these_versions()
    written: list[BenchRecord] = []

    def save(m: Measurement) -> None:
        fp, error = theory(geometry, m.params)
        record = BenchRecord.of(model_ref, m, footprint=fp, theory_error=error, machine=machine, versions=versions,
                                roofline=None)
        record = replace(record, devices=devices, roofline=roofline_block(geometry, basis, m.params, m.test,
                                                                          record.avg_ts, peak.peak_gbps))
        written.append(append(target, record))

    if on_event:
        on_event("plan", {"tests": len(configurations) * len(tests) - len(done & {(p, t) for p in configurations
                                                                                  for t in tests})})
    outcome = runner.run_sweep(str(path), configurations, tests, reps, save=save,
                               done=lambda p, t: (p, t) in done, on_event=on_event,
                               rpc=(list(hosts) + list(engine.gpu_devices())) if hosts else None)
    return replace(plan, records=tuple(written), skipped=outcome.skipped, interrupted=outcome.interrupted)


# roofline --------------------------------------------------------------------------------------
def roofline(model: str, *, card: str | None = None, bandwidth=None, tflops=None, bw_eff=None, compute_eff=None,
             calibrate: PathLike | None = None, quant: str | None = None, results: PathLike | None = None,
             tensor_split=None, link=None, link_ms=None, **params) -> RooflineRecord:
    """Predicted decode t/s at depths up to n_ctx from the bytes each token reads, beside the same model as full
    GQA: on a named card, a bandwidth, or calibrated on two measured depths of a bench results file."""
    values = _values(params, ("n_ctx", "type_k", "type_v"))
    if values["n_ctx"] == 0:
        raise UsageError("n_ctx 0: give the deepest depth")
    source = resolve(model)
    meta, weights_basis, scale = _weights_source(source, quant or "Q4_K_M")
    geometry = geometry_from_metadata(meta)
    _, active = speed.weights_per_token(meta, geometry, scale_to_bytes=scale)
    p = params_from(values)
    measured: dict[int, float] = {}
    offset = 0
    split = None
    if calibrate:
        if not Path(calibrate).is_file():
            raise UsageError(f"{calibrate}: no such results file to calibrate on")
        model_, measured, offset = _calibrated(Path(calibrate), source, geometry, p, active)
    elif card:
        eff = {k: parse_value(n, v, listed=False) for k, n, v in (("bandwidth_efficiency", "bw_eff", bw_eff),
                                                                  ("compute_efficiency", "compute_eff", compute_eff))
               if v is not None}
        cards = [speed.card(c.strip()) for c in str(card).split("+")]
        model_ = speed.model_for_card(cards[0], **eff)
        if len(cards) > 1:
            split = _split_speed(meta, geometry, p, cards, eff, scale, tensor_split, link, link_ms)
    elif bandwidth:
        bw = parse_value("bandwidth", bandwidth, listed=False)
        bw_e = parse_value("bw_eff", bw_eff, listed=False) if bw_eff else speed.BANDWIDTH_EFFICIENCY
        c_e = parse_value("compute_eff", compute_eff, listed=False) if compute_eff else speed.COMPUTE_EFFICIENCY
        tf = parse_value("tflops", tflops, listed=False) if tflops else None
        model_ = speed.SpeedModel(bw * 1e9 * bw_e, tf * 1e12 * c_e if tf else float("inf"),
                                  f"{bw:g} GB/s x {bw_e:g}" + (f", {tf:g} TFLOPS x {c_e:g}" if tf
                                                               else ", attention compute not limiting"))
    else:
        raise UsageError("give card=NAME (--card), bandwidth=GB/s (--bandwidth) or calibrate=FILE (--calibrate)")
    if (tensor_split or link or link_ms) and split is None:
        raise UsageError("-ts, --link and --link-ms describe several cards: give them as --card A+B")
    depths = sorted({0, *(p.n_ctx * f // 16 for f in (1, 2, 4, 8, 16)), *measured})
    rows = []
    for d in depths:
        ours = speed.token_cost(geometry, p, active, d + offset)  # measured tg: its middle token
        gqa = speed.token_cost(geometry, p, active, d + offset, as_full_gqa=True)
        rows.append(RooflineRow(d, ours.total_bytes, ours.kv_bytes, ours.recurrent_bytes,
                                model_.tokens_per_second(ours), gqa.total_bytes, model_.tokens_per_second(gqa),
                                measured.get(d), split.tokens_per_second(d + offset) if split else None))
    record = RooflineRecord(model=source.model_block(geometry.architecture), params=p, speed_model=model_,
                            weights_read_per_token=active, weights_basis=weights_basis, rows=tuple(rows),
                            split_basis=split.basis if split else None)
    return _save(results, record)


@dataclass(frozen=True)
class _SplitSpeed:
    costs: Callable[[int], dict]
    devices: tuple
    models: tuple
    link: speed.Link
    n_embd: int
    basis: str

    def tokens_per_second(self, depth: int) -> float:
        return 1.0 / speed.split_seconds(self.costs(depth), self.devices, self.models, self.link, self.n_embd)[0]


def _split_speed(meta, geometry, p: Params, cards, eff: dict, scale, tensor_split, link, link_ms) -> _SplitSpeed:
    """Decode over several cards: llama.cpp's layer split (-ts, else by each card's memory as llama.cpp splits
    by free memory), each card at its own bandwidth, the activations over the link between them."""
    props = parse_value("tensor_split", tensor_split, listed=False) if tensor_split else tuple(
        float(c.vram_gib) for c in cards)
    if len(props) != len(cards):
        raise UsageError(f"-ts gives {len(props)} proportions for {len(cards)} cards")
    weights, _ = speed.weights_per_token(meta, geometry, scale_to_bytes=scale)
    devices = layer_devices(weights.n_layer, weights.n_layer + 1, props)
    gbps = parse_value("link", link, listed=False) if link else speed.PCIE_LINK_GBPS
    ms = parse_value("link_ms", link_ms, listed=False) if link_ms else 0.0
    models = tuple(speed.model_for_card(c, **eff) for c in cards)
    used, count = meta.arch_count("expert_used_count"), meta.arch_count("expert_count")
    counts = layer_counts(devices, len(cards))
    basis = (f"split over {' + '.join(c.name for c in cards)}, layers {' / '.join(map(str, counts))} (-ts "
             f"{','.join(f'{x:g}' for x in props)}); each card reads its layers' bytes at its own bandwidth, one after "
             f"another; each hop moves {geometry.n_embd * speed.ACTIVATION_BYTES:,} B of activations over a "
             f"{gbps:g} GB/s link" + (f" + {ms:g} ms" if ms else "") + (" (--link; default PCIe 4.0 x16 at half "
                                                                         "its peak)" if not link else " (--link)"))
    return _SplitSpeed(lambda d: speed.layer_token_costs(geometry, p, weights, used, count, d), devices, models,
                       speed.Link(gbps * 1e9, ms / 1e3, basis), geometry.n_embd, basis)


def _weights_source(source: ModelSource, quant: str):
    """Metadata with tensor infos, words for them, and a published size to scale to (catalog ids)."""
    if source.path is not None:
        return source.metadata, f"tensor infos of {source.path.name}", None
    _, meta, q = published_weights(source, quant)
    if q is None:
        return meta, f"no published {quant} size in the catalog: the shape twin's q4_0 tensors (estimate)", None
    return meta, f"published {q.name} size {q.bytes / 1e9:.2f} GB spread over the real tensor shapes (estimate)", q.bytes


def _calibrated(path: Path, source: ModelSource, geometry, p: Params, active: int):
    read = read_records(path)
    records = [r for r in read.records if isinstance(r, BenchRecord) and r.model.label == source.label]
    groups = [g for g in speed.tg_groups(records) if len(g) >= 2]
    if not groups:
        passed_over = f" ({read.warnings[0]}; {read.skipped} line(s) passed over)" if read.warnings else ""
        raise UsageError(f"{path}: calibrating needs tg tests of {source.label} at two depths or more, on one machine "
                         f"with one context configuration{passed_over}")
    group = groups[0]  # the one with the most depths
    n_tokens = group[0].test.n_tokens
    cost = lambda d: speed.token_cost(geometry, p, active, d + n_tokens // 2)  # noqa: E731
    lo, hi = group[0], group[-1]
    model = speed.calibrate(cost(lo.test.depth), lo.avg_ts, cost(hi.test.depth), hi.avg_ts)
    return model, {r.test.depth: r.avg_ts for r in group}, n_tokens // 2


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
        # the label comes from the results file: one cleaned folder name, checked to stay inside the parent
        target = out if out and len(models) == 1 else report_folder(out or paths.reports_dir(), label)
        files_written, records = write_report(results_of, target, compare=list(comparisons),
                                              sources=[str(p) for p in files])
        written.append(ModelReport(label, str(target), tuple(files_written), tuple(records)))
    return Report(tuple(written), tuple(warnings))


__all__ = ["inspect", "verify", "verify_matrix", "fit", "bench", "roofline", "report", "BenchRun", "MatrixResult",
           "Report", "ModelReport", "DEFAULT_N_CTX", "LlamabenchError"]
