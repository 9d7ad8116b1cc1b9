"""Which layer caches what: the layer layout, as llama.cpp derives it from GGUF metadata.

Pure: takes a `ModelMetadata`, returns a `ModelGeometry` (`geometry`). The generic rule reads the standard keys
(read as llama.cpp reads them: `hparams`); an architecture's row in `architectures` names its exceptions (SWA
pattern and window, MLA, KV sharing, recurrent layers and state, NextN layers, indexer caches, extra layers).
The rules follow the llama.cpp vendored in llama-cpp-python 0.3.36: `llama_model_base::load_hparams`
(src/llama-model.cpp:1298-1492), each family's `load_arch_hparams` (src/models/<arch>.cpp),
`llama_model::create_memory` (src/llama-model.cpp:2352-2882), the cache constructors (src/llama-kv-cache*.cpp,
src/llama-memory-*.cpp) and `llama_hparams` (src/llama-hparams.cpp).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import BadModelFile
from . import architectures
from . import gguf_keys as K
from .architectures import Architecture, Indexer, KvSharing, LayoutRule, RecurrentState, SwaRule
from .geometry import LayerGeometry, LayerKind, ModelGeometry
from .hparams import LLAMA_MAX_LAYERS, Heads, LayerCounts, bool_array, count_layers, flag_array, int_key, read_heads
from .metadata import ModelMetadata, cut

GEMMA3N_KV_LAYERS = 20  # src/models/gemma3n.cpp:7: n_layer_kv_from_start = 20
GLM_DSA_LONG_CONTEXT = 1048576  # src/models/glm-dsa.cpp:59: below it every layer owns an indexer (GLM 5, 5.1)
GLM_5_2_INDEXER_LAYERS = 78  # GLM_5_2_DEFAULT_INDEXER_TYPES (src/models/glm-dsa.cpp:6-27): 1, 1, then 1, 0, 0, 0


@dataclass(frozen=True)
class _Flags:
    """Per layer (n_layer_all of them): SWA, recurrent, in the main attention cache; and the window."""

    is_swa: tuple[bool, ...]
    is_recr: tuple[bool, ...]
    has_kv: tuple[bool, ...]  # the attention filter, NextN filter applied (KV sharing is not: see _kv_from)
    n_swa: int


def _recurrent_flags(meta: ModelMetadata, row: Architecture, heads: Heads, counts: LayerCounts) -> list[bool]:
    """is_recr per layer: each hybrid family's load_arch_hparams."""
    n_all, n_main, kv, ff = counts.n_all, counts.n_main, heads.n_head_kv, heads.n_ff
    rule = row.layout
    if rule is LayoutRule.INTERVAL:
        flags = bool_array(meta, K.RECURRENT_LAYERS, counts.n_block)
        if flags is None:
            interval = int_key(meta, K.FULL_ATTENTION_INTERVAL, row.recurrent_interval)
            if interval == 0:
                raise BadModelFile(f"{meta.source}: {meta.architecture}.full_attention_interval is 0")
            flags = tuple((i < n_main) and ((i + 1) % interval != 0) for i in range(n_all))
        return list(flags)
    if rule is LayoutRule.KV_ZERO:  # glm5-next marks NextN layers too (glm5-next.cpp:21-23), but filters them out
        return [i < n_main and kv[i] == 0 for i in range(n_all)]
    if rule is LayoutRule.NEMOTRON_H:
        return [i < n_main and kv[i] == 0 and ff[i] == 0 for i in range(n_all)]
    if rule in (LayoutRule.PARALLEL, LayoutRule.RECURRENT):
        return [True] * n_all
    return [False] * n_all


