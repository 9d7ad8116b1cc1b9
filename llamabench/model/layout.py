"""Which layer caches what: the hybrid layer layout, as llama.cpp derives it from GGUF metadata.

Pure: takes a `ModelMetadata`, returns a `ModelGeometry`. Which rule an architecture follows, and
its required keys and default SWA pattern, come from its row in `architectures`. The rules follow the llama.cpp
vendored in llama-cpp-python 0.3.36: `llama_model_base::load_hparams` (src/llama-model.cpp),
each family's `load_arch_hparams` (src/models/<arch>.cpp), `llama_model::create_memory`
and `llama_hparams::n_embd_r / n_embd_s` (src/llama-hparams.cpp).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gguf import GGUFValueType

from ..core.errors import BadModelFile
from . import architectures
from . import gguf_keys as K
from .architectures import LayoutRule, RecurrentState
from .metadata import ModelMetadata, cut

LLAMA_MAX_LAYERS = 512  # src/llama-hparams.h


class LayerKind(StrEnum):
    FULL = "full"  # attention with a KV cache that grows with n_ctx
    SWA = "swa"  # sliding-window attention: KV capped near the window
    RECURRENT = "recurrent"  # linear attention / SSM / short conv: fixed state
    FULL_RECURRENT = "full+recurrent"  # both in one layer (falcon-h1)
    MLA = "mla"  # multi-head latent attention: one compressed K-only row
    NONE = "none"  # no cache at all (FFN-only layers)


@dataclass(frozen=True)
class LayerGeometry:
    index: int
    kind: LayerKind
    n_head_kv: int
    k_width: int  # n_embd_k_gqa: K elements per token in this layer's cache row (0 if uncached)
    v_width: int  # n_embd_v_gqa: V elements per token (0 if uncached, and for MLA)

    @property
    def has_kv(self) -> bool:
        return self.kind in (LayerKind.FULL, LayerKind.SWA, LayerKind.FULL_RECURRENT, LayerKind.MLA)

    @property
    def is_swa(self) -> bool:
        return self.kind is LayerKind.SWA

    @property
    def has_recurrent_state(self) -> bool:
        return self.kind in (LayerKind.RECURRENT, LayerKind.FULL_RECURRENT)


@dataclass(frozen=True)
class ModelGeometry:
    architecture: str
    n_layer: int  # block_count, NextN/MTP layers included (llama.cpp's n_layer_all)
    n_layer_nextn: int
    n_ctx_train: int
    n_embd: int
    n_head: int
    layers: tuple[LayerGeometry, ...]  # the main layers (NextN layers are outside the main cache)
    n_swa: int  # sliding window in tokens (0 without SWA)
    is_mla: bool
    recurrent_r_width: int  # n_embd_r: f32 elements of conv state per layer per sequence
    recurrent_s_width: int  # n_embd_s: f32 elements of SSM / delta state per layer per sequence
    v_width_max: int  # widest V row over all layers: V rows are padded to it with flash attention off
    full_attention_k_width: int  # K width of a full-attention layer of this model (the full-GQA reference)
    full_attention_v_width: int

    @property
    def has_swa(self) -> bool:
        return any(layer.is_swa for layer in self.layers)

    @property
    def cached_layers(self) -> tuple[LayerGeometry, ...]:
        return tuple(layer for layer in self.layers if layer.has_kv)

    @property
    def recurrent_layers(self) -> tuple[LayerGeometry, ...]:
        return tuple(layer for layer in self.layers if layer.has_recurrent_state)

    @property
    def mixer_layers(self) -> tuple[LayerGeometry, ...]:
        """Layers with a token mixer (attention or recurrent): every layer that is not FFN-only."""
        return tuple(layer for layer in self.layers if layer.kind is not LayerKind.NONE)


UINT32, INT32, ARRAY = 4, 5, 9  # GGUFValueType codes llama.cpp's hparams accept (llama_model_loader::get_key)
UINT32_MAX = 2**32 - 1
MAX_HEAD_SIZE = 2**16  # per head: beyond any model llama.cpp runs (MLA's 576 is the widest known)


def _check_type(meta: ModelMetadata, suffix: str, *, array_ok: bool) -> None:
    """llama.cpp reads counts as uint32 scalars (or int32/uint32 arrays) and rejects other integer types."""
    types = meta.value_types.get(f"{meta.architecture}.{suffix}")
    if not types:
        return  # a catalog entry: no GGUF types
    ok = types[0] == UINT32 or (array_ok and types[0] == ARRAY and len(types) > 1 and types[1] in (UINT32, INT32))
    if not ok:
        names = "/".join(GGUFValueType(t).name for t in types)
        raise BadModelFile(f"{meta.source}: key {meta.architecture}.{suffix} has type {names}; llama.cpp reads it "
                           f"as UINT32{' (or an INT32/UINT32 array)' if array_ok else ''}")


def _int(meta: ModelMetadata, suffix: str, default: int | None = None, *, required: bool = False) -> int:
    value = meta.arch_key(suffix)
    if value is None:
        if required or default is None:
            raise BadModelFile(f"{meta.source}: missing required key {meta.architecture}.{suffix}")
        return default
    if isinstance(value, tuple) or isinstance(value, bool) or not isinstance(value, int):
        raise BadModelFile(f"{meta.source}: key {meta.architecture}.{suffix} should be an integer, got "
                           f"{cut(value)}")
    _check_type(meta, suffix, array_ok=False)
    if value < 0:
        raise BadModelFile(f"{meta.source}: key {meta.architecture}.{suffix} is negative ({value})")
    return value


def _per_layer(meta: ModelMetadata, suffix: str, n_layer: int, default: tuple[int, ...]) -> tuple[int, ...]:
    """A key that is either a scalar (same for every layer) or an array of n_layer values."""
    value = meta.arch_key(suffix)
    if value is None:
        return default
    _check_type(meta, suffix, array_ok=True)
    if isinstance(value, tuple):
        if len(value) != n_layer:
            raise BadModelFile(
                f"{meta.source}: {meta.architecture}.{suffix} has {len(value)} entries for {n_layer} layers"
            )
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise BadModelFile(f"{meta.source}: {meta.architecture}.{suffix} holds values that are not counts")
        return tuple(int(v) for v in value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadModelFile(f"{meta.source}: key {meta.architecture}.{suffix} should be a count, got {cut(value)}")
    return (int(value),) * n_layer


def _bool_array(meta: ModelMetadata, suffix: str, n_layer: int) -> tuple[bool, ...] | None:
    value = meta.arch_key(suffix)
    if value is None or not isinstance(value, tuple):
        return None
    if len(value) != n_layer:
        raise BadModelFile(f"{meta.source}: {meta.architecture}.{suffix} has {len(value)} entries for {n_layer} layers")
    return tuple(bool(v) for v in value)


def _swa_flags(meta: ModelMetadata, n_main: int, n_layer: int, default_pattern: int) -> tuple[bool, ...]:
    """llama_model_base::load_swa_pattern: a bool array, or a period N (layer i is SWA iff i % N < N - 1)."""
    flags = _bool_array(meta, K.SLIDING_WINDOW_PATTERN, n_layer)
    if flags is not None:
        return flags[:n_main]
    pattern = _int(meta, K.SLIDING_WINDOW_PATTERN, default_pattern)
    return tuple(pattern == 0 or (i % pattern < pattern - 1) for i in range(n_main))


def _recurrent_widths(meta: ModelMetadata, state: RecurrentState, n_embd: int) -> tuple[int, int]:
    """(n_embd_r, n_embd_s) from llama_hparams::n_embd_r / n_embd_s."""
    if state is RecurrentState.SHORTCONV:
        l_cache = _int(meta, K.SHORTCONV_L_CACHE, required=True)
        if l_cache < 1:
            raise BadModelFile(f"{meta.source}: {meta.architecture}.shortconv.l_cache must be at least 1")
        return n_embd * (l_cache - 1), 0
    d_conv = _int(meta, K.SSM_CONV_KERNEL, 0)
    d_inner = _int(meta, K.SSM_INNER_SIZE, 0)
    d_state = _int(meta, K.SSM_STATE_SIZE, 0)
    n_group = _int(meta, K.SSM_GROUP_COUNT, 0)
    conv = (d_conv - 1 if d_conv > 0 else 0) * (d_inner + 2 * n_group * d_state)
    return conv, d_state * d_inner


@dataclass(frozen=True)
class _Heads:
    """The head counts and sizes the layout is read from: per layer where llama.cpp allows arrays."""

    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    head_k: int
    head_v: int
    head_k_swa: int
    head_v_swa: int


def _heads(meta: ModelMetadata, row, n_layer: int, n_embd: int) -> _Heads:
    arch = meta.architecture
    n_head_arr = _per_layer(meta, K.HEAD_COUNT, n_layer, (0,) * n_layer)
    n_head_kv_arr = _per_layer(meta, K.HEAD_COUNT_KV, n_layer, n_head_arr)
    n_ff_arr = _per_layer(meta, K.FEED_FORWARD_LENGTH, n_layer, (0,) * n_layer)
    n_head = n_head_arr[0]
    for key in row.required_keys:
        _int(meta, key, required=True)
    if n_head > 0:
        head_k = _int(meta, K.KEY_LENGTH, n_embd // n_head)
        head_v = _int(meta, K.VALUE_LENGTH, n_embd // n_head)
    else:
        head_k = head_v = 0
    head_k_swa = _int(meta, K.KEY_LENGTH_SWA, head_k)
    head_v_swa = _int(meta, K.VALUE_LENGTH_SWA, head_v)
    for suffix, size in ((K.KEY_LENGTH, head_k), (K.VALUE_LENGTH, head_v), (K.KEY_LENGTH_SWA, head_k_swa),
                         (K.VALUE_LENGTH_SWA, head_v_swa)):
        if size > MAX_HEAD_SIZE:
            raise BadModelFile(f"{meta.source}: {arch}.{suffix} is {size:,}: heads wider than {MAX_HEAD_SIZE:,} are "
                               "not a model llama.cpp can run")
    for il in range(n_layer):
        if n_head_kv_arr[il] > 0 and n_head_arr[il] > 0 and n_head_kv_arr[il] > n_head_arr[il]:
            raise BadModelFile(
                f"{meta.source}: layer {il} has {n_head_kv_arr[il]} KV heads but only {n_head_arr[il]} attention heads"
            )
    return _Heads(n_head_arr, n_head_kv_arr, n_ff_arr, head_k, head_v, head_k_swa, head_v_swa)


@dataclass(frozen=True)
class _Flags:
    """Per main layer: is it SWA, is it recurrent, does it hold KV; and the window."""

    is_swa: tuple[bool, ...]
    is_recr: tuple[bool, ...]
    has_kv: tuple[bool, ...]
    n_swa: int


def _flags(meta: ModelMetadata, row, heads: _Heads, n_main: int, n_layer: int) -> _Flags:
    """The architecture row's rule applied (PLAIN and MLA keep the defaults: every main layer caches K and V)."""
    arch = meta.architecture
    is_swa, is_recr, has_kv, n_swa = [False] * n_main, [False] * n_main, [True] * n_main, 0
    kv, ff = heads.n_head_kv, heads.n_ff
    rule = row.layout
    if rule is LayoutRule.INTERVAL:
        flags = _bool_array(meta, K.RECURRENT_LAYERS, n_layer)
        if flags is None:
            interval = _int(meta, K.FULL_ATTENTION_INTERVAL, 4)
            if interval == 0:
                raise BadModelFile(f"{meta.source}: {arch}.full_attention_interval is 0")
            flags = tuple((i < n_main) and ((i + 1) % interval != 0) for i in range(n_layer))
        is_recr = list(flags[:n_main])
        has_kv = [not r for r in is_recr]
    elif rule is LayoutRule.KV_ZERO:
        is_recr = [kv[i] == 0 for i in range(n_main)]
        has_kv = [not r for r in is_recr]
    elif rule is LayoutRule.NEMOTRON_H:
        is_recr = [kv[i] == 0 and ff[i] == 0 for i in range(n_main)]
        has_kv = [not is_recr[i] and ff[i] == 0 for i in range(n_main)]
    elif rule is LayoutRule.PARALLEL:
        is_recr = [True] * n_main
    elif rule is LayoutRule.RECURRENT:
        is_recr = [True] * n_main
        has_kv = [False] * n_main
    elif rule is LayoutRule.SWA:
        window = _int(meta, K.SLIDING_WINDOW, 0)
        if window > 0:
            n_swa = window
            is_swa = list(_swa_flags(meta, n_main, n_layer, row.swa_pattern))
        if n_swa > 0 and not any(is_swa):
            raise BadModelFile(f"{meta.source}: {arch} has a sliding window but no layer is marked SWA")
    if row.swa_on_attention:  # src/models/lfm2.cpp: is_swa = !is_recr once sliding_window > 0
        window = _int(meta, K.SLIDING_WINDOW, 0)
        if window > 0:
            n_swa = window
            is_swa = [not r for r in is_recr]
    return _Flags(tuple(is_swa), tuple(is_recr), tuple(has_kv), n_swa)


