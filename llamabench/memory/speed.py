"""What a token reads and computes: a decoded token at a depth, a ubatch of a prompt at a depth. Pure.

`ModelWork` holds what a model's tokens cost independent of the depth, from its tensors and its layer layout:
- the weight bytes: the per-layer tensors every token reads (dense), the routed experts (all of them; a decoded
  token reads `expert_used / expert_count` of them, a ubatch every expert one of its tokens picks), the output
  matrix (token_embd where tied). The input embedding lookup reads one row and is left out; an MTP (NextN) layer
  counts only where llama-server runs it (--spec-type draft-mtp);
- the matrix products: 2 FLOPs per weight a token multiplies by, the same classes;
- the attention of each layer that attends over a cache: its K and V row widths, its window (SWA), and 2 x n_head
  x (K + V head width) FLOPs per cached cell (Q.K and P.V; MLA: the compressed row as K, its first kv_lora_rank
  elements as V, llama.cpp's absorbed form); a layer that shares another's cache reads that one;
- the recurrent state, read and written once a decoded token (2x its bytes), and in a prompt updated token after
  token (its elements, the scan); the layers run (a kernel launch each).

`decode_cost` and `ubatch_cost` turn it into the bytes and FLOPs of one step; `memory.speed_model` prices them on a
machine. A ubatch multiplies every matrix by its tokens at once: a routed expert sees only the tokens that picked
it (n x used / count), which is why its products run below a dense matrix's rate (`matmul_small_flops`: FLOPs
divided by those tokens). Causal attention over a ubatch at start depth s: each token attends to s + its place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core import cache_types
from ..model.geometry import LayerKind, ModelGeometry
from ..model.gguf_keys import KV_LORA_RANK
from ..model.weights import WeightsBreakdown, breakdown, classify
from ..settings.params import Params


@dataclass(frozen=True)
class TokenCost:
    """One decoded token at one depth."""

    depth: int
    weights_bytes: int
    kv_bytes: int
    recurrent_bytes: int
    attention_flops: int
    matmul_flops: int = 0  # its matrix-vector products (a CPU's decode is bound by them)
    layers: int = 0  # layers run: a kernel launch and a sync each
    attention_scores: int = 0  # query head x cell pairs: one softmax exponential each

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.recurrent_bytes


@dataclass(frozen=True)
class UbatchCost:
    """One ubatch of a prompt: n tokens at once, the first at `depth`."""

    n_tokens: int
    depth: int
    weights_bytes: int  # every weight the ubatch touches, read once
    kv_bytes: int  # the cache rows it writes and reads (small beside the FLOPs)
    matmul_flops: int
    matmul_small_flops: float  # sum over matrices of their FLOPs / the tokens each multiplies at once
    attention_flops: int
    state_elements: int = 0  # recurrent state elements its tokens update, one after another (the scan)
    layers: int = 0
    attention_scores: int = 0  # query head x cell pairs: one softmax exponential each


@dataclass(frozen=True)
class AttentionLayer:
    k_bytes_per_cell: int  # with the run's K type
    v_bytes_per_cell: int
    window: int  # SWA: the cells it attends to at most; 0: every cell
    flops_per_cell: int
    heads: int  # query heads: a softmax score per head and cell


@dataclass(frozen=True)
class ModelWork:
    """What a model's tokens read and compute beside the depth (the module's text)."""

    dense_bytes: int
    expert_bytes: int
    output_bytes: int
    dense_flops: int  # per token, every per-layer matrix but the routed experts
    expert_flops: int  # per token if it used every routed expert
    output_flops: int
    expert_used: int
    expert_count: int
    state_bytes: int  # recurrent state read and written per token (2x its bytes)
    state_elements: int  # recurrent state elements a token updates (every recurrent layer's R and S)
    n_layer: int
    n_embd: int
    n_ctx_train: int
    # (layer, k width, v width, window, flops per cell, query heads) of each layer that attends over a cache
    attention: tuple[tuple[int, int, int, int, int, int], ...]
    mtp: bool = False  # the NextN layers run too (--spec-type draft-mtp)

    @property
    def expert_share(self) -> float:
        return self.expert_used / self.expert_count if self.expert_count else 1.0

    @property
    def decode_weight_bytes(self) -> int:
        return self.dense_bytes + round(self.expert_bytes * self.expert_share) + self.output_bytes

    @property
    def all_weight_bytes(self) -> int:
        return self.dense_bytes + self.expert_bytes + self.output_bytes

    def layers_of(self, settings: Params) -> tuple[AttentionLayer, ...]:
        return tuple(AttentionLayer(cache_types.row_bytes(settings.type_k, k),
                                    cache_types.row_bytes(settings.type_v, v) if v else 0, w, f, h)
                     for _, k, v, w, f, h in self.attention)


def model_work(meta, geometry: ModelGeometry, weights: WeightsBreakdown, *, mtp: bool = False) -> ModelWork:
    """A model's work from its tensor infos (FLOPs: element counts), `weights` (bytes: the file's, or a published size
    spread over them) and its geometry. `mtp`: the NextN layers run too (llama-server --spec-type draft-mtp)."""
    skip = set() if mtp else {layer.index for layer in geometry.mtp_layers}
    names = {t.name for t in meta.tensors}
    tied = "output.weight" not in names
    dense_bytes = expert_bytes = 0
    for il, classes in weights.per_layer.items():
        if il in skip:
            continue
        for cls, n in classes.items():
            if cls == "routed_experts":
                expert_bytes += n
            else:
                dense_bytes += n
    flops = {"dense": 0, "experts": 0, "output": 0}
    for t in meta.tensors:
        if sum(1 for d in t.shape if d > 1) < 2:
            continue  # a vector: norms, biases
        il, cls = classify(t.name)
        if il in skip or (cls == "embeddings" and not tied):
            continue
        part = "output" if il is None else "experts" if cls == "routed_experts" else "dense"
        flops[part] += 2 * math.prod(t.shape)
    elements = geometry.recurrent_r_width + geometry.recurrent_s_width
    recurrent = len([x for x in geometry.recurrent_layers if x.index not in skip])
    return ModelWork(dense_bytes, expert_bytes, weights.output_layer_bytes, flops["dense"], flops["experts"],
                     flops["output"], meta.arch_count("expert_used_count"), meta.arch_count("expert_count"),
                     2 * elements * cache_types.F32_BYTES * recurrent, elements * recurrent,
                     geometry.n_layer - len(skip), geometry.n_embd, geometry.n_ctx_train,
                     _attention(meta, geometry, skip), mtp)


def _attention(meta, geometry: ModelGeometry, skip: set[int]) -> tuple:
    """(layer, k width, v width, window, flops per cell, query heads) of every layer that attends over a cache."""
    by_index = {layer.index: layer for layer in (*geometry.layers, *geometry.mtp_layers)}
    out = []
    for layer in (*geometry.layers, *geometry.mtp_layers):
        if layer.index in skip:
            continue
        source = by_index.get(layer.kv_from) if layer.kind is LayerKind.SHARED else layer
        if source is None or not source.has_kv or not source.k_width:
            continue
        heads = max(1, source.n_head_kv)
        k_head = source.k_width // heads
        if source.kind is LayerKind.MLA:
            rank = meta.arch_count(KV_LORA_RANK) if KV_LORA_RANK else 0
            v_head = rank if 0 < rank < k_head else k_head
        else:
            v_head = source.v_width // heads if source.v_width else k_head
        window = geometry.n_swa if source.kind is LayerKind.SWA else 0
        out.append((layer.index, source.k_width, source.v_width, window, 2 * geometry.n_head * (k_head + v_head),
                    geometry.n_head))
    return tuple(out)


def decode_cost(work: ModelWork, settings: Params, depth: int, *, output: bool = True) -> TokenCost:
    """The token decoded at `depth`: its active weights, the KV rows of every cell it attends to, the state;
    `output` off: a prompt token that asks for no logits (no output matrix)."""
    kv = flops = scores = 0
    for layer in work.layers_of(settings):
        cells = min(depth, layer.window) if layer.window else depth
        kv += (layer.k_bytes_per_cell + layer.v_bytes_per_cell) * cells
        flops += layer.flops_per_cell * cells
        scores += layer.heads * cells
    matmul = work.dense_flops + round(work.expert_flops * work.expert_share) + (work.output_flops if output else 0)
    weights = work.decode_weight_bytes - (0 if output else work.output_bytes)
    return TokenCost(depth, weights, kv, work.state_bytes, flops, matmul, work.n_layer, scores)


def full_gqa_cost(geometry: ModelGeometry, settings: Params, work: ModelWork, depth: int) -> TokenCost:
    """The counterfactual: the same weights with every mixer layer a full-attention layer of this model."""
    row = (cache_types.row_bytes(settings.type_k, geometry.full_attention_k_width)
           + cache_types.row_bytes(settings.type_v, geometry.full_attention_v_width))
    n = len(geometry.mixer_layers)
    per_cell = 2 * geometry.n_head * 2 * _head_width(geometry)
    return TokenCost(depth, work.decode_weight_bytes, row * depth * n, 0, per_cell * depth * n,
                     work.dense_flops + round(work.expert_flops * work.expert_share) + work.output_flops, work.n_layer)


def _head_width(geometry: ModelGeometry) -> int:
    cached = [layer for layer in geometry.cached_layers if layer.n_head_kv]
    if not cached:
        return 0
    layer = max(cached, key=lambda x: x.k_width)
    return layer.k_width // layer.n_head_kv


def expert_hit_share(work: ModelWork, n_tokens: int) -> float:
    """The share of the routed experts at least one of n tokens picks (each picks used of count, taken as
    independent): 1 - (1 - used / count)^n."""
    if not work.expert_count:
        return 1.0
    return 1.0 - (1.0 - work.expert_share) ** n_tokens


def ubatch_cost(work: ModelWork, settings: Params, depth: int, n_tokens: int) -> UbatchCost:
    """A ubatch of `n_tokens` prompt tokens after `depth` cached ones: every dense weight and the experts its tokens
    pick, read once; each token's matrix products (the output matrix left out: llama-bench's prompt asks for the
    last token's logits only); the causal attention over the cells before each token; the KV rows it writes."""
    n = max(1, n_tokens)
    share = work.expert_share
    weights = work.dense_bytes + round(work.expert_bytes * expert_hit_share(work, n))
    expert_tokens = max(1.0, n * share) if work.expert_count else n
    matmul = n * (work.dense_flops + round(work.expert_flops * share))
    small = n * work.dense_flops / n + n * work.expert_flops * share / expert_tokens
    kv = flops = scores = 0
    for layer in work.layers_of(settings):
        row = layer.k_bytes_per_cell + layer.v_bytes_per_cell
        kv += row * (n + min(depth + n, layer.window or depth + n))  # writes its rows, reads the cells once a ubatch
        pairs = _attended(depth, n, layer.window)
        flops += layer.flops_per_cell * pairs
        scores += layer.heads * pairs
    return UbatchCost(n, depth, weights, kv, matmul, small, flops, n * work.state_elements, work.n_layer, scores)