def _attention_filter(row: Architecture, heads: Heads, counts: LayerCounts, is_recr: list[bool]) -> list[bool]:
    """Which layers the main attention cache holds (create_memory's filters, src/llama-model.cpp:2679-2804)."""
    rule = row.layout
    if rule in (LayoutRule.RECURRENT, LayoutRule.NO_CACHE):
        return [False] * counts.n_all
    if rule is LayoutRule.PARALLEL:
        attends = [True] * counts.n_all
    elif rule is LayoutRule.NEMOTRON_H:
        attends = [not r and f == 0 for r, f in zip(is_recr, heads.n_ff)]
    else:
        attends = [not r for r in is_recr]
    # NextN layers: filtered out (il < n_layer()) unless the row's memory has no such filter, or the extra layer
    # is graniteswitch's router (router_layer >= 0 turns the filter off, src/llama-model.cpp:2796-2798)
    keep_extra = row.nextn_cached or counts.router
    return [a and (il < counts.n_main or keep_extra) for il, a in enumerate(attends)]


def _swa_pattern(meta: ModelMetadata, row: Architecture, counts: LayerCounts) -> list[bool]:
    """load_swa_pattern (src/llama-model.cpp:3434-3441): a bool array as is, else set_swa_pattern with the period
    (src/llama-hparams.cpp:8-22); rows without a default period require the array (get_arr)."""
    arch, value = meta.architecture, meta.arch_key(K.SLIDING_WINDOW_PATTERN)
    if isinstance(value, tuple):
        if len(value) > LLAMA_MAX_LAYERS:
            raise BadModelFile(f"{meta.source}: {arch}.sliding_window_pattern has {len(value)} entries; llama.cpp "
                               f"takes at most {LLAMA_MAX_LAYERS}")
        if len(value) != counts.n_block and row.swa_pattern is not None:
            raise BadModelFile(f"{meta.source}: {arch}.sliding_window_pattern has {len(value)} entries for "
                               f"{counts.n_block} layers")
        flags = [bool(v) for v in value[: counts.n_all]]
        return flags + [False] * (counts.n_all - len(flags))
    if row.swa_pattern is None:
        raise BadModelFile(f"{meta.source}: {arch}.sliding_window_pattern must be a per-layer array "
                           f"(llama.cpp reads it with get_arr)")
    period = int_key(meta, K.SLIDING_WINDOW_PATTERN, row.swa_pattern)
    if row.swa_dense_first:
        return [il < counts.n_main and (period == 0 or il % period != 0) for il in range(counts.n_all)]
    return [il < counts.n_main and (period == 0 or il % period < period - 1) for il in range(counts.n_all)]


def _swa(meta: ModelMetadata, row: Architecture, counts: LayerCounts, is_recr: list[bool]) -> tuple[list[bool], int]:
    """(is_swa per layer, n_swa): the row's SwaRule, pattern and window."""
    none, rule = [False] * counts.n_all, row.swa
    if rule is SwaRule.NONE:  # attention.sliding_window is not read (or, phi3, read and dropped)
        return none, 0
    key = meta.arch_key(K.SLIDING_WINDOW)
    window = int_key(meta, K.SLIDING_WINDOW, 0)
    if rule in (SwaRule.IF_WINDOW, SwaRule.ATTENTION) and window == 0:
        return none, 0
    if rule is SwaRule.UNLESS_ZERO and key is not None and window == 0:
        return none, 0
    if row.swa_only_with_layers and counts.n_main != row.swa_only_with_layers:
        return none, 0
    if rule is SwaRule.ATTENTION:  # src/models/lfm2.cpp:26-31
        flags = [il < counts.n_main and not is_recr[il] for il in range(counts.n_all)]
    else:
        flags = _swa_pattern(meta, row, counts)
    n_swa = row.swa_window_fixed or (window if key is not None else row.swa_window_default)
    if not any(flags) and rule is not SwaRule.ATTENTION:  # a hybrid's SWA cache may hold no layer
        # create_memory asserts is_swa_any() once swa_type is set (src/llama-model.cpp:2806-2807)
        raise BadModelFile(f"{meta.source}: {meta.architecture} has a sliding window but no layer is marked SWA")
    return flags, n_swa


def _flags(meta: ModelMetadata, row: Architecture, heads: Heads, counts: LayerCounts) -> _Flags:
    is_recr = _recurrent_flags(meta, row, heads, counts)
    has_kv = _attention_filter(row, heads, counts, is_recr)
    is_swa, n_swa = _swa(meta, row, counts, is_recr)
    return _Flags(tuple(is_swa), tuple(is_recr), tuple(has_kv), n_swa)