def _layers(meta: ModelMetadata, heads: _Heads, flags: _Flags, is_mla: bool, n_main: int
            ) -> list[LayerGeometry]:
    layers = []
    for il in range(n_main):
        k_width, v_width = _widths(heads, flags, n_main, il)
        has_kv, is_recr = flags.has_kv[il], flags.is_recr[il]
        if has_kv and is_recr:
            kind = LayerKind.FULL_RECURRENT
        elif has_kv:
            kind = LayerKind.MLA if is_mla else (LayerKind.SWA if flags.is_swa[il] else LayerKind.FULL)
        elif is_recr:
            kind = LayerKind.RECURRENT
        else:
            kind = LayerKind.NONE
        if not has_kv:
            k_width = v_width = 0
        elif is_mla:
            v_width = 0
        if has_kv and k_width == 0:
            raise BadModelFile(f"{meta.source}: layer {il} caches KV but has no KV heads or a zero head size")
        layers.append(LayerGeometry(il, kind, heads.n_head_kv[il], k_width, v_width))
    return layers


def _widths(heads: _Heads, flags: _Flags, n_main: int, il: int) -> tuple[int, int]:
    """(K, V) widths of layer il: the SWA head sizes on SWA layers."""
    swa = il < n_main and flags.is_swa[il]
    hk, hv = (heads.head_k_swa, heads.head_v_swa) if swa else (heads.head_k, heads.head_v)
    return hk * heads.n_head_kv[il], hv * heads.n_head_kv[il]


