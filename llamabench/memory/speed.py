"""What one decoded token must read and compute, and a two-ceiling speed model built on it. Pure.

Bytes per decoded token at depth d:
- active weights: every per-layer tensor but the routed experts, plus `expert_used_count /
  expert_count` of the routed experts, plus the output matrix (token_embd again when tied);
  the input embedding lookup reads one row and is left out;
- KV read: each full-attention layer's K and V rows for d cells, each SWA layer's for
  min(d, window), MLA's compressed row for d cells;
- recurrent state: read and written once (2x its bytes).
Attention work at depth d: 4 x n_head x head_dim FLOPs per cached cell and layer (Q.K and P.V).

Time per token = bytes / bandwidth + attention FLOPs / compute. Both ceilings come from the machine
(a measured copy bandwidth, a card's published figures) times efficiency factors, or are
calibrated from two measured depths (`calibrate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core import cache_types
from ..model.geometry import LayerKind, ModelGeometry
from ..model.weights import WeightsBreakdown, breakdown, classify
from ..settings.cards import CARDS, PREFILL_PP512, PREFILL_SOURCE, Card, card  # noqa: F401 - the card table, as roofline reads it
from ..settings.params import Params

BANDWIDTH_EFFICIENCY = 0.70  # llama.cpp decode usually reaches 60-80% of a GPU's peak bandwidth (stated default)
COMPUTE_EFFICIENCY = 0.30  # attention at depth reaches a fraction of the FP32 peak (stated default)


@dataclass(frozen=True)
class TokenCost:
    """One decoded token at one depth."""

    depth: int
    weights_bytes: int
    kv_bytes: int
    recurrent_bytes: int
    attention_flops: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.recurrent_bytes


def active_weight_bytes(weights: WeightsBreakdown, expert_used: int, expert_count: int) -> int:
    """Weights one decoded token reads: dense tensors, shared experts, the used share of routed experts, output."""
    share = expert_used / expert_count if expert_count else 1.0
    total = 0
    for classes in weights.per_layer.values():
        for cls, n in classes.items():
            total += round(n * share) if cls == "routed_experts" else n
    total += weights.output_layer_bytes
    return total


@dataclass(frozen=True)
class WeightsScale:
    """A published file size the tensors are spread over (None: their own bytes), by their bytes in their types or
    by element count."""

    bytes: int | None = None
    by_bytes: bool = False


def weights_per_token(meta, geometry: ModelGeometry, *, scale_to_bytes: int | None = None, by_bytes: bool = False,
                      basis: str = "") -> tuple[WeightsBreakdown, int]:
    """The weights breakdown of a model's tensor infos and the bytes one decoded token reads of them (a published
    size spread over the tensors by count, or `by_bytes` by their bytes in their types)."""
    recurrent = {layer.index for layer in geometry.layers if layer.has_recurrent_state}
    weights = breakdown(meta.tensors, geometry.n_layer, recurrent, basis=basis, scale_to_bytes=scale_to_bytes,
                        by_bytes=by_bytes)
    return weights, active_weight_bytes(weights, meta.arch_count("expert_used_count"), meta.arch_count("expert_count"))


def _head_dims(geometry: ModelGeometry) -> int:
    """n_head x head_dim of an attention layer: the width Q.K and P.V run over per cached cell."""
    cached = [layer for layer in geometry.cached_layers if layer.n_head_kv]
    if not cached:
        return 0
    layer = max(cached, key=lambda x: x.k_width)
    return geometry.n_head * (layer.k_width // layer.n_head_kv)


def token_cost(geometry: ModelGeometry, settings: Params, active_weights: int, depth: int,
               *, as_full_gqa: bool = False) -> TokenCost:
    """Bytes and attention FLOPs of the token decoded at `depth`; `as_full_gqa`: every mixer layer full attention."""
    head_dims = _head_dims(geometry)
    kv = flops = 0
    if as_full_gqa:
        row = (cache_types.row_bytes(settings.type_k, geometry.full_attention_k_width)
               + cache_types.row_bytes(settings.type_v, geometry.full_attention_v_width))
        n = len(geometry.mixer_layers)
        return TokenCost(depth, active_weights, row * depth * n, 0, 4 * head_dims * depth * n)
    for layer in geometry.cached_layers:
        cells = min(depth, geometry.n_swa) if layer.kind is LayerKind.SWA else depth
        k = cache_types.row_bytes(settings.type_k, layer.k_width)
        v = cache_types.row_bytes(settings.type_v, layer.v_width) if layer.v_width else 0
        kv += (k + v) * cells
        flops += 4 * head_dims * cells
    state = (geometry.recurrent_r_width + geometry.recurrent_s_width) * cache_types.F32_BYTES
    recurrent = 2 * state * len(geometry.recurrent_layers)
    return TokenCost(depth, active_weights, kv, recurrent, flops)


def prefill_cost(geometry: ModelGeometry, settings: Params, all_weights: int, active_weights: int,
                 depth: int, n_tokens: int) -> TokenCost:
    """Per prompt token of a pp test at `depth`: every weight once per ubatch (a ubatch of hundreds of tokens
    touches nearly all experts), the attention over the cells before it, the KV row it writes."""
    n_ubatch = max(1, min(settings.n_ubatch, settings.n_batch, n_tokens))  # llama.cpp caps n_ubatch at n_batch
    ubatches = -(-n_tokens // n_ubatch)
    weights = round(max(all_weights, active_weights) * ubatches / n_tokens)
    middle = token_cost(geometry, settings, 0, depth + n_tokens // 2)
    per_cell_kv = sum(cache_types.row_bytes(settings.type_k, layer.k_width)
                      + (cache_types.row_bytes(settings.type_v, layer.v_width) if layer.v_width else 0)
                      for layer in geometry.cached_layers)
    return TokenCost(depth, weights, round(middle.kv_bytes / n_ubatch) + per_cell_kv,
                     round(middle.recurrent_bytes / n_ubatch), middle.attention_flops)


def test_cost(geometry: ModelGeometry, settings: Params, all_weights: int, active_weights: int,
              kind: str, depth: int, n_tokens: int) -> TokenCost:
    """The average token of a llama-bench test: tg at its middle depth, pp per prompt token."""
    if kind == "pp":
        return prefill_cost(geometry, settings, all_weights, active_weights, depth, n_tokens)
    return token_cost(geometry, settings, active_weights, depth + n_tokens // 2)


@dataclass(frozen=True)
class SpeedModel:
    bandwidth: float  # bytes/s the decode reaches (peak x efficiency, or calibrated)
    compute: float  # FLOP/s the attention reaches
    basis: str  # where the two numbers come from, in words
    prefill: float | None = None  # FLOP/s of a prompt's matrix products in a ubatch; None: no figure for it
    prefill_basis: str = ""
    prefill_attention: float | None = None  # FLOP/s of a prompt's attention (None: `compute`, the decode's)

    def prefill_seconds(self, cost: TokenCost, matmul_flops: int) -> float:
        """One prompt token of a ubatch: its share of the bytes, its matrix products and its attention."""
        attention = self.prefill_attention or self.compute
        return cost.total_bytes / self.bandwidth + cost.attention_flops / attention + matmul_flops / self.prefill

    def seconds(self, cost: TokenCost) -> float:
        return cost.total_bytes / self.bandwidth + cost.attention_flops / self.compute

    def tokens_per_second(self, cost: TokenCost) -> float:
        return 1.0 / self.seconds(cost)


def calibrate(a: TokenCost, ts_a: float, b: TokenCost, ts_b: float) -> SpeedModel:
    """The bandwidth and compute that make the model hit two measured decode speeds exactly.

    t = bytes / BW + flops / F is linear in (1/BW, 1/F): two depths give two equations. Where they
    are degenerate or give a negative term, the whole time is put on the bytes.
    """
    ta, tb = 1.0 / ts_a, 1.0 / ts_b
    det = a.total_bytes * b.attention_flops - b.total_bytes * a.attention_flops
    if det:
        inv_bw = (ta * b.attention_flops - tb * a.attention_flops) / det
        inv_f = (a.total_bytes * tb - b.total_bytes * ta) / det
        if inv_bw > 0 and inv_f > 0:
            return SpeedModel(1 / inv_bw, 1 / inv_f, f"calibrated on tg at depths {a.depth} and {b.depth}")
    return SpeedModel(a.total_bytes / ta, float("inf"), f"calibrated on tg at depth {a.depth} (bytes only)")


def model_for_card(c: Card, *, bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY,
                   compute_efficiency: float = COMPUTE_EFFICIENCY) -> SpeedModel:
    rate, basis = prefill_rate(c, bandwidth_efficiency, compute_efficiency)
    return SpeedModel(c.bandwidth_gbps * 1e9 * bandwidth_efficiency, c.fp32_tflops * 1e12 * compute_efficiency,
                      f"{c.name}: {c.bandwidth_gbps:g} GB/s x {bandwidth_efficiency:g}, "
                      f"{c.fp32_tflops:g} FP32 TFLOPS x {compute_efficiency:g} ({c.source})", rate, basis)


# prefill ----------------------------------------------------------------------------------------
# The published reference run (settings.cards.PREFILL_PP512): Llama 3 8B, whose every prompt token multiplies by
# 32 x (4096x4096 + 2 x 4096x1024 + 4096x4096 + 3 x 4096x14336) weights plus the 4096x128256 output matrix,
# 2 FLOPs each; its Q4_K_M file is 4.58 GiB; pp512's middle token attends over 256 cells of 32 layers of 32 x 128.
REFERENCE_MATMUL_FLOPS = 2 * (32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 4096 * 128256)
REFERENCE_WEIGHT_BYTES = round(4.58 * 2**30)
REFERENCE_ATTENTION_FLOPS = 4 * 32 * 128 * 256 * 32
REFERENCE_UBATCH = 512


def _reference_rate(c: Card, pp512: float, bandwidth_efficiency: float, compute_efficiency: float) -> float | None:
    """The FLOP/s of the matrix products that make this model hit the card's published pp512 exactly: its time per
    token less the weights read once per ubatch and the attention, both as the model prices them."""
    matmul_s = (1 / pp512 - REFERENCE_WEIGHT_BYTES / REFERENCE_UBATCH / (c.bandwidth_gbps * 1e9 * bandwidth_efficiency)
                - REFERENCE_ATTENTION_FLOPS / (c.fp32_tflops * 1e12 * compute_efficiency))
    return REFERENCE_MATMUL_FLOPS / matmul_s if matmul_s > 0 else None


def prefill_rate(c: Card, bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY,
                 compute_efficiency: float = COMPUTE_EFFICIENCY) -> tuple[float | None, str]:
    """The card's matrix-product FLOP/s in a prompt, and its basis: its own published pp512, or the lowest ratio to
    the FP32 figure of a measured card of its backend (of any measured card where its backend has none)."""
    if c.id in PREFILL_PP512:
        rate = _reference_rate(c, PREFILL_PP512[c.id], bandwidth_efficiency, compute_efficiency)
        return rate, f"from the card's published pp512, {PREFILL_PP512[c.id]:,.0f} t/s ({PREFILL_SOURCE})"
    ratios = {}
    for ref in (card(i) for i in PREFILL_PP512):
        rate = _reference_rate(ref, PREFILL_PP512[ref.id], bandwidth_efficiency, compute_efficiency)
        if rate:
            ratios.setdefault(ref.backend, []).append((rate / (ref.fp32_tflops * 1e12), ref.id))
    pool = ratios.get(c.backend) or [r for rs in ratios.values() for r in rs]
    if not pool:
        return None, ""
    ratio, ref_id = min(pool)
    return (c.fp32_tflops * 1e12 * ratio,
            f"{c.fp32_tflops:g} FP32 TFLOPS x {ratio:.2f}, the lowest such ratio of a card with a published pp512: "
            f"{ref_id}, {PREFILL_SOURCE}")


def calibrate_prefill(model: SpeedModel, matmul: int, lo: tuple[TokenCost, float, int],
                      hi: tuple[TokenCost, float, int]) -> SpeedModel:
    """`model` with the prefill that hits two measured pp tests (a prompt token's cost, its t/s, the test's length)
    exactly: time per prompt token = bytes / bandwidth + matmul / R_m + attention / R_a, linear in 1/R_m and 1/R_a.
    At one depth (or where two give a negative term): R_m alone, the attention at the decode's compute. Unchanged
    where the bytes alone take the whole time."""
    def rest(cost: TokenCost, ts: float) -> float:
        return 1 / ts - cost.total_bytes / model.bandwidth

    (c_lo, ts_lo, n), (c_hi, ts_hi, _) = lo, hi
    t_lo, t_hi = rest(c_lo, ts_lo), rest(c_hi, ts_hi)
    if c_hi.attention_flops != c_lo.attention_flops:
        inv_a = (t_hi - t_lo) / (c_hi.attention_flops - c_lo.attention_flops)
        inv_m = (t_lo - c_lo.attention_flops * inv_a) / matmul
        if inv_a > 0 and inv_m > 0:
            return replace(model, prefill=1 / inv_m, prefill_attention=1 / inv_a,
                           prefill_basis=f"calibrated on pp{n} at depths {c_lo.depth} and {c_hi.depth} "
                                         f"({ts_lo:.1f} and {ts_hi:.1f} t/s)")
    matmul_s = t_lo - c_lo.attention_flops / model.compute
    if matmul_s <= 0:
        return model
    return replace(model, prefill=matmul / matmul_s,
                   prefill_basis=f"calibrated on pp{n} at depth {c_lo.depth} ({ts_lo:.1f} t/s), attention as the "
                                 "decode's")


def matmul_flops(meta, geometry: ModelGeometry) -> int:
    """FLOPs of the matrix products one prompt token runs: 2 per weight it multiplies by, every matrix of the
    layers (expert_used / expert_count of the routed experts) and the output matrix (token_embd where tied); not
    the embedding lookup, the vectors (norms, biases) or an MTP layer, which the main pass leaves out."""
    used, count = meta.arch_count("expert_used_count"), meta.arch_count("expert_count")
    share = used / count if count else 1.0
    skip = {layer.index for layer in geometry.mtp_layers}
    tied = not any(t.name == "output.weight" for t in meta.tensors)
    total = 0.0
    for t in meta.tensors:
        if sum(1 for d in t.shape if d > 1) < 2:
            continue
        il, cls = classify(t.name)
        if il in skip or (cls == "embeddings" and not tied):
            continue
        n = math.prod(t.shape)
        total += n * share if cls == "routed_experts" else n
    return 2 * round(total)


def prefill_seconds(geometry: ModelGeometry, settings: Params, all_weights: int, active_weights: int, matmul: int,
                    model: SpeedModel, n_prompt: int, depth: int = 0) -> float | None:
    """Seconds to prefill `n_prompt` tokens onto `depth` cached ones, a ubatch at a time: each ubatch reads every
    weight once, runs its tokens' matrix products and their attention over the cells before them, and writes
    their KV rows. None where the model has no prefill figure."""
    if not model.prefill:
        return None
    seconds, start, left = 0.0, depth, n_prompt
    while left > 0:
        n = min(max(1, min(settings.n_ubatch, settings.n_batch)), left)  # llama.cpp caps n_ubatch at n_batch
        per_token = prefill_cost(geometry, settings, all_weights, active_weights, start, n)
        seconds += n * model.prefill_seconds(per_token, matmul)
        start, left = start + n, left - n
    return seconds


def tg_groups(records) -> list[list]:
    """Measured tg records (results.records.BenchRecord) that one speed model may be calibrated on: same
    machine, same parameters (n_ctx, cache types, -ngl, threads, batch sizes...) and the same test length;
    each group sorted by depth, one record per depth, groups with the most depths first."""
    groups: dict[tuple, dict[int, object]] = {}
    for r in sorted(records, key=lambda r: r.timestamp):
        if r.ok and r.test.kind == "tg":
            key = (r.series, r.params, r.test.n_tokens)
            groups.setdefault(key, {})[r.test.depth] = r  # the newest per depth
    ordered = [[g[d] for d in sorted(g)] for g in groups.values()]
    return sorted(ordered, key=len, reverse=True)


# several cards: the layer split's decode time ---------------------------------------------------
PCIE_LINK_GBPS = 16.0  # stated default between cards of one machine: PCIe 4.0 x16 (32 GB/s peak) at half
ACTIVATION_BYTES = 4  # f32: what crosses a device boundary per token and embedding element


@dataclass(frozen=True)
class Link:
    """The link a token's activations cross between two consecutive devices."""

    bandwidth: float  # bytes/s
    latency_s: float = 0.0  # per hop: a network round trip for an RPC host
    basis: str = ""


