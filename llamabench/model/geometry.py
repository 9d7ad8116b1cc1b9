"""What a model's layers cache: `ModelGeometry`, one `LayerGeometry` a layer and its `LayerKind`, as `layout`
derives them from GGUF metadata after llama.cpp's `llama_hparams` (src/llama-hparams.cpp) and the caches
`llama_model::create_memory` makes (src/llama-model.cpp:2352-2882). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LayerKind(StrEnum):
    FULL = "full"  # attention with a KV cache that grows with n_ctx
    SWA = "swa"  # sliding-window attention: KV capped near the window
    RECURRENT = "recurrent"  # linear attention / SSM / short conv: fixed state
    FULL_RECURRENT = "full+recurrent"  # both in one layer (falcon-h1)
    MLA = "mla"  # multi-head latent attention: one compressed K-only row
    SHARED = "shared"  # attention over an earlier layer's cache (KV sharing): owns none
    NONE = "none"  # no cache at all (FFN-only layers, encoders)


@dataclass(frozen=True)
class LayerGeometry:
    index: int
    kind: LayerKind
    n_head_kv: int
    k_width: int  # n_embd_k_gqa: K elements per token in this layer's cache row (0 if uncached)
    v_width: int  # n_embd_v_gqa: V elements per token (0 if uncached, and for MLA)
    kv_from: int | None = None  # SHARED: the layer whose cache this one reads
    index_k_width: int = 0  # indexer cache: K elements per token (0: no indexer row on this layer)
    index_v_width: int = 0  # indexer cache: V elements per token (0: K-only)
    p_width: int = 0  # PLE conv row: f32 elements per sequence beside the recurrent state (qwen4exp)

    @property
    def has_kv(self) -> bool:
        return self.kind in (LayerKind.FULL, LayerKind.SWA, LayerKind.FULL_RECURRENT, LayerKind.MLA)

    @property
    def is_swa(self) -> bool:
        return self.kind is LayerKind.SWA

    @property
    def has_recurrent_state(self) -> bool:
        return self.kind in (LayerKind.RECURRENT, LayerKind.FULL_RECURRENT)

    @property
    def has_index(self) -> bool:
        return self.index_k_width > 0


@dataclass(frozen=True)
class ModelGeometry:
    architecture: str
    n_layer: int  # llama.cpp's n_layer_all: block_count, NextN layers included (router / loops applied)
    n_layer_nextn: int
    n_ctx_train: int
    n_embd: int
    n_head: int
    layers: tuple[LayerGeometry, ...]  # the n_layer() trunk layers, then the NextN layers the main cache holds
    n_swa: int  # sliding window in tokens (0 without SWA)
    is_mla: bool
    recurrent_r_width: int  # n_embd_r: f32 elements of conv state per layer per sequence
    recurrent_s_width: int  # n_embd_s: f32 elements of SSM / delta state per layer per sequence
    v_width_max: int  # widest V row over all layers: V rows are padded to it with flash attention off
    full_attention_k_width: int  # K width of a full-attention layer of this model (the full-GQA reference)
    full_attention_v_width: int
    index_v_width_max: int = 0  # the indexer cache's widest V row (its V padding with flash attention off)
    # the NextN layers an MTP draft context caches (llama-server --spec-type draft-mtp): one full-attention row
    # each, at the target's cells (src/llama-model.cpp:2792-2804, filter il >= n_layer())
    mtp_layers: tuple[LayerGeometry, ...] = ()
    # an architecture without a layout rule: why (its layers are then all NONE, and its caches are llama.cpp's
    # own, measured by a dry run: see `measured_geometry`)
    no_rule: str = ""

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
    def index_layers(self) -> tuple[LayerGeometry, ...]:
        return tuple(layer for layer in self.layers if layer.has_index)

    @property
    def mixer_layers(self) -> tuple[LayerGeometry, ...]:
        """Layers with a token mixer (attention or recurrent): every layer that is not FFN-only."""
        return tuple(layer for layer in self.layers if layer.kind is not LayerKind.NONE)