def _full_gqa_reference(meta: ModelMetadata, layers: list[LayerGeometry], n_head: int, is_mla: bool
                        ) -> tuple[int, int]:
    """The full-GQA reference: a full-attention layer of this model, uncompressed (K and V widths)."""
    if is_mla:
        return n_head * _int(meta, K.KEY_LENGTH_MLA, 0), n_head * _int(meta, K.VALUE_LENGTH_MLA, 0)
    attn = [layer for layer in layers if layer.kind in (LayerKind.FULL, LayerKind.FULL_RECURRENT)]
    attn = attn or [layer for layer in layers if layer.has_kv]
    if not attn:
        return 0, 0
    ref = max(attn, key=lambda layer: layer.k_width + layer.v_width)
    return ref.k_width, ref.v_width


def geometry_from_metadata(meta: ModelMetadata) -> ModelGeometry:
    arch = meta.architecture
    row = architectures.get(arch, meta.source)

    n_layer = _int(meta, K.BLOCK_COUNT, required=True)
    if n_layer == 0 or n_layer > LLAMA_MAX_LAYERS:
        raise BadModelFile(f"{meta.source}: {arch}.block_count is {n_layer}; llama.cpp needs 1 to {LLAMA_MAX_LAYERS}")
    n_nextn = _int(meta, K.NEXTN_PREDICT_LAYERS, 0)
    if n_nextn >= n_layer:
        raise BadModelFile(f"{meta.source}: {arch}.nextn_predict_layers ({n_nextn}) leaves no main layers")
    n_main = n_layer - n_nextn
    n_ctx_train = _int(meta, K.CONTEXT_LENGTH, required=True)
    n_embd = _int(meta, K.EMBEDDING_LENGTH, required=True)
    if n_embd == 0:
        raise BadModelFile(f"{meta.source}: {arch}.embedding_length is 0")

    heads = _heads(meta, row, n_layer, n_embd)
    flags = _flags(meta, row, heads, n_main, n_layer)
    is_mla = row.layout is LayoutRule.MLA and bool(
        _int(meta, K.KEY_LENGTH_MLA, 0) and _int(meta, K.VALUE_LENGTH_MLA, 0)
    )
    v_width_max = max([_widths(heads, flags, n_main, 0)[1]] +
                      [_widths(heads, flags, n_main, il)[1] for il in range(n_layer)])
    layers = _layers(meta, heads, flags, is_mla, n_main)

    any_recr = any(flags.is_recr)
    r_width, s_width = _recurrent_widths(meta, row.recurrent_state, n_embd) if any_recr else (0, 0)
    if any_recr and r_width + s_width == 0:
        raise BadModelFile(f"{meta.source}: recurrent layers with an empty state (check the ssm.* keys)")
    full_k, full_v = _full_gqa_reference(meta, layers, heads.n_head[0], is_mla)

    return ModelGeometry(
        architecture=arch,
        n_layer=n_layer,
        n_layer_nextn=n_nextn,
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
    )
