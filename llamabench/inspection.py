"""Inspect = layout + footprint of one model under one set of cache settings, as plain data."""

from __future__ import annotations

from dataclasses import dataclass

from . import gguf_keys as K
from .validate import check_for_llama
from .footprint import CacheSettings, Footprint, compute_footprint
from .layout import LayerGeometry, ModelGeometry, geometry_from_metadata
from .metadata import CatalogEntry, ModelMetadata


@dataclass(frozen=True)
class Inspection:
    metadata: ModelMetadata
    geometry: ModelGeometry
    footprint: Footprint
    entry: CatalogEntry | None = None

    @property
    def published_kv_matches(self) -> bool | None:
        """Whether the catalog's published f16 KV bytes/token equals ours (None when nothing is published)."""
        if self.entry is None or self.entry.published_kv_bytes_per_token is None:
            return None
        return self.entry.published_kv_bytes_per_token == f16_kv_bytes_per_token(self.geometry)

    @property
    def rope_scaling(self) -> dict:
        """The GGUF's `{arch}.rope.scaling.*` keys (type, factor, original context), if any."""
        prefix = f"{self.metadata.architecture}.{K.ROPE_SCALING_PREFIX}"
        return {k[len(prefix):]: v for k, v in self.metadata.keys.items() if k.startswith(prefix)}

    @property
    def beyond_trained_context(self) -> bool:
        return self.footprint.shape.n_ctx > self.geometry.n_ctx_train > 0

    @property
    def context_warning(self) -> str | None:
        """One line when n_ctx goes past the trained context (llama.cpp only warns, and allows it)."""
        if not self.beyond_trained_context:
            return None
        scaling = self.rope_scaling
        rope = ("the GGUF carries RoPE scaling keys (" + ", ".join(f"{k} {v}" for k, v in sorted(scaling.items())) + ")"
                if scaling else "the GGUF carries no RoPE scaling keys")
        return (f"n_ctx {self.footprint.shape.n_ctx:,} exceeds the trained context {self.geometry.n_ctx_train:,} "
                f"({self.metadata.architecture}.context_length); {rope}")

    def to_dict(self) -> dict:
        g, fp, s = self.geometry, self.footprint, self.footprint.settings
        reduction = fp.reduction
        data = {
            "source": self.metadata.source,
            "model": self.metadata.display_name,
            "architecture": g.architecture,
            "n_layer": g.n_layer,
            "n_layer_nextn": g.n_layer_nextn,
            "n_ctx_train": g.n_ctx_train,
            "beyond_trained_context": self.beyond_trained_context,
            "rope_scaling": self.rope_scaling,
            "layers": [_layer_dict(layer) for layer in g.layers],
            "cache_type_k": s.type_k,
            "cache_type_v": s.type_v,
            "flash_attn": s.flash_attn,
            "n_ctx_requested": s.n_ctx,
            "n_ctx": fp.shape.n_ctx,
            "n_ctx_seq": fp.shape.n_ctx_seq,
            "n_seq": s.n_seq,
            "n_stream": fp.shape.n_stream,
            "kv_unified": s.kv_unified,
            "swa_full": s.swa_full,
            "n_ubatch": fp.shape.n_ubatch,
            "n_swa": g.n_swa,
            "swa_cells": fp.shape.swa_cells,
            "kv_bytes_per_token": fp.kv_bytes_per_token,
            "full_gqa_kv_bytes_per_token": fp.full_gqa_kv_bytes_per_token,
            "reduction": None if reduction is None else round(reduction, 4),
            "kv_bytes": fp.kv_bytes,
            "k_bytes": fp.k_bytes + fp.swa_k_bytes,
            "v_bytes": fp.v_bytes + fp.swa_v_bytes,
            "swa_kv_bytes": fp.swa_kv_bytes,
            "recurrent_state_bytes": fp.recurrent_state_bytes,
            "recurrent_r_bytes": fp.recurrent_r_bytes,
            "recurrent_s_bytes": fp.recurrent_s_bytes,
            "weights_bytes": self.metadata.weights_bytes,
            "basis": "computed from GGUF metadata (theory)",
        }
        if self.entry is not None:
            data["catalog_id"] = self.entry.id
            data["published_kv_bytes_per_token"] = self.entry.published_kv_bytes_per_token
            data["published_kv_matches"] = self.published_kv_matches
            data["published_quants"] = [
                {"name": q.name, "bytes": q.bytes, "source": q.source, "basis": "published"}
                for q in self.entry.published_quants
            ]
        return data


def _layer_dict(layer: LayerGeometry) -> dict:
    return {
        "index": layer.index,
        "kind": str(layer.kind),
        "n_head_kv": layer.n_head_kv if layer.has_kv else 0,
        "k_width": layer.k_width,
        "v_width": layer.v_width,
    }


def f16_kv_bytes_per_token(geometry: ModelGeometry) -> int:
    return compute_footprint(geometry, CacheSettings(n_ctx=256)).kv_bytes_per_token


def inspect(metadata: ModelMetadata, settings: CacheSettings, entry: CatalogEntry | None = None) -> Inspection:
    geometry = geometry_from_metadata(metadata)
    check_for_llama(metadata, geometry)
    return Inspection(metadata, geometry, compute_footprint(geometry, settings), entry)


def kv_curve(result: Inspection, points: int = 64) -> list[list[int]]:
    """[n_ctx, KV bytes, recurrent bytes, full-GQA KV bytes] from 256 up to the trained length, for plots."""
    from dataclasses import replace

    top = max(result.geometry.n_ctx_train, result.footprint.shape.n_ctx)
    ctxs = sorted({max(256, round(top * i / points / 256) * 256) for i in range(1, points + 1)}
                  | {result.footprint.shape.n_ctx})
    out = []
    for n in ctxs:
        fp = compute_footprint(result.geometry, replace(result.footprint.settings, n_ctx=n))
        out.append([fp.shape.n_ctx, fp.kv_bytes, fp.recurrent_state_bytes, fp.full_gqa_kv_bytes_per_token * fp.shape.n_ctx])
    return out
