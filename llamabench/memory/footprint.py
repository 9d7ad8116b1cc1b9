"""The theoretical memory footprint: KV cache and recurrent state, as llama.cpp sizes them.

Pure arithmetic on a `ModelGeometry` and `Params`; no file, no llama.cpp, no clock.
References (llama.cpp in llama-cpp-python 0.3.36):
- n_ctx rounding and streams: llama_context::llama_context (src/llama-context.cpp)
- KV tensors: llama_kv_cache::llama_kv_cache (src/llama-kv-cache.cpp)
- SWA cache size: llama_kv_cache_iswa::llama_kv_cache_iswa (src/llama-kv-cache-iswa.cpp)
- recurrent state: llama_memory_recurrent::llama_memory_recurrent (src/llama-memory-recurrent.cpp)
- indexer caches: llama_kv_cache_dsa / _msa and llama_memory_hybrid_idx (src/llama-kv-cache-dsa.cpp:38-53,
  src/llama-kv-cache-msa.cpp:39-49, src/llama-memory-hybrid-idx.cpp:53-73): n_ctx_seq cells, type_k / type_v
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import cache_types
from ..core.errors import UsageError
from ..model import architectures
from ..model.geometry import LayerGeometry, ModelGeometry
from ..settings.params import Params
from ..settings.values import LLAMA_MAX_SEQ
from . import speculative

KV_PAD = 256  # llama.cpp pads n_ctx, n_ctx_seq and the SWA cache to 256 cells


def pad(n: int, multiple: int = KV_PAD) -> int:
    return (n + multiple - 1) // multiple * multiple


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
    params: Params
    shape: ContextShape
    kv_bytes_per_token: int  # growing KV per token: every cached layer that is not SWA, indexer rows included
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
    index_k_bytes: int = 0  # the indexer cache's K at n_ctx (sparse attention: deepseek32, glm-dsa, qwen4exp...)
    index_v_bytes: int = 0  # its V, where the model is not MLA (minimax-m3, non-MLA DSA)
    n_index_layers: int = 0
    recurrent_p_bytes: int = 0  # qwen4exp's PLE conv row beside the recurrent state (f32)
    # --spec-type draft-mtp: the MTP draft context's KV (its NextN layers, -ctkd/-ctvd types), not in kv_bytes
    mtp_kv_bytes: int = 0
    mtp_kv_bytes_per_token: int = 0
    n_mtp_layers: int = 0

    @property
    def kv_bytes(self) -> int:
        """All KV at n_ctx, SWA and indexer caches included."""
        return self.k_bytes + self.v_bytes + self.swa_k_bytes + self.swa_v_bytes + self.index_kv_bytes

    @property
    def index_kv_bytes(self) -> int:
        return self.index_k_bytes + self.index_v_bytes

    @property
    def swa_kv_bytes(self) -> int:
        return self.swa_k_bytes + self.swa_v_bytes

    @property
    def recurrent_state_bytes(self) -> int:
        return self.recurrent_r_bytes + self.recurrent_s_bytes + self.recurrent_p_bytes

    @property
    def reduction(self) -> float | None:
        if self.kv_bytes_per_token == 0 or self.full_gqa_kv_bytes_per_token == 0:
            return None
        return self.full_gqa_kv_bytes_per_token / self.kv_bytes_per_token

    @property
    def reduces(self) -> bool:
        """Whether caching by layer kind saves anything against full GQA: a reduction that does not print as 1.00x
        (a model whose every mixer layer is full attention has none to speak of)."""
        return bool(self.reduction) and round(self.reduction, 2) != 1.0


def context_shape(geometry: ModelGeometry, s: Params) -> ContextShape:
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


def recurrent_rows(geometry: ModelGeometry, params: Params) -> int:
    """State rows a recurrent layer holds: one per sequence, times 1 + n_rs_seq rollback planes."""
    # llm_arch_supports_rs_rollback (src/llama-arch.cpp:1123-1140): elsewhere llama.cpp resets n_rs_seq to 0
    row = architectures.lookup(geometry.architecture)
    n_rs_seq = params.n_rs_seq if row is not None and row.rs_rollback else 0
    return max(1, params.n_seq) * (1 + n_rs_seq)


def _layer_row_bytes(layer: LayerGeometry, geometry: ModelGeometry, s: Params) -> tuple[int, int]:
    """Bytes of one cell's K row and V row in this layer (V padded to the widest layer when V is transposed)."""
    k = cache_types.row_bytes(s.type_k, layer.k_width)
    if layer.v_width == 0 and geometry.is_mla:
        return k, 0
    v_width = layer.v_width if s.flash_attn else geometry.v_width_max
    return k, cache_types.row_bytes(s.type_v, v_width)


def _index_row_bytes(layer: LayerGeometry, geometry: ModelGeometry, s: Params) -> tuple[int, int]:
    """Bytes of one cell's indexer K row and V row (V, where there is one, padded like the main cache's)."""
    if not layer.has_index:
        return 0, 0
    k = cache_types.row_bytes(s.type_k, layer.index_k_width)
    if layer.index_v_width == 0:
        return k, 0
    return k, cache_types.row_bytes(s.type_v, layer.index_v_width if s.flash_attn else geometry.index_v_width_max)


