"""The hparams the layer layout is read from, as llama.cpp reads them from GGUF metadata: keys typed and counted as
`llama_model_loader::get_key` / `get_arr` / `get_key_or_arr` take them (src/llama-model-loader.cpp:366-399), the
layer counts (block_count, NextN layers, graniteswitch's router, nanbeige's loops) and the head counts and sizes
of `llama_model_base::load_hparams` (src/llama-model.cpp:1298-1492).

Pure: takes a `ModelMetadata` and its architecture's row in `architectures`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gguf import GGUFValueType

from ..core.errors import BadModelFile
from . import gguf_keys as K
from .architectures import Architecture, LayerCount
from .metadata import ModelMetadata, cut

LLAMA_MAX_LAYERS = 512  # src/llama-hparams.h
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


def int_key(meta: ModelMetadata, suffix: str, default: int | None = None, *, required: bool = False) -> int:
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


def _require(meta: ModelMetadata, suffix: str) -> None:
    """A key llama.cpp's get_key / get_arr requires: present, and a count where it is a scalar."""
    if meta.arch_key(suffix) is None:
        raise BadModelFile(f"{meta.source}: missing required key {meta.architecture}.{suffix}")
    if not isinstance(meta.arch_key(suffix), tuple):
        int_key(meta, suffix)


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


def bool_array(meta: ModelMetadata, suffix: str, n_layer: int) -> tuple[bool, ...] | None:
    value = meta.arch_key(suffix)
    if value is None or not isinstance(value, tuple):
        return None
    if len(value) != n_layer:
        raise BadModelFile(f"{meta.source}: {meta.architecture}.{suffix} has {len(value)} entries for {n_layer} layers")
    return tuple(bool(v) for v in value)


def flag_array(meta: ModelMetadata, suffix: str, n_layer: int, default: tuple[bool, ...]) -> tuple[bool, ...]:
    """get_key_or_arr into a per-layer flag array: a scalar for every layer, or exactly n_layer entries (bool arrays
    too: get_arr reads them as 0 / 1, src/llama-model-loader.cpp:366-399)."""
    value = meta.arch_key(suffix)
    if isinstance(value, tuple) and all(isinstance(v, bool) for v in value):
        return bool_array(meta, suffix, n_layer)
    return tuple(bool(v) for v in _per_layer(meta, suffix, n_layer, tuple(int(v) for v in default)))


@dataclass(frozen=True)
class LayerCounts:
    """Layer counts: n_layer_all (what the cache spans), n_layer() (the trunk) and the NextN layers."""

    n_all: int
    n_main: int
    n_nextn: int
    n_block: int  # block_count: the length of the GGUF's per-layer arrays
    loops: int = 1  # nanbeige: the arrays repeat this many times
    router: bool = False  # graniteswitch: layer n_main is the router layer


def count_layers(meta: ModelMetadata, row: Architecture) -> LayerCounts:
    arch = meta.architecture
    n_block = int_key(meta, K.BLOCK_COUNT, required=True)
    if n_block == 0 or n_block > LLAMA_MAX_LAYERS:
        raise BadModelFile(f"{meta.source}: {arch}.block_count is {n_block}; llama.cpp needs 1 to {LLAMA_MAX_LAYERS}")
    n_nextn = int_key(meta, K.NEXTN_PREDICT_LAYERS, 0)
    if n_nextn >= n_block:
        raise BadModelFile(f"{meta.source}: {arch}.nextn_predict_layers ({n_nextn}) leaves no main layers")
    n_main = n_block - n_nextn
    if row.layer_count is LayerCount.ROUTER:
        # src/models/granite-switch.cpp:59-68: the router layer at index n_layer(); n_layer_nextn repurposed as 1
        if n_main + 1 > LLAMA_MAX_LAYERS:
            raise BadModelFile(f"{meta.source}: {arch}.block_count {n_block} leaves no room for the router layer")
        return LayerCounts(n_main + 1, n_main, 1, n_block, router=True)
    if row.layer_count is LayerCount.LOOPS:
        # src/models/nanbeige.cpp:6-32: n_layer_all = n_layer() x num_loops (asserted >= 1 and within the maximum)
        loops = int_key(meta, K.NUM_LOOPS, 1)
        if loops < 1 or n_main * loops > LLAMA_MAX_LAYERS:
            raise BadModelFile(f"{meta.source}: {arch}.num_loops is {loops}; llama.cpp needs 1 to "
                               f"{LLAMA_MAX_LAYERS // n_main} for {n_main} layers")
        if loops > 1:
            return LayerCounts(n_main * loops, n_main * loops - n_nextn, n_nextn, n_block, loops=loops)
    return LayerCounts(n_block, n_main, n_nextn, n_block)


@dataclass(frozen=True)
class Heads:
    """The head counts and sizes the layout is read from: per layer (n_layer_all of them) where arrays are allowed."""

    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    head_k: int
    head_v: int
    head_k_swa: int
    head_v_swa: int


def _expand(values: tuple[int, ...], counts: LayerCounts, router_value: int) -> tuple[int, ...]:
    """Arrays read over block_count, repeated for loops (nanbeige.cpp:21-28) or given the router's entry."""
    if counts.loops > 1:
        phys = values[: counts.n_all // counts.loops]
        return phys * counts.loops
    if counts.router:
        return values[: counts.n_main] + (router_value,)
    return values


def read_heads(meta: ModelMetadata, row: Architecture, counts: LayerCounts, n_embd: int) -> Heads:
    arch, n = meta.architecture, counts.n_block
    n_head_arr = _per_layer(meta, K.HEAD_COUNT, n, (0,) * n)
    n_head_kv_arr = _per_layer(meta, K.HEAD_COUNT_KV, n, n_head_arr)
    n_ff_arr = _per_layer(meta, K.FEED_FORWARD_LENGTH, n, (0,) * n)
    n_head_arr, n_head_kv_arr = _expand(n_head_arr, counts, 1), _expand(n_head_kv_arr, counts, 1)
    n_ff_arr = _expand(n_ff_arr, counts, 0)
    n_head = n_head_arr[0]
    for key in row.required_keys:
        _require(meta, key)
    if n_head > 0:
        head_k = int_key(meta, K.KEY_LENGTH, n_embd // n_head)
        head_v = int_key(meta, K.VALUE_LENGTH, n_embd // n_head)
    else:
        head_k = head_v = 0
    head_k_swa = int_key(meta, K.KEY_LENGTH_SWA, head_k)
    head_v_swa = int_key(meta, K.VALUE_LENGTH_SWA, head_v)
    for suffix, size in ((K.KEY_LENGTH, head_k), (K.VALUE_LENGTH, head_v), (K.KEY_LENGTH_SWA, head_k_swa),
                         (K.VALUE_LENGTH_SWA, head_v_swa)):
        if size > MAX_HEAD_SIZE:
            raise BadModelFile(f"{meta.source}: {arch}.{suffix} is {size:,}: heads wider than {MAX_HEAD_SIZE:,} are "
                               "not a model llama.cpp can run")
    for il in range(counts.n_all):
        if n_head_kv_arr[il] > 0 and n_head_arr[il] > 0 and n_head_kv_arr[il] > n_head_arr[il]:
            raise BadModelFile(
                f"{meta.source}: layer {il} has {n_head_kv_arr[il]} KV heads but only {n_head_arr[il]} attention heads"
            )
    return Heads(n_head_arr, n_head_kv_arr, n_ff_arr, head_k, head_v, head_k_swa, head_v_swa)
