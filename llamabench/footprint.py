"""The theoretical memory footprint: KV cache and recurrent state, as llama.cpp sizes them.

Pure arithmetic on a `ModelGeometry` and `CacheSettings`; no file, no llama.cpp, no clock.
References (llama.cpp in llama-cpp-python 0.3.36):
- n_ctx rounding and streams: llama_context::llama_context (src/llama-context.cpp)
- KV tensors: llama_kv_cache::llama_kv_cache (src/llama-kv-cache.cpp)
- SWA cache size: llama_kv_cache_iswa::llama_kv_cache_iswa (src/llama-kv-cache-iswa.cpp)
- recurrent state: llama_memory_recurrent::llama_memory_recurrent (src/llama-memory-recurrent.cpp)
"""

from __future__ import annotations

from dataclasses import dataclass

from . import cache_types
from .errors import UsageError
from .layout import LayerGeometry, ModelGeometry

# llm_arch_supports_rs_rollback (src/llama-arch.cpp): elsewhere llama.cpp resets n_rs_seq to 0
RS_ROLLBACK_ARCHITECTURES = frozenset({"qwen35", "qwen35moe", "nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe",
                                       "kimi-k3", "qwen4exp", "deepseek4", "glm5-next", "bailingmoe3"})
KV_PAD = 256  # llama.cpp pads n_ctx, n_ctx_seq and the SWA cache to 256 cells
LLAMA_MAX_SEQ = 256


def pad(n: int, multiple: int = KV_PAD) -> int:
    return (n + multiple - 1) // multiple * multiple


@dataclass(frozen=True)
class CacheSettings:
    n_ctx: int = 131072
    type_k: str = "f16"
    type_v: str = "f16"
    n_seq: int = 1
    kv_unified: bool = False
    swa_full: bool = False
    n_batch: int = 2048
    n_ubatch: int = 512
    flash_attn: bool = True
    n_rs_seq: int = 0


@dataclass(frozen=True)
class ContextShape:
    """The sizes llama.cpp derives from the requested context parameters."""

    n_ctx: int  # after rounding
    n_ctx_seq: int  # cells per stream
    n_stream: int
    n_batch: int
    n_ubatch: int
    swa_cells: int  # cells per stream of the SWA cache (0 without SWA)


@dataclass(frozen=True)
class Footprint:
    settings: CacheSettings
    shape: ContextShape
    kv_bytes_per_token: int  # growing KV per token: every cached layer that is not SWA
    swa_kv_bytes_per_cell: int  # SWA layers' KV per cached cell
    full_gqa_kv_bytes_per_token: int  # every mixer layer cached as full attention
    k_bytes: int  # non-SWA K at n_ctx
    v_bytes: int
    swa_k_bytes: int
    swa_v_bytes: int
    recurrent_r_bytes: int
    recurrent_s_bytes: int
    n_kv_layers: int
    n_swa_layers: int
    n_recurrent_layers: int

    @property
    def kv_bytes(self) -> int:
        """All KV at n_ctx, SWA caches included."""
        return self.k_bytes + self.v_bytes + self.swa_k_bytes + self.swa_v_bytes

    @property
    def swa_kv_bytes(self) -> int:
        return self.swa_k_bytes + self.swa_v_bytes

    @property
    def recurrent_state_bytes(self) -> int:
        return self.recurrent_r_bytes + self.recurrent_s_bytes

    @property
    def reduction(self) -> float | None:
        if self.kv_bytes_per_token == 0 or self.full_gqa_kv_bytes_per_token == 0:
            return None
        return self.full_gqa_kv_bytes_per_token / self.kv_bytes_per_token