def _kv_from(meta: ModelMetadata, row: Architecture, flags: _Flags, n_all: int) -> list[int | None]:
    """KV sharing: the layer each layer's cache is read from (None: its own). Layers from n_layer_kv_from_start on
    own none (src/llama-hparams.cpp:321-332) and read start - 2 if SWA, else start - 1 (llama-model.cpp:2780-2790)."""
    if row.kv_sharing is KvSharing.NONE:
        return [None] * n_all
    if row.kv_sharing is KvSharing.FIRST_20:
        start = GEMMA3N_KV_LAYERS
    else:  # src/models/gemma4.cpp:8-11
        shared = int_key(meta, K.SHARED_KV_LAYERS, 0)
        if shared > n_all:
            raise BadModelFile(f"{meta.source}: {meta.architecture}.shared_kv_layers ({shared}) is above "
                               f"block_count ({n_all})")
        start = n_all - shared
    if start < n_all and start < 2:
        raise BadModelFile(f"{meta.source}: {meta.architecture} shares KV from layer {start}; llama.cpp asserts at "
                           "least 2 layers own a cache")
    return [None if il < start else start - (2 if flags.is_swa[il] else 1) for il in range(n_all)]


def _widths(heads: Heads, flags: _Flags, il: int) -> tuple[int, int]:
    """(K, V) widths of layer il: the SWA head sizes on SWA layers."""
    hk, hv = (heads.head_k_swa, heads.head_v_swa) if flags.is_swa[il] else (heads.head_k, heads.head_v)
    return hk * heads.n_head_kv[il], hv * heads.n_head_kv[il]


def _kind(flags: _Flags, il: int, n_main: int, is_mla: bool, kv_from: int | None) -> LayerKind:
    has_kv, is_recr = flags.has_kv[il], flags.is_recr[il] and il < n_main
    if has_kv and kv_from is not None:
        return LayerKind.SHARED
    if has_kv and is_recr:
        return LayerKind.FULL_RECURRENT
    if has_kv:
        return LayerKind.MLA if is_mla else (LayerKind.SWA if flags.is_swa[il] else LayerKind.FULL)
    return LayerKind.RECURRENT if is_recr else LayerKind.NONE


def _layers(meta: ModelMetadata, heads: Heads, flags: _Flags, is_mla: bool, counts: LayerCounts,
            extras: tuple[list[int | None], list[tuple[int, int]], list[int]]) -> list[LayerGeometry]:
    """The trunk layers, then the NextN layers the main cache holds."""
    kv_from, index, ple = extras
    layers = []
    for il in range(counts.n_all):
        kind = _kind(flags, il, counts.n_main, is_mla, kv_from[il])
        if il >= counts.n_main and kind is LayerKind.NONE:
            continue  # a NextN layer left to the MTP context
        k_width, v_width = _widths(heads, flags, il)
        if kind is LayerKind.SHARED or not flags.has_kv[il]:
            k_width = v_width = 0
        elif is_mla:
            v_width = 0
        # a trunk layer that attends needs heads; a NextN layer with none gets llama.cpp's empty row (it allocates one)
        if flags.has_kv[il] and kind is not LayerKind.SHARED and k_width == 0 and il < counts.n_main:
            raise BadModelFile(f"{meta.source}: layer {il} caches KV but has no KV heads or a zero head size")
        shared = kv_from[il] if kind is LayerKind.SHARED else None
        p_width = ple[il] if kind in (LayerKind.RECURRENT, LayerKind.FULL_RECURRENT) else 0
        layers.append(LayerGeometry(il, kind, heads.n_head_kv[il], k_width, v_width, shared, *index[il], p_width))
    return layers