def compute_footprint(geometry: ModelGeometry, params: Params) -> Footprint:
    if cache_types.is_quantized(params.type_v) and not params.flash_attn and geometry.cached_layers:
        raise UsageError(
            f"a quantized V cache ({params.type_v}) needs flash attention",
            hint="use -fa on, or an f16/bf16/f32 V cache",
        )
    shape = context_shape(geometry, params)
    cells = shape.n_ctx_seq * shape.n_stream
    swa_cells = shape.swa_cells * shape.n_stream

    k_tok = v_tok = swa_k_cell = swa_v_cell = 0
    n_kv = n_swa = 0
    for layer in geometry.cached_layers:
        k, v = _layer_row_bytes(layer, geometry, params)
        if layer.is_swa:
            swa_k_cell += k
            swa_v_cell += v
            n_swa += 1
        else:
            k_tok += k
            v_tok += v
            n_kv += 1

    index_k_tok = index_v_tok = 0
    for layer in geometry.index_layers:
        k, v = _index_row_bytes(layer, geometry, params)
        index_k_tok += k
        index_v_tok += v

    ref_k = cache_types.row_bytes(params.type_k, geometry.full_attention_k_width)
    ref_v = cache_types.row_bytes(params.type_v, geometry.full_attention_v_width)
    full_gqa = (ref_k + ref_v) * len(geometry.mixer_layers)

    recurrent = geometry.recurrent_layers
    rows = recurrent_rows(geometry, params)
    r_bytes = geometry.recurrent_r_width * cache_types.F32_BYTES * rows * len(recurrent)
    s_bytes = geometry.recurrent_s_width * cache_types.F32_BYTES * rows * len(recurrent)
    p_bytes = sum(layer.p_width for layer in recurrent) * cache_types.F32_BYTES * rows

    return Footprint(
        params=params,
        shape=shape,
        kv_bytes_per_token=k_tok + v_tok + index_k_tok + index_v_tok,
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
        index_k_bytes=index_k_tok * cells,
        index_v_bytes=index_v_tok * cells,
        n_index_layers=len(geometry.index_layers),
        recurrent_p_bytes=p_bytes,
        **_mtp(geometry, params),
    )


def _mtp(geometry: ModelGeometry, params: Params) -> dict:
    """The MTP draft context's KV where --spec-type draft-mtp creates one (memory.speculative)."""
    if params.spec_type != speculative.MTP or not geometry.mtp_layers:
        return {}
    mtp = compute_footprint(speculative.mtp_geometry(geometry), speculative.draft_context(params))
    return dict(mtp_kv_bytes=mtp.kv_bytes, mtp_kv_bytes_per_token=mtp.kv_bytes_per_token,
                n_mtp_layers=mtp.n_kv_layers + mtp.n_swa_layers)


def per_layer_bytes(geometry: ModelGeometry, params: Params) -> dict[int, tuple[int, int]]:
    """(KV bytes, recurrent-state bytes) held by each main layer at n_ctx.

    llama.cpp puts each layer's KV and recurrent state on that layer's device, so the split of a
    placement follows from this table; the columns sum to kv_bytes and recurrent_state_bytes.
    """
    shape = context_shape(geometry, params)
    cells = shape.n_ctx_seq * shape.n_stream
    swa_cells = shape.swa_cells * shape.n_stream
    rows = recurrent_rows(geometry, params)
    state = (geometry.recurrent_r_width + geometry.recurrent_s_width) * cache_types.F32_BYTES * rows
    out = {}
    for layer in geometry.layers:
        kv = rec = 0
        if layer.has_kv:
            k, v = _layer_row_bytes(layer, geometry, params)
            kv = (k + v) * (swa_cells if layer.is_swa else cells)
            kv += sum(_index_row_bytes(layer, geometry, params)) * cells
        if layer.has_recurrent_state:
            rec = state + layer.p_width * cache_types.F32_BYTES * rows
        out[layer.index] = (kv, rec)
    if params.spec_type == speculative.MTP and geometry.mtp_layers:  # the MTP context's, on their layers' devices
        mtp = speculative.mtp_geometry(geometry)
        for il, (kv, _) in per_layer_bytes(mtp, speculative.draft_context(params)).items():
            out[il] = (out.get(il, (0, 0))[0] + kv, out.get(il, (0, 0))[1])
    return out


@dataclass(frozen=True)
class KvPoint:
    """One point of the KV curve: n_ctx after rounding, and what the caches hold there."""

    n_ctx: int
    kv_bytes: int
    recurrent_bytes: int
    full_gqa_kv_bytes: int  # the same model with every mixer layer cached as full attention

    @property
    def cache_bytes(self) -> int:
        return self.kv_bytes + self.recurrent_bytes


def kv_curve(geometry: ModelGeometry, params: Params, top: int, points: int = 64) -> tuple[KvPoint, ...]:
    """KV against n_ctx from 256 up to `top`, on 256-cell steps, `points` points (and `params.n_ctx` itself)."""
    ctxs = {max(KV_PAD, round(top * i / points / KV_PAD) * KV_PAD) for i in range(1, points + 1)}
    if params.n_ctx:
        ctxs.add(pad(params.n_ctx))
    out = []
    for n in sorted(ctxs):
        fp = compute_footprint(geometry, params.replace(n_ctx=n))
        out.append(KvPoint(fp.shape.n_ctx, fp.kv_bytes, fp.recurrent_state_bytes,
                           fp.full_gqa_kv_bytes_per_token * fp.shape.n_ctx))
    return tuple(out)
