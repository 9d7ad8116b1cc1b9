"""The `roofline` job: predicted decode t/s at depths up to n_ctx from the bytes each token reads, beside the
same model as full GQA, on a named card (or several), a bandwidth, or calibrated on a bench results file.

The arithmetic is `memory.speed`'s (pure); this job picks the weights (the GGUF's tensor infos, or a catalog
id's published size over its shape twin), reads the options and the measured depths, and makes the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ...core.cache_types import CACHE_TYPES
from ...core.errors import UsageError
from ...llama.worker import dry_runs
from ...memory import speed
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
from .placement import PlacementSpeed, host_model, placement_speed
from .split import SplitSpeed, split_speed

ROOFLINE_PARAMS = ("n_ctx", "type_k", "type_v", "n_depth")

@dataclass(frozen=True)
class Prediction:
    source: ModelSource
    architecture: str
    params: Params
    speed_model: speed.SpeedModel
    weights_read_per_token: int
    weights_basis: str
    rows: tuple[RooflineRow, ...] = ()
    split_basis: str | None = None  # several cards: the split, the cards and the link, in words
    notes: tuple[str, ...] = ()


def predict(model: str, params: dict[str, Any], *, card: str | None = None, bandwidth=None, tflops=None,
            bw_eff=None, compute_eff=None, calibrate=None, quant: str | None = None, tensor_split=None, link=None,
            link_ms=None, n_gpu_layers=None, n_cpu_moe=None, ram_bandwidth=None) -> Prediction:
    """The rows of MODEL's roofline (`params`: the schema's, by name)."""
    values = call_values(params, ROOFLINE_PARAMS, lists=("n_depth",))
    asked = asked_depths(values.pop("n_depth"), values["n_ctx"])
    source = resolve(model)
    meta, weights_basis, scale = weights_source(source, quant)
    ruled = has_layout_rule(meta)
    geometry = geometry_from_metadata(meta) if ruled else measured_geometry(meta, no_rule_reason(meta.architecture))
    weights, active = speed.weights_per_token(meta, geometry, scale_to_bytes=scale.bytes, by_bytes=scale.by_bytes)
    prompt = Prompt(weights.loaded_bytes, speed.matmul_flops(meta, geometry))
    p = params_from(values)
    if not ruled and (calibrate or n_gpu_layers is not None or n_cpu_moe is not None or "+" in str(card or "")):
        raise UsageError(f"{no_rule_line(meta.architecture)}: roofline prices it on one card or bandwidth, its "
                         "caches measured by llama.cpp at each depth; not --calibrate, a split or a placement")
    measured: dict[int, float] = {}
    offset = 0
    split = None
    if calibrate:
        if not Path(calibrate).is_file():
            raise UsageError(f"{calibrate}: no such results file to calibrate on")
        model_, measured, offset = calibrated(Path(calibrate), source, geometry, active, prompt)
    elif card:
        model_, split = card_model(card, bw_eff, compute_eff, lambda cards, eff: split_speed(
            meta, geometry, p, cards, eff, scale, tensor_split, link, link_ms))
    elif bandwidth:
        model_ = bandwidth_model(bandwidth, tflops, bw_eff, compute_eff)
    else:
        raise UsageError("give --card NAME, --bandwidth GB/s or --calibrate FILE (the API: card=, bandwidth=, "
                         "calibrate=)")
    if (tensor_split or link or link_ms) and split is None:
        raise UsageError("-ts, --link and --link-ms describe several cards: give them as --card A+B")
    if n_gpu_layers is not None or n_cpu_moe is not None:  # fit's answer with part of the model in RAM, priced
        if split is not None or calibrate:
            raise UsageError("-ngl and --n-cpu-moe price one card beside system RAM: give one --card or --bandwidth")
        split = placement_speed(meta, geometry, p, model_, host_model(ram_bandwidth, bw_eff), scale,
                                _placed("n_gpu_layers", n_gpu_layers), _placed("n_cpu_moe", n_cpu_moe))
    elif ram_bandwidth:
        raise UsageError("--ram-bandwidth prices the part in system RAM: give -ngl or --n-cpu-moe with it")
    if not ruled:
        caches = measured_caches(str(source.gguf_for_llama()), p, asked or depths_of(p, measured))
        return Prediction(source, geometry.architecture, p, model_, active, weights_basis,
                          measured_rows(caches, active, model_), None)
    trained = geometry.n_ctx_train
    notes = ((f"n_ctx {p.n_ctx:,} is beyond the trained context {trained:,}: llama.cpp runs it, but the model's "
              "answers past it are untested",) if trained and p.n_ctx > trained else ())
    return Prediction(source, geometry.architecture, p, model_, active, weights_basis,
                      rows(geometry, p, active, model_, measured, offset, split, asked, prompt),
                      split.basis if split else None, notes)


def asked_depths(given: tuple[int, ...], n_ctx: int) -> tuple[int, ...]:
    """-d's depths, sorted (none where only the default 0 is given: n_ctx's fractions then), each within n_ctx."""
    if n_ctx == 0:
        raise UsageError("n_ctx 0: give the deepest depth")
    asked = tuple(sorted(set(given))) if set(given) != {0} else ()
    if asked and asked[-1] > n_ctx:
        raise UsageError(f"depth {asked[-1]:,} is beyond n_ctx {n_ctx:,}: give -c {asked[-1]} or more")
    return asked


def roofline_record(found: Prediction) -> RooflineRecord:
    """`roofline`'s answer as its record."""
    return RooflineRecord(model=found.source.model_block(found.architecture), params=found.params,
                          speed_model=found.speed_model, weights_read_per_token=found.weights_read_per_token,
                          weights_basis=found.weights_basis, rows=found.rows, split_basis=found.split_basis,
                          notes=found.notes)