def context_shape(geometry: ModelGeometry, s: CacheSettings) -> ContextShape:
    if s.n_ctx < 0:
        raise UsageError(f"n_ctx must be 0 (the model's trained length) or positive, got {s.n_ctx}")
    if not 1 <= s.n_seq <= LLAMA_MAX_SEQ:
        raise UsageError(f"n_seq must be between 1 and {LLAMA_MAX_SEQ}, got {s.n_seq}")
    if s.n_batch < 1 or s.n_ubatch < 1:
        raise UsageError("n_batch and n_ubatch must be positive")
    requested = s.n_ctx or geometry.n_ctx_train
    n_batch = min(requested, s.n_batch)
    n_ubatch = min(n_batch, s.n_ubatch)
    n_ctx = pad(requested)
    if s.kv_unified:
        n_ctx_seq, n_stream = n_ctx, 1
    else:
        n_ctx_seq = pad(n_ctx // s.n_seq)
        n_ctx = n_ctx_seq * s.n_seq
        n_stream = s.n_seq
    swa_cells = 0
    if geometry.has_swa:
        if s.swa_full:
            swa_cells = n_ctx_seq
        else:
            window = geometry.n_swa * (s.n_seq if s.kv_unified else 1) + n_ubatch
            swa_cells = pad(min(n_ctx_seq, window))
    return ContextShape(n_ctx, n_ctx_seq, n_stream, n_batch, n_ubatch, swa_cells)


def _recurrent_rows(geometry: ModelGeometry, settings: CacheSettings) -> int:
    n_rs_seq = settings.n_rs_seq if geometry.architecture in RS_ROLLBACK_ARCHITECTURES else 0
    return max(1, settings.n_seq) * (1 + n_rs_seq)


def _layer_row_bytes(layer: LayerGeometry, geometry: ModelGeometry, s: CacheSettings) -> tuple[int, int]:
    """Bytes of one cell's K row and V row in this layer (V padded to the widest layer when V is transposed)."""
    k = cache_types.row_bytes(s.type_k, layer.k_width)
    if layer.v_width == 0 and geometry.is_mla:
        return k, 0
    v_width = layer.v_width if s.flash_attn else geometry.v_width_max
    return k, cache_types.row_bytes(s.type_v, v_width)


def compute_footprint(geometry: ModelGeometry, settings: CacheSettings) -> Footprint:
    if cache_types.is_quantized(settings.type_v) and not settings.flash_attn and geometry.cached_layers:
        raise UsageError(
            f"a quantized V cache ({settings.type_v}) needs flash attention",
            hint="use -fa on, or an f16/bf16/f32 V cache",
        )
    shape = context_shape(geometry, settings)
    cells = shape.n_ctx_seq * shape.n_stream
    swa_cells = shape.swa_cells * shape.n_stream

    k_tok = v_tok = swa_k_cell = swa_v_cell = 0
    n_kv = n_swa = 0
    for layer in geometry.cached_layers:
        k, v = _layer_row_bytes(layer, geometry, settings)
        if layer.is_swa:
            swa_k_cell += k
            swa_v_cell += v
            n_swa += 1
        else:
            k_tok += k
            v_tok += v
            n_kv += 1

    ref_k = cache_types.row_bytes(settings.type_k, geometry.full_attention_k_width)
    ref_v = cache_types.row_bytes(settings.type_v, geometry.full_attention_v_width)
    full_gqa = (ref_k + ref_v) * len(geometry.mixer_layers)

    recurrent = geometry.recurrent_layers
    rows = _recurrent_rows(geometry, settings)
    r_bytes = geometry.recurrent_r_width * cache_types.F32_BYTES * rows * len(recurrent)
    s_bytes = geometry.recurrent_s_width * cache_types.F32_BYTES * rows * len(recurrent)

    return Footprint(
        settings=settings,
        shape=shape,
        kv_bytes_per_token=k_tok + v_tok,
        swa_kv_bytes_per_cell=swa_k_cell + swa_v_cell,
        full_gqa_kv_bytes_per_token=full_gqa,
        k_bytes=k_tok * cells,
        v_bytes=v_tok * cells,
        swa_k_bytes=swa_k_cell * swa_cells,
        swa_v_bytes=swa_v_cell * swa_cells,
        recurrent_r_bytes=r_bytes,
        recurrent_s_bytes=s_bytes,
        n_kv_layers=n_kv,
        n_swa_layers=n_swa,
        n_recurrent_layers=len(recurrent),
    )


def per_layer_bytes(geometry: ModelGeometry, settings: CacheSettings) -> dict[int, tuple[int, int]]:
    """(KV bytes, recurrent-state bytes) held by each main layer at n_ctx.

    llama.cpp puts each layer's KV and recurrent state on that layer's device, so the split of a
    placement follows from this table; the columns sum to kv_bytes and recurrent_state_bytes.
    """
    shape = context_shape(geometry, settings)
    cells = shape.n_ctx_seq * shape.n_stream
    swa_cells = shape.swa_cells * shape.n_stream
    rows = _recurrent_rows(geometry, settings)
    state = (geometry.recurrent_r_width + geometry.recurrent_s_width) * cache_types.F32_BYTES * rows
    out = {}
    for layer in geometry.layers:
        kv = rec = 0
        if layer.has_kv:
            k, v = _layer_row_bytes(layer, geometry, settings)
            kv = (k + v) * (swa_cells if layer.is_swa else cells)
        if layer.has_recurrent_state:
            rec = state
        out[layer.index] = (kv, rec)
    return out