def _mtp_layers(heads: Heads, flags: _Flags, is_mla: bool, counts: LayerCounts,
                main: list[LayerGeometry]) -> tuple[LayerGeometry, ...]:
    """The NextN layers the main cache leaves to the MTP context, which caches each as a plain attention layer
    (src/llama-model.cpp:2661-2667 and 2792-2804: a llama_kv_cache filtered to il >= n_layer(); no recurrent
    state, whatever the trunk's). MLA keeps its K-only row."""
    held = {layer.index for layer in main}
    out = []
    for il in range(counts.n_main, counts.n_all):
        if il in held:
            continue
        k_width, v_width = _widths(heads, flags, il)
        kind = LayerKind.MLA if is_mla else LayerKind.SWA if flags.is_swa[il] else LayerKind.FULL
        out.append(LayerGeometry(il, kind, heads.n_head_kv[il], k_width, 0 if is_mla else v_width))
    return tuple(out)


def _indexer_types(meta: ModelMetadata, row: Architecture, counts: LayerCounts) -> tuple[bool, ...]:
    """is_indexer_full over the trunk: attention.indexer.types (a scalar, or n_layer() entries), else the default."""
    n = counts.n_main
    if row.indexer is Indexer.DSA_TYPES and int_key(meta, K.CONTEXT_LENGTH, 0) >= GLM_DSA_LONG_CONTEXT:
        # GLM_5_2_DEFAULT_INDEXER_TYPES (src/models/glm-dsa.cpp:6-27,59-64): layers 0, 1, then every 4th from 2
        default = tuple(il < GLM_5_2_INDEXER_LAYERS and (il < 2 or (il - 2) % 4 == 0) for il in range(n))
    else:
        default = (row.indexer is not Indexer.TOP_K,) * n  # hy_v4 defaults to none (load_hparams, line 1385)
    return flag_array(meta, K.INDEXER_TYPES, n, default)


def _indexer(meta: ModelMetadata, row: Architecture, heads: Heads, flags: _Flags, counts: LayerCounts,
             is_mla: bool) -> list[tuple[int, int]]:
    """(K, V) widths of each layer's indexer row (src/llama-kv-cache-dsa.cpp:38-53, -msa.cpp:39-49,
    llama-memory-hybrid-idx.cpp:53-73): one head of indexer.key_length; V of value_length unless the copied
    hparams are MLA (K-only), and never in the hybrid-idx cache."""
    none = [(0, 0)] * counts.n_all
    kind = row.indexer
    if kind is None or (kind is Indexer.TOP_K and int_key(meta, K.INDEXER_TOP_K, 0) == 0):
        return none
    width = int_key(meta, K.INDEXER_KEY_LENGTH, required=True)
    if kind is Indexer.KPOOL and int_key(meta, K.INDEXER_KPOOL, 0) > 0:
        width *= 3  # the glm5-next indexer caches key, gate and pooled values (llama-memory-hybrid-idx.cpp:57)
    k_only = is_mla or kind in (Indexer.QSA, Indexer.KPOOL)
    if kind is Indexer.MSA:
        lead = int_key(meta, K.LEADING_DENSE_BLOCK_COUNT, 0)
        chosen = [flags.has_kv[il] and il >= lead for il in range(counts.n_all)]
    else:
        trunk = _indexer_types(meta, row, counts) if kind in (Indexer.DSA_TYPES, Indexer.KPOOL, Indexer.TOP_K) \
            else (True,) * counts.n_main
        if kind is Indexer.TOP_K and not trunk[0]:
            raise BadModelFile(f"{meta.source}: {meta.architecture}.attention.indexer.types must mark layer 0 "
                               "(hy-v4.cpp:60-62)")
        chosen = [il < counts.n_main and flags.has_kv[il] and trunk[il] for il in range(counts.n_all)]
    out = []
    for il in range(counts.n_all):
        v = 0 if k_only else (heads.head_v_swa if flags.is_swa[il] else heads.head_v)
        out.append((width, v) if chosen[il] else (0, 0))
    return out