def _placed(name: str, value) -> int | None:
    return parse_value(name, value, listed=False) if value is not None else None


def card_model(card: str, bw_eff, compute_eff, split_of: Callable) -> tuple[speed.SpeedModel, SplitSpeed | None]:
    """The speed model of the first named card (--card A+B: `split_of(cards, efficiencies)` prices the split)."""
    eff = {k: parse_value(n, v, listed=False) for k, n, v in (("bandwidth_efficiency", "bw_eff", bw_eff),
                                                              ("compute_efficiency", "compute_eff", compute_eff))
           if v is not None}
    cards = [speed.card(c.strip()) for c in str(card).split("+")]
    return speed.model_for_card(cards[0], **eff), split_of(cards, eff) if len(cards) > 1 else None


def depths_of(p: Params, measured: dict[int, float]) -> list[int]:
    """0, n_ctx / 16, / 8, / 4, / 2, n_ctx, and every measured depth."""
    return sorted({0, *(p.n_ctx * f // 16 for f in (1, 2, 4, 8, 16)), *measured})


MIN_DRY_RUN_CTX = 256  # llama.cpp pads n_ctx to 256: depth 0 is sized as the smallest context


def measured_caches(path: str, p: Params, depths: list[int]) -> dict[int, tuple[int, int]]:
    """(KV, recurrent) bytes a token at each depth reads, for an architecture without a layout rule: llama.cpp's own
    caches of a context that deep (one sequence), from no_alloc dry runs."""
    settings = [p.replace(n_ctx=max(MIN_DRY_RUN_CTX, d), n_seq=1, kv_unified=False, repack=False) for d in depths]
    sized = dry_runs(path, settings)
    return {d: (s.allocations.kv_bytes, s.allocations.recurrent_bytes) for d, s in zip(depths, sized)}


def measured_rows(caches: dict[int, tuple[int, int]], active: int, model_: speed.SpeedModel) -> tuple:
    """Rows of an architecture without a layout rule: weights, and the KV and state llama.cpp allocated for a context
    of each depth (read once, the state read and written); no attention FLOPs, no full-GQA counterfactual."""
    out = []
    for d, (kv, state) in sorted(caches.items()):
        cost = speed.TokenCost(d, active, kv, 2 * state, 0)
        out.append(RooflineRow(d, cost.total_bytes, kv, 2 * state, model_.tokens_per_second(cost), None, None))
    return tuple(out)


@dataclass(frozen=True)
class Prompt:
    """What prefilling a prompt costs beside the bytes: every weight's bytes (read once per ubatch) and the FLOPs
    of one token's matrix products."""

    all_weights: int
    matmul_flops: int


def rows(geometry, p: Params, active: int, model_: speed.SpeedModel, measured: dict[int, float], offset: int,
         split: SplitSpeed | PlacementSpeed | None, asked: tuple[int, ...] = (),
         prompt: Prompt | None = None) -> tuple[RooflineRow, ...]:
    """One row per depth: those asked (-d), or 0, n_ctx / 16, / 8, / 4, / 2, n_ctx, and every measured depth; each
    with its decode ceiling and the time to prefill a prompt that deep (TTFT) where the model prices a prefill."""
    out = []
    for d in asked or depths_of(p, measured):
        ours = speed.token_cost(geometry, p, active, d + offset)  # measured tg: its middle token
        gqa = speed.token_cost(geometry, p, active, d + offset, as_full_gqa=True)
        ttft = (speed.prefill_seconds(geometry, p, prompt.all_weights, active, prompt.matmul_flops, model_, d)
                if prompt and d else None)
        out.append(RooflineRow(d, ours.total_bytes, ours.kv_bytes, ours.recurrent_bytes,
                                model_.tokens_per_second(ours), gqa.total_bytes, model_.tokens_per_second(gqa),
                                measured.get(d), split.tokens_per_second(d + offset) if split else None,
                                None if ttft is None else round(ttft, 4)))
    return tuple(out)


def bandwidth_model(bandwidth, tflops, bw_eff, compute_eff) -> speed.SpeedModel:
    """--bandwidth GB/s (and --tflops), each at its efficiency."""
    bw = parse_value("bandwidth", bandwidth, listed=False)
    bw_e = parse_value("bw_eff", bw_eff, listed=False) if bw_eff else speed.BANDWIDTH_EFFICIENCY
    c_e = parse_value("compute_eff", compute_eff, listed=False) if compute_eff else speed.COMPUTE_EFFICIENCY
    tf = parse_value("tflops", tflops, listed=False) if tflops else None
    return speed.SpeedModel(bw * 1e9 * bw_e, tf * 1e12 * c_e if tf else float("inf"),
                            f"{bw:g} GB/s x {bw_e:g}" + (f", {tf:g} TFLOPS x {c_e:g}" if tf
                                                         else ", attention compute not limiting"),
                            tf * 1e12 * c_e if tf else None,
                            f"--tflops {tf:g} x {c_e:g}, as the attention (a card's matrix units prefill faster: "
                            "--card or --calibrate)" if tf else "")


def weights_source(source: ModelSource, quant: str | None):
    """Metadata with tensor infos, words for them, and the published size they are spread over (catalog ids: the
    same weights fit states, twin.shape.published_weights)."""
    if source.path is not None:
        return source.metadata, f"tensor infos of {source.path.name}", speed.WeightsScale()
    twin = published_weights(source, quant)
    return twin.meta, twin.basis, speed.WeightsScale(twin.scale, twin.by_bytes)


def calibrated(path: Path, source: ModelSource, geometry, active: int, prompt: Prompt,
               keep: Callable[[BenchRecord], bool] | None = None):
    """The speed model of two measured depths of this model (the group with the most; `keep`: only records it
    keeps), the measured t/s by depth, and the offset of a tg test's middle token; its prefill from the shallowest
    and the deepest pp tests of the same run."""
    read = read_records(path)
    records, warnings = [r for r in read.records if isinstance(r, BenchRecord)], read.warnings
    # the run's own cache types price what it read: only runs whose types llamabench knows (a file is not trusted)
    records = [r for r in records if r.model.label == source.label and (keep is None or keep(r))
               and {r.params.type_k, r.params.type_v} <= set(CACHE_TYPES)]
    groups = [g for g in speed.tg_groups(records) if len(g) >= 2]
    if not groups:
        passed_over = f" ({warnings[0]}; {len(warnings)} line(s) passed over)" if warnings else ""
        raise UsageError(f"{path}: calibrating needs tg tests of {source.label} at two depths or more, on one machine "
                         f"with one context configuration{passed_over}")
    group = groups[0]  # the one with the most depths
    n_tokens = group[0].test.n_tokens
    lo, hi = group[0], group[-1]
    measured_with = lo.params  # the run's own cache types and batch sizes price what it read
    cost = lambda d: speed.token_cost(geometry, measured_with, active, d + n_tokens // 2)  # noqa: E731
    model = speed.calibrate(cost(lo.test.depth), lo.avg_ts, cost(hi.test.depth), hi.avg_ts)
    model = replace(model, basis=(  # the tests' depths, not their middle tokens'
        f"calibrated on tg{n_tokens} at depths {lo.test.depth} and {hi.test.depth}" if math.isfinite(model.compute)
        else f"calibrated on tg{n_tokens} at depth {lo.test.depth} (bytes only)"))
    return (with_prefill(model, records, lo, geometry, measured_with, active, prompt),
            {r.test.depth: r.avg_ts for r in group}, n_tokens // 2)


def with_prefill(model: speed.SpeedModel, records, tg, geometry, p: Params, active: int,
                 prompt: Prompt) -> speed.SpeedModel:
    """The calibrated model with the prefill of the same run's pp tests (`speed.calibrate_prefill`): the shallowest
    and the deepest, the newest of each depth. Unchanged where the run has none."""
    newest: dict[int, object] = {}
    for r in sorted(records, key=lambda r: r.timestamp):
        if r.ok and r.test.kind == "pp" and r.series == tg.series and r.params == tg.params:
            newest[r.test.depth] = r
    if not newest or not prompt.matmul_flops:
        return model
    lo, hi = newest[min(newest)], newest[max(newest)]
    cost = lambda r: speed.test_cost(geometry, p, prompt.all_weights, active, "pp", r.test.depth,  # noqa: E731
                                     r.test.n_tokens)
    return speed.calibrate_prefill(model, prompt.matmul_flops, (cost(lo), lo.avg_ts, lo.test.n_tokens),
                                   (cost(hi), hi.avg_ts, hi.test.n_tokens))