def layer_token_costs(geometry: ModelGeometry, settings: Params, weights: WeightsBreakdown, expert_used: int,
                      expert_count: int, depth: int) -> dict[int, TokenCost]:
    """What the token decoded at `depth` reads per layer (index n_layer: the output layer), as `token_cost`
    counts it for the whole model: each layer's active weights, KV rows and recurrent state."""
    share = expert_used / expert_count if expert_count else 1.0
    head_dims = _head_dims(geometry)
    state = 2 * (geometry.recurrent_r_width + geometry.recurrent_s_width) * cache_types.F32_BYTES
    out: dict[int, TokenCost] = {}
    cached = {layer.index: layer for layer in geometry.cached_layers}
    recurrent = {layer.index for layer in geometry.recurrent_layers}
    for il in range(weights.n_layer):
        w = sum(round(n * share) if cls == "routed_experts" else n for cls, n in weights.per_layer.get(il, {}).items())
        kv = flops = 0
        if il in cached:
            layer = cached[il]
            cells = min(depth, geometry.n_swa) if layer.kind is LayerKind.SWA else depth
            kv = (cache_types.row_bytes(settings.type_k, layer.k_width)
                  + (cache_types.row_bytes(settings.type_v, layer.v_width) if layer.v_width else 0)) * cells
            flops = 4 * head_dims * cells
        out[il] = TokenCost(depth, w, kv, state if il in recurrent else 0, flops)
    out[weights.n_layer] = TokenCost(depth, weights.output_layer_bytes, 0, 0, 0)
    return out


def split_seconds(costs: dict[int, TokenCost], devices: tuple[int | None, ...], models: tuple[SpeedModel, ...],
                  link: Link, n_embd: int) -> tuple[float, tuple[float, ...]]:
    """Seconds per decoded token over a layer split (`layer_split.layer_devices`), and each card's share.

    A decoded token passes the cards one after another (pipeline parallelism overlaps only the ubatches of a
    prompt): each card reads its own layers' bytes at its own bandwidth, and each hop from one device to
    the next moves the token's activations (n_embd f32) over the link and pays its latency.
    """
    per_card = [0.0] * len(models)
    for il, cost in costs.items():
        d = devices[il] if il < len(devices) else None
        if d is not None:
            per_card[d] += models[d].seconds(cost)
    used = [d for d in dict.fromkeys(x for x in devices if x is not None)]
    hops = max(0, len(used) - 1)
    transfer = hops * (n_embd * ACTIVATION_BYTES / link.bandwidth + link.latency_s)
    return sum(per_card) + transfer, tuple(per_card)