def _ple(meta: ModelMetadata, row: Architecture, flags: _Flags, counts: LayerCounts, n_embd: int) -> list[int]:
    """qwen4exp's PLE conv row (src/models/qwen4exp.cpp:67-98,138-143; ple_conv_state, llama-hparams.cpp:268-275):
    (ple.conv_kernel - 1) x ple.ngram_size x hyper_connection.count x n_embd f32 on the one layer in ple.layers."""
    out = [0] * counts.n_all
    layers = meta.arch_key(K.PLE_LAYERS)
    if not row.ple or layers is None:
        return out
    if not isinstance(layers, tuple) or len(layers) != 1 or not isinstance(layers[0], int) \
            or not 0 <= layers[0] < counts.n_all:
        raise BadModelFile(f"{meta.source}: {meta.architecture}.ple.layers must list exactly one layer "
                           f"(qwen4exp.cpp:76-86), got {cut(layers)}")
    il = layers[0]
    if not flags.is_recr[il]:
        raise BadModelFile(f"{meta.source}: PLE layer {il} is not a linear attention layer (qwen4exp.cpp:138-143)")
    kernel = int_key(meta, K.PLE_CONV_KERNEL, required=True)
    ngram = int_key(meta, K.PLE_NGRAM_SIZE, required=True)
    hc = int_key(meta, K.HYPER_CONNECTION_COUNT, required=True)
    if kernel == 0 or ngram < 2:
        raise BadModelFile(f"{meta.source}: {meta.architecture}.ple.conv_kernel must be non-zero and ple.ngram_size "
                           "at least 2 (qwen4exp.cpp:95-101)")
    out[il] = (kernel - 1) * ngram * hc * n_embd
    return out


def _recurrent_widths(meta: ModelMetadata, state: RecurrentState, n_embd: int, heads: Heads) -> tuple[int, int]:
    """(n_embd_r, n_embd_s) from llama_hparams::n_embd_r / n_embd_s (src/llama-hparams.cpp:208-258)."""
    if state is RecurrentState.RWKV:
        shift = int_key(meta, K.TOKEN_SHIFT_COUNT, 2)  # default token_shift_count 2 (src/llama-hparams.h:143)
        return shift * n_embd, n_embd * int_key(meta, K.WKV_HEAD_SIZE, required=True)
    if state is RecurrentState.SHORTCONV:
        l_cache = int_key(meta, K.SHORTCONV_L_CACHE, required=True)
        if l_cache < 1:
            raise BadModelFile(f"{meta.source}: {meta.architecture}.shortconv.l_cache must be at least 1")
        return n_embd * (l_cache - 1), 0
    d_conv = int_key(meta, K.SSM_CONV_KERNEL, 0)
    if state is RecurrentState.KDA:
        head_dim = int_key(meta, K.KDA_HEAD_DIM, required=True)
        return 3 * (d_conv - 1 if d_conv > 0 else 3) * heads.n_head[0] * head_dim, head_dim * head_dim * heads.n_head[0]
    if state is RecurrentState.LIGHTNING:  # n_embd_head_la = key_length (src/models/minimax-01.cpp:9)
        return 0, heads.head_k * heads.head_k * heads.n_head[0]
    d_inner = int_key(meta, K.SSM_INNER_SIZE, 0)
    d_state = int_key(meta, K.SSM_STATE_SIZE, 0)
    n_group = int_key(meta, K.SSM_GROUP_COUNT, 0) if state is RecurrentState.SSM else 0
    conv = (d_conv - 1 if d_conv > 0 else 0) * (d_inner + 2 * n_group * d_state)
    return conv, d_state * d_inner


def _full_gqa_reference(meta: ModelMetadata, layers: list[LayerGeometry], n_head: int, is_mla: bool
                        ) -> tuple[int, int]:
    """The full-GQA reference: a full-attention layer of this model, uncompressed (K and V widths)."""
    if is_mla:
        return n_head * int_key(meta, K.KEY_LENGTH_MLA, 0), n_head * int_key(meta, K.VALUE_LENGTH_MLA, 0)
    attn = [layer for layer in layers if layer.kind in (LayerKind.FULL, LayerKind.FULL_RECURRENT)]
    attn = attn or [layer for layer in layers if layer.has_kv]
    if not attn:
        return 0, 0
    ref = max(attn, key=lambda layer: layer.k_width + layer.v_width)
    return ref.k_width, ref.v_width


def has_layout_rule(meta: ModelMetadata) -> bool:
    """Whether llamabench can lay out this model's caches (else: llama.cpp's own numbers only)."""
    return architectures.lookup(meta.architecture) is not None


