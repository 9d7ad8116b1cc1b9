"""The `roofline` job: what llama-bench would print on a machine, test by test (`pp512 @ d4096`, `tg128 @ d4096`),
from the bytes and FLOPs each step costs (`memory.speed`) at the efficiencies the backend reached in published runs
(`memory.speed_model`); beside the same model as full GQA, and with part of it in RAM or over several cards.

This job picks the weights (the GGUF's tensor infos, or a catalog id's published size over its shape twin), the
machine (`machines`), reads the options and the measured runs (--calibrate), and makes the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...core.cache_types import CACHE_TYPES
from ...core.errors import UsageError
from ...llama.worker import dry_runs
from ...memory import speed
from ...memory.speed_model import SpeedModel
from ...model.architectures import no_rule_line, no_rule_reason
from ...model.layout import geometry_from_metadata, has_layout_rule, measured_geometry
from ...records.bench import BenchRecord
from ...records.records import read_records
from ...records.roofline import RooflineRecord, RooflineRow
from ...settings.params import Params
from ...settings.sweep import params_from, parse_value
from ..arguments import call_values
from ..source import ModelSource, resolve
from ..twin.shape import published_weights
from .machines import bandwidth_model, card_model, cards_of, host_model, this_machine_model
from .placement import PlacementSpeed, placement_speed
from .split import SplitSpeed, split_speed

ROOFLINE_PARAMS = ("n_ctx", "type_k", "type_v", "n_depth", "n_prompt", "n_gen", "n_ubatch", "n_batch", "flash_attn",
                   "repetitions", "spec_type", "n_threads")
LISTS = ("n_depth", "n_prompt", "n_gen")


@dataclass(frozen=True)
class Prediction:
    source: ModelSource
    architecture: str
    params: Params
    speed_model: SpeedModel
    weights_read_per_token: int
    weights_basis: str
    rows: tuple[RooflineRow, ...] = ()
    split_basis: str | None = None  # several cards or part in RAM, in words
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tests:
    prompts: tuple[int, ...]
    gens: tuple[int, ...]
    depths: tuple[int, ...]


def predict(model: str, params: dict[str, Any], *, card: str | None = None, backend=None, bandwidth=None,
            tflops=None, bw_eff=None, compute_eff=None, calibrate=None, quant: str | None = None, tensor_split=None,
            link=None, link_ms=None, n_gpu_layers=None, n_cpu_moe=None, ram_bandwidth=None) -> Prediction:
    """The rows of MODEL's roofline (`params`: the schema's, by name)."""
    values = call_values(params, ROOFLINE_PARAMS, lists=LISTS)
    given_depths = values.pop("n_depth") if params.get("n_depth") is not None else ()
    prompts, gens = tuple(x for x in values.pop("n_prompt") if x > 0), tuple(x for x in values.pop("n_gen") if x > 0)
    if not prompts and not gens:
        raise UsageError("-p 0 and -n 0 leave no test to predict: give -p or -n")
    p = params_from(values)
    source = resolve(model)
    meta, weights_basis, scale = weights_source(source, quant)
    ruled = has_layout_rule(meta)
    geometry = geometry_from_metadata(meta) if ruled else measured_geometry(meta, no_rule_reason(meta.architecture))
    if not ruled and (calibrate or n_gpu_layers is not None or n_cpu_moe is not None or "+" in str(card or "")):
        raise UsageError(f"{no_rule_line(meta.architecture)}: roofline prices it on one machine, its caches measured "
                         "by llama.cpp at each depth; not --calibrate, a split or a placement")
    weights = speed.weights_of(meta, geometry, scale, weights_basis)
    work = speed.model_work(meta, geometry, weights, mtp=p.spec_type == "draft-mtp")
    tests = Tests(prompts, gens, asked_depths(given_depths, p.n_ctx))
    model_, place, measured = machine(card, backend, bandwidth, tflops, bw_eff, compute_eff, calibrate, ram_bandwidth,
                                      p, geometry, weights, work, source, tensor_split, link, link_ms, n_gpu_layers,
                                      n_cpu_moe)
    notes = _notes(geometry, p, model_)
    if not ruled:
        depths = tests.depths or depths_of(p, {})
        caches = measured_caches(str(source.gguf_for_llama()), p, list(depths))
        notes += (f"no layout rule for {geometry.architecture}: the KV and state each row reads are what llama.cpp "
                  "allocates for a context that deep, measured by no_alloc dry runs; no attention FLOPs, no prompt "
                  "test, no full-GQA counterfactual",)
        return Prediction(source, geometry.architecture, p, model_, work.decode_weight_bytes, weights_basis,
                          measured_rows(caches, work, p, model_, tests), None, notes)
    return Prediction(source, geometry.architecture, p, model_, work.decode_weight_bytes, weights_basis,
                      rows(geometry, p, work, model_, tests, place, measured), place.basis if place else None, notes)


def machine(card, backend, bandwidth, tflops, bw_eff, compute_eff, calibrate, ram_bandwidth, p: Params, geometry,
            weights, work, source, tensor_split, link, link_ms, n_gpu_layers, n_cpu_moe):
    """(the speed model, the placement or split priced beside it, the measured t/s by test) of the options."""
    placed = n_gpu_layers is not None or n_cpu_moe is not None
    _check_machine_options(card, bandwidth, tensor_split or link or link_ms, ram_bandwidth, placed)
    if card is not None and not str(card).strip():
        raise UsageError("--card: an empty name", hint="name a card (rtx-4090), or leave --card out for this machine")
    cards = cards_of(card) if card else []
    if cards:
        model_ = card_model(cards[0], backend, bw_eff, compute_eff)
    elif bandwidth:
        model_ = bandwidth_model(bandwidth, tflops, backend, bw_eff, compute_eff)
    else:
        if backend is not None and parse_value("backend", backend, listed=False) != "cpu":
            raise UsageError(f"--backend {backend} runs a card: name it (--card NAME) or give --bandwidth GB/s")
        if tflops:
            raise UsageError("--tflops goes with --bandwidth (a card of those figures)")
        model_ = this_machine_model(bw_eff, compute_eff, p.n_threads)
    measured: dict[str, float] = {}
    if calibrate:
        if not Path(calibrate).is_file():
            raise UsageError(f"{calibrate}: no such results file to calibrate on")
        model_, measured = calibrated(Path(calibrate), source, p, work, model_)
    place: PlacementSpeed | SplitSpeed | None = None
    if len(cards) > 1:
        if placed:
            raise UsageError("-ngl and --n-cpu-moe price one card beside system RAM: give one --card")
        models = (model_, *(card_model(c, backend, bw_eff, compute_eff) for c in cards[1:]))
        place = split_speed(geometry, p, weights, work, cards, models, tensor_split, link, link_ms)
    elif placed:
        place = placement_speed(geometry, p, weights, work, model_,
                                host_model(cards[0] if cards else None, ram_bandwidth, bw_eff,
                                           this_machine=not cards and not bandwidth),
                                _placed("n_gpu_layers", n_gpu_layers), _placed("n_cpu_moe", n_cpu_moe))
    return model_, place, measured


def _check_machine_options(card, bandwidth, split_options, ram_bandwidth, placed: bool) -> None:
    if split_options and "+" not in str(card or ""):
        raise UsageError("-ts, --link and --link-ms describe several cards: give them as --card A+B")
    if bandwidth and card:
        raise UsageError("--card names a card with its bandwidth: give --card or --bandwidth, not both")
    if ram_bandwidth and not placed:
        raise UsageError("--ram-bandwidth prices the part in system RAM: give -ngl or --n-cpu-moe with it")


def _notes(geometry, p: Params, model_: SpeedModel) -> tuple[str, ...]:
    out = []
    trained = geometry.n_ctx_train
    if trained and p.n_ctx > trained:
        out.append(f"n_ctx {p.n_ctx:,} is beyond the trained context {trained:,}: llama.cpp runs it, but the model's "
                   "answers past it are untested")
    if not p.flash_attn:
        out.append("-fa 0: priced as flash attention; without it llama.cpp's attention at depth is slower than this")
    if geometry.mtp_layers and p.spec_type != "draft-mtp":
        out.append(f"the MTP layer ({len(geometry.mtp_layers)}) is not read: llama-server runs it only with "
                   "--spec-type draft-mtp")
    if not math.isfinite(model_.machine.fp32):
        out.append("no FLOP figure (--tflops): the bytes alone, and no prompt test")
    return tuple(out)


def asked_depths(given: tuple[int, ...], n_ctx: int) -> tuple[int, ...]:
    """-d's depths, sorted (none where -d is not given: n_ctx's fractions then), each within n_ctx."""
    if n_ctx == 0:
        raise UsageError("n_ctx 0: give the deepest depth")
    asked = tuple(sorted(set(given)))
    if asked and asked[-1] > n_ctx:
        raise UsageError(f"depth {asked[-1]:,} is beyond n_ctx {n_ctx:,}: give -c {asked[-1]} or more")
    return asked


def depths_of(p: Params, measured: dict) -> tuple[int, ...]:
    """0, n_ctx / 16, / 8, / 4, / 2, n_ctx, and every measured depth."""
    return tuple(sorted({0, *(p.n_ctx * f // 16 for f in (1, 2, 4, 8, 16)), *measured}))


def roofline_record(found: Prediction) -> RooflineRecord:
    """`roofline`'s answer as its record."""
    return RooflineRecord(model=found.source.model_block(found.architecture), params=found.params,
                          speed_model=found.speed_model, weights_read_per_token=found.weights_read_per_token,
                          weights_basis=found.weights_basis, rows=found.rows, split_basis=found.split_basis,
                          notes=found.notes)