def _attended(depth: int, n: int, window: int) -> int:
    """Query-cell pairs of n tokens after `depth` cached ones, causal: token i attends to depth + i + 1 cells
    (at most `window` where it is one)."""
    full = n * depth + n * (n + 1) // 2
    if not window:
        return full
    # sum over i of min(window, depth + i + 1)
    first_capped = max(0, window - depth - 1)  # tokens before the window binds
    below = min(n, first_capped)
    return below * depth + below * (below + 1) // 2 + (n - below) * window


def ubatches(settings: Params, n_prompt: int, depth: int) -> list[tuple[int, int]]:
    """(start depth, tokens) of each ubatch of an n_prompt prompt after `depth` cached tokens: llama.cpp splits a
    batch into ubatches of n_ubatch (capped at n_batch)."""
    size = max(1, min(settings.n_ubatch, settings.n_batch))
    out, start, left = [], depth, n_prompt
    while left > 0:
        n = min(size, left)
        out.append((start, n))
        start, left = start + n, left - n
    return out


# weights ------------------------------------------------------------------------------------------
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


def weights_of(meta, geometry: ModelGeometry, scale: WeightsScale = WeightsScale(),
               basis: str = "") -> WeightsBreakdown:
    """The weights breakdown of a model's tensor infos (a published size spread over them where `scale` says)."""
    recurrent = {layer.index for layer in geometry.layers if layer.has_recurrent_state}
    return breakdown(meta.tensors, geometry.n_layer, recurrent, basis=basis, scale_to_bytes=scale.bytes,
                     by_bytes=scale.by_bytes)


