"""The `inspect` job: the layer layout and the theoretical KV / recurrent footprint, from the GGUF's metadata.

Reads the model's header only (a file, a URL's first bytes, or a catalog id's twin); never loads llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...memory.footprint import KvPoint, kv_curve
from ...memory.inspection import Inspection
from ...memory.inspection import inspect as inspect_metadata
from ...settings.sweep import params_from
from ..arguments import call_values
from ..source import ModelSource, resolve

INSPECT_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_seq", "kv_unified", "swa_full", "n_batch",
                  "n_ubatch", "n_rs_seq", "spec_type", "spec_draft_n_max", "type_k_draft", "type_v_draft")


@dataclass(frozen=True)
class Inspected:
    source: ModelSource
    inspection: Inspection
    kv_curve: tuple[KvPoint, ...]


def inspect_model(model: str, params: dict[str, Any]) -> Inspected:
    """The inspection of MODEL with these parameters, and KV against n_ctx up to the trained context."""
    values = call_values(params, INSPECT_PARAMS)
    source = resolve(model)
    p = params_from(values)
    result = inspect_metadata(source.metadata, p, source.entry)
    top = max(result.geometry.n_ctx_train, result.footprint.shape.n_ctx)
    return Inspected(source, result, kv_curve(result.geometry, result.footprint.params, top))