def _placed(name: str, value) -> int | None:
    return parse_value(name, value, listed=False) if value is not None else None


def band(model_: SpeedModel, kind: str, ts: float) -> tuple[float | None, float | None]:
    """The t/s range the backend's held-out published runs fell in (measured = predicted / (1 + residual))."""
    b = model_.rates.decode_band if kind == "tg" else model_.rates.prefill_band
    if b is None or model_.decode_scale != 1.0 or model_.prefill_scale != 1.0:
        return None, None
    return ts / (1 + b.high), ts / (1 + b.low)


def rows(geometry, p: Params, work: speed.ModelWork, model_: SpeedModel, tests: Tests,
         place: PlacementSpeed | SplitSpeed | None, measured: dict[str, float]) -> tuple[RooflineRow, ...]:
    """The llama-bench tests at every depth (those asked, or n_ctx's fractions): pp then tg, depth after depth."""
    priced_flops = math.isfinite(model_.machine.fp32)
    out = []
    for d in tests.depths or depths_of(p, {}):
        for n in tests.prompts if priced_flops else ():
            ts = model_.test_tokens_per_second(work, p, "pp", n, d)
            per_ub = [speed.ubatch_cost(work, p, s, k) for s, k in speed.ubatches(p, n, d)]
            name = _name("pp", n, d)
            out.append(RooflineRow(name, n, 0, d, p.n_ubatch, ts, *band(model_, "pp", ts),
                                   _ttft(model_, work, p, d + n),
                                   round(sum(c.weights_bytes + c.kv_bytes for c in per_ub) / n),
                                   round(sum(c.kv_bytes for c in per_ub) / n), 0,
                                   placed_ts=n / place.prefill_seconds(n, d) if place else None,
                                   measured_ts=measured.get(name)))
        for n in tests.gens:
            middle = d + n // 2
            ours = speed.decode_cost(work, p, middle)
            gqa = speed.full_gqa_cost(geometry, p, work, middle)
            ts = model_.test_tokens_per_second(work, p, "tg", n, d)
            name = _name("tg", n, d)
            out.append(RooflineRow(name, 0, n, d, p.n_ubatch, ts, *band(model_, "tg", ts),
                                   _ttft(model_, work, p, d) if priced_flops else None, ours.total_bytes,
                                   ours.kv_bytes, ours.recurrent_bytes, gqa.total_bytes, model_.tokens_per_second(gqa),
                                   place.tokens_per_second(middle) if place else None, measured.get(name)))
    return tuple(out)