def weights_per_token(meta, geometry: ModelGeometry, *, scale_to_bytes: int | None = None, by_bytes: bool = False,
                      basis: str = "") -> tuple[WeightsBreakdown, int]:
    """The weights breakdown and the bytes one decoded token reads of them, the MTP layer left out (it runs only
    under --spec-type draft-mtp: `model_work(..., mtp=True)`)."""
    weights = weights_of(meta, geometry, WeightsScale(scale_to_bytes, by_bytes), basis)
    return weights, model_work(meta, geometry, weights).decode_weight_bytes


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


# several devices: what each layer of a decoded token reads ----------------------------------------
PCIE_LINK_GBPS = 16.0  # stated default between cards of one machine: PCIe 4.0 x16 (32 GB/s peak) at half
ACTIVATION_BYTES = 4  # f32: what crosses a device boundary per token and embedding element


@dataclass(frozen=True)
class Link:
    """The link a token's activations cross between two consecutive devices."""

    bandwidth: float  # bytes/s
    latency_s: float = 0.0  # per hop: a network round trip for an RPC host
    basis: str = ""


def layer_token_costs(geometry: ModelGeometry, settings: Params, weights: WeightsBreakdown, work: ModelWork,
                      depth: int) -> dict[int, TokenCost]:
    """What the token decoded at `depth` reads per layer (index n_layer: the output layer), as `decode_cost` counts
    it for the whole model: each layer's active weights, KV rows and recurrent state, one layer each."""
    share = work.expert_share
    state = 2 * (geometry.recurrent_r_width + geometry.recurrent_s_width) * cache_types.F32_BYTES
    out: dict[int, TokenCost] = {}
    recurrent = {layer.index for layer in geometry.recurrent_layers}
    skip = set() if work.mtp else {layer.index for layer in geometry.mtp_layers}
    attends = {x[0]: layer for x, layer in zip(work.attention, work.layers_of(settings))}
    layer_bytes = work.dense_bytes + work.expert_bytes * share
    flops_per_byte = (work.dense_flops + work.expert_flops * share) / layer_bytes if layer_bytes else 0.0
    for il in range(weights.n_layer):
        if il in skip:
            continue
        w = sum(round(n * share) if cls == "routed_experts" else n for cls, n in weights.per_layer.get(il, {}).items())
        kv = flops = scores = 0
        if il in attends:
            layer = attends[il]
            cells = min(depth, layer.window) if layer.window else depth
            kv = (layer.k_bytes_per_cell + layer.v_bytes_per_cell) * cells
            flops, scores = layer.flops_per_cell * cells, layer.heads * cells
        # the layer's matrix-vector FLOPs: its share of the model's, by its bytes
        out[il] = TokenCost(depth, w, kv, state if il in recurrent else 0, flops, round(w * flops_per_byte), 1, scores)
    out[weights.n_layer] = TokenCost(depth, weights.output_layer_bytes, 0, 0, 0, work.output_flops, 0)
    return out
