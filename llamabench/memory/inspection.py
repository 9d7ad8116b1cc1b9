"""Inspect = layout + footprint of one model under one set of parameters, as plain data. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import gguf_keys as K
from ..model.geometry import ModelGeometry
from ..model.layout import geometry_from_metadata
from ..model.metadata import CatalogEntry, ModelMetadata, PublishedQuant
from ..model.validate import check_for_llama
from ..settings.params import Params
from . import speculative
from .footprint import Footprint, compute_footprint


@dataclass(frozen=True)
class Published:
    """What the catalog publishes about a model (its sources are in models.toml)."""

    catalog_id: str
    kv_bytes_per_token: int | None = None  # f16, 1 sequence
    quants: tuple[PublishedQuant, ...] = ()


@dataclass(frozen=True)
class DraftFootprint:
    """llama-server's draft model (-md) beside the target: its own context at the target's cells and slots."""

    label: str
    architecture: str
    footprint: Footprint
    weights_bytes: int = 0  # the sum of its tensor infos (0 for a catalog entry)


def draft_footprint(label: str, meta: ModelMetadata, target: Params) -> DraftFootprint:
    """The draft context llama-server creates for `meta` beside a target context `target`
    (speculative.draft_context: the target's n_ctx and slots, -ctkd/-ctvd); a UsageError where the target's
    --spec-type does not run this model (an EAGLE3 head as a plain draft model, say)."""
    speculative.check_draft(target, meta.architecture, label)
    geometry = geometry_from_metadata(meta)
    return DraftFootprint(label, geometry.architecture,
                          compute_footprint(geometry, speculative.draft_context(target)), meta.weights_bytes)


@dataclass(frozen=True)
class Inspection:
    name: str
    source: str  # a path, a URL or "catalog:<id>"
    geometry: ModelGeometry
    footprint: Footprint
    weights_bytes: int = 0  # the sum of the tensor infos (0 for a catalog entry)
    n_tensors: int = 0
    rope_scaling: dict[str, str] = field(default_factory=dict)  # the GGUF's `{arch}.rope.scaling.*` keys, as text
    published: Published | None = None
    runtime: str = ""  # the program whose context is sized, in words (RuntimeConfig.describe); "" : not said
    draft: DraftFootprint | None = None  # -md: llama-server's draft model beside it
    weights_basis: str = ""  # --quant: where weights_bytes comes from, in words ("": the tensor infos as they are)

    @property
    def f16_kv_bytes_per_token(self) -> int:
        return f16_kv_bytes_per_token(self.geometry)

    @property
    def published_kv_matches(self) -> bool | None:
        """Whether the catalog's published f16 KV bytes/token equals ours (None when nothing is published)."""
        if self.published is None or self.published.kv_bytes_per_token is None:
            return None
        return self.published.kv_bytes_per_token == self.f16_kv_bytes_per_token

    @property
    def mtp_kv_bytes(self) -> int:
        """The MTP draft context's KV at this context with llama-server --spec-type draft-mtp (0 without an MTP
        layer): the footprint's own where it was asked for, else at the draft's default f16."""
        if self.footprint.mtp_kv_bytes or not self.geometry.mtp_layers:
            return self.footprint.mtp_kv_bytes
        return compute_footprint(self.geometry, self.footprint.params.replace(spec_type=speculative.MTP)).mtp_kv_bytes

    @property
    def beyond_trained_context(self) -> bool:
        return self.footprint.shape.n_ctx > self.geometry.n_ctx_train > 0

    @property
    def context_warning(self) -> str | None:
        """One line when n_ctx goes past the trained context (llama.cpp only warns, and allows it)."""
        if not self.beyond_trained_context:
            return None
        rope = ("the GGUF carries RoPE scaling keys ("
                + ", ".join(f"{k} {v}" for k, v in sorted(self.rope_scaling.items()))
                + ")" if self.rope_scaling else "the GGUF carries no RoPE scaling keys")
        return (f"n_ctx {self.footprint.shape.n_ctx:,} exceeds the trained context {self.geometry.n_ctx_train:,} "
                f"({self.geometry.architecture}.context_length); {rope}")


def f16_kv_bytes_per_token(geometry: ModelGeometry) -> int:
    return compute_footprint(geometry, Params(n_ctx=256)).kv_bytes_per_token


def rope_scaling(meta: ModelMetadata) -> dict[str, str]:
    prefix = f"{meta.architecture}.{K.ROPE_SCALING_PREFIX}"
    return {k[len(prefix):]: str(v) for k, v in meta.keys.items() if k.startswith(prefix)}


def inspect(metadata: ModelMetadata, params: Params, entry: CatalogEntry | None = None, *,
            draft_model: bool = False) -> Inspection:
    """The layout and footprint of `metadata`. An architecture without a layout rule (model.architectures.lookup
    is None) raises UnsupportedArchitecture whose message is the one line that says so."""
    geometry = geometry_from_metadata(metadata)
    check_for_llama(metadata, geometry)
    speculative.check(geometry, params, metadata.source, draft_model=draft_model)
    if params.spec_type in speculative.ROLLBACK_TYPES and not params.n_rs_seq:  # llama-server's need_n_rs_seq
        params = params.replace(n_rs_seq=params.spec_draft_n_max)
    published = (Published(entry.id, entry.published_kv_bytes_per_token, tuple(entry.published_quants))
                 if entry is not None else None)
    return Inspection(metadata.display_name, metadata.source, geometry, compute_footprint(geometry, params),
                      metadata.weights_bytes, len(metadata.tensors), rope_scaling(metadata), published)