def _name(kind: str, n: int, depth: int) -> str:
    return f"{kind}{n}" + (f" @ d{depth}" if depth else "")


def _ttft(model_: SpeedModel, work: speed.ModelWork, p: Params, prompt: int) -> float:
    """Seconds from a prompt of `prompt` tokens sent to an empty context to its first token: the prefill, then one
    decoded token."""
    return round(model_.prefill_seconds(work, p, prompt, 0) + model_.seconds(speed.decode_cost(work, p, prompt)), 4)


MIN_DRY_RUN_CTX = 256  # llama.cpp pads n_ctx to 256: depth 0 is sized as the smallest context


def measured_caches(path: str, p: Params, depths: list[int]) -> dict[int, tuple[int, int]]:
    """(KV, recurrent) bytes a token at each depth reads, for an architecture without a layout rule: llama.cpp's own
    caches of a context that deep (one sequence), from no_alloc dry runs."""
    settings = [p.replace(n_ctx=max(MIN_DRY_RUN_CTX, d), n_seq=1, kv_unified=False, repack=False) for d in depths]
    sized = dry_runs(path, settings)
    return {d: (s.allocations.kv_bytes, s.allocations.recurrent_bytes) for d, s in zip(depths, sized)}


def measured_rows(caches: dict[int, tuple[int, int]], work: speed.ModelWork, p: Params, model_: SpeedModel,
                  tests: Tests) -> tuple[RooflineRow, ...]:
    """Rows of an architecture without a layout rule: tg only, its weights and the KV and state llama.cpp allocated
    for a context of each depth (read once, the state read and written); no attention FLOPs, no full GQA."""
    out = []
    for d, (kv, state) in sorted(caches.items()):
        base = speed.decode_cost(work, p, 0)
        for n in tests.gens:
            cost = speed.TokenCost(d, base.weights_bytes, kv, 2 * state, 0, base.matmul_flops, 0, base.layers)
            ts = model_.tokens_per_second(cost)
            out.append(RooflineRow(_name("tg", n, d), 0, n, d, p.n_ubatch, ts, *band(model_, "tg", ts), None,
                                   cost.total_bytes,
                                   kv, 2 * state))
    return tuple(out)