def measured_geometry(meta: ModelMetadata, reason: str) -> ModelGeometry:
    """A model whose caches llamabench cannot lay out (`reason` says why): its layer count, trained context and
    widths from the standard keys, no layer caching anything in theory. A caller sizes its KV and recurrent state
    with llama.cpp's own dry runs (fit does, at every n_ctx it tries), never with this geometry's zeros."""
    n_layer = int_key(meta, K.BLOCK_COUNT, required=True)
    if not 0 < n_layer <= LLAMA_MAX_LAYERS:
        raise BadModelFile(f"{meta.source}: {meta.architecture}.block_count {n_layer} is not in 1..{LLAMA_MAX_LAYERS}")
    n_head = meta.arch_key(K.HEAD_COUNT)
    n_head = max(n_head) if isinstance(n_head, (list, tuple)) and n_head else n_head
    return ModelGeometry(
        architecture=meta.architecture, n_layer=n_layer, n_layer_nextn=0,
        n_ctx_train=int_key(meta, K.CONTEXT_LENGTH, 0), n_embd=int_key(meta, K.EMBEDDING_LENGTH, 0),
        n_head=n_head if isinstance(n_head, int) else 0,
        layers=tuple(LayerGeometry(il, LayerKind.NONE, 0, 0, 0) for il in range(n_layer)),
        n_swa=0, is_mla=False, recurrent_r_width=0, recurrent_s_width=0, v_width_max=0,
        full_attention_k_width=0, full_attention_v_width=0, no_rule=reason)


def geometry_from_metadata(meta: ModelMetadata) -> ModelGeometry:
    """The layout of `meta`; UnsupportedArchitecture where its architecture has no layout rule."""
    arch = meta.architecture
    row = architectures.get(arch, meta.source)

    counts = count_layers(meta, row)
    n_ctx_train = int_key(meta, K.CONTEXT_LENGTH, required=True)
    n_embd = int_key(meta, K.EMBEDDING_LENGTH, required=True)
    if n_embd == 0:
        raise BadModelFile(f"{meta.source}: {arch}.embedding_length is 0")

    heads = read_heads(meta, row, counts, n_embd)
    flags = _flags(meta, row, heads, counts)
    is_mla = row.mla and bool(int_key(meta, K.KEY_LENGTH_MLA, 0) and int_key(meta, K.VALUE_LENGTH_MLA, 0))
    widths = [_widths(heads, flags, il) for il in range(counts.n_all)]
    v_width_max = max([_widths(heads, flags, 0)[1]] + [v for _, v in widths])
    index = _indexer(meta, row, heads, flags, counts, is_mla)
    extras = (_kv_from(meta, row, flags, counts.n_all), index, _ple(meta, row, flags, counts, n_embd))
    layers = _layers(meta, heads, flags, is_mla, counts, extras)

    any_recr = any(layer.has_recurrent_state for layer in layers)
    r_width, s_width = _recurrent_widths(meta, row.recurrent_state, n_embd, heads) if any_recr else (0, 0)
    if any_recr and r_width + s_width == 0:
        raise BadModelFile(f"{meta.source}: recurrent layers with an empty state (check the ssm.* keys)")
    full_k, full_v = _full_gqa_reference(meta, layers, heads.n_head[0], is_mla)
    index_v_max = max((v for _, v in index), default=0) and max(
        heads.head_v_swa if flags.is_swa[il] else heads.head_v for il in range(counts.n_all))

    return ModelGeometry(
        architecture=arch,
        n_layer=counts.n_all,
        n_layer_nextn=counts.n_nextn,
        n_ctx_train=n_ctx_train,
        n_embd=n_embd,
        n_head=heads.n_head[0],
        layers=tuple(layers),
        n_swa=flags.n_swa,
        is_mla=is_mla,
        recurrent_r_width=r_width,
        recurrent_s_width=s_width,
        v_width_max=v_width_max,
        full_attention_k_width=full_k,
        full_attention_v_width=full_v,
        index_v_width_max=index_v_max,
        mtp_layers=_mtp_layers(heads, flags, is_mla, counts, layers),
    )