def weights_source(source: ModelSource, quant: str | None):
    """Metadata with tensor infos, words for them, and the published size they are spread over (catalog ids: the
    same weights fit states, twin.shape.published_weights)."""
    if source.path is not None:
        return source.metadata, f"tensor infos of {source.path.name}", speed.WeightsScale()
    twin = published_weights(source, quant)
    return twin.meta, twin.basis, speed.WeightsScale(twin.scale, twin.by_bytes)


# --calibrate: a run's own numbers -----------------------------------------------------------------
NOISY = 0.10  # a test whose repetitions spread more than this share of the mean (bench marks it noisy)
# --calibrate's file, at most: every record in it is read and checked (records.read_records), about 5 MB a second on
# this 2-core CPU (2026-12-07, bench records of 3.4 KB): 64 MiB, some 20,000 bench records, is read in about 13 s,
# where a 192 MB file took a minute or more
CALIBRATE_MAX_BYTES = 64 * 2**20


def calibrated(path: Path, source: ModelSource, p: Params, work: speed.ModelWork, model_: SpeedModel,
               keep: Callable[[BenchRecord], bool] | None = None) -> tuple[SpeedModel, dict[str, float]]:
    """The physical model scaled to a bench run of this model: one factor for decode and one for prefill, each the
    median of measured / predicted over the run's tests (a test bench marked noisy left out while others remain),
    so two noisy points cannot bend it; and the measured t/s by test name. `keep`: only the records it keeps."""
    size = path.stat().st_size
    if size > CALIBRATE_MAX_BYTES:
        raise UsageError(f"{path}: {size / 2**20:,.0f} MiB is more than --calibrate reads "
                         f"({CALIBRATE_MAX_BYTES // 2**20} MiB, some 20,000 bench records)",
                         hint=f"calibrate on a file of {source.label}'s bench runs alone (bench --results FILE)")
    read = read_records(path)
    records = [r for r in read.records if isinstance(r, BenchRecord) and r.ok and r.model.label == source.label
               and {r.params.type_k, r.params.type_v} <= set(CACHE_TYPES) and (keep is None or keep(r))]
    if not records:
        passed_over = f" ({read.warnings[0]}; {len(read.warnings)} line(s) passed over)" if read.warnings else ""
        raise UsageError(f"{path}: calibrating needs timed tests of {source.label}{passed_over}")
    newest: dict[tuple, BenchRecord] = {}
    for r in sorted(records, key=lambda r: r.timestamp):
        newest[(r.series, r.test.kind, r.test.n_tokens, r.test.depth)] = r
    chosen = list(newest.values())
    factors: dict[str, list[float]] = {"pp": [], "tg": []}
    noisy: dict[str, int] = {"pp": 0, "tg": 0}
    for r in chosen:
        kind = str(r.test.kind)
        settings = p.replace(n_ubatch=r.params.n_ubatch, n_batch=r.params.n_batch, type_k=r.params.type_k,
                             type_v=r.params.type_v)
        predicted = model_.test_tokens_per_second(work, settings, kind, r.test.n_tokens, r.test.depth)
        if r.stddev_ts and r.avg_ts and r.stddev_ts / r.avg_ts > NOISY:
            noisy[kind] += 1
            continue
        factors[kind].append(predicted / r.avg_ts)
    scale = {k: _median(v) for k, v in factors.items()}
    words = []
    for kind, label in (("tg", "decode"), ("pp", "prefill")):
        if factors[kind]:
            words.append(f"{label} x{1 / scale[kind]:.2f} (median of {len(factors[kind])} test"
                         f"{'s' if len(factors[kind]) != 1 else ''}" + (f"; {noisy[kind]} noisy left out"
                                                                         if noisy[kind] else "") + ")")
        elif noisy[kind]:
            words.append(f"{label} not calibrated: its {noisy[kind]} test(s) are noisy (bench marked them)")
    calibrated_model = model_.scaled(scale["tg"] or 1.0, scale["pp"] or 1.0,
                                     model_.basis + f"; calibrated on {path.name}: " + ", ".join(words))
    return calibrated_model, {r.test.name: r.avg_ts for r in chosen}


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
