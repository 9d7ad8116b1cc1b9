"""Full-size shape twins: a real model's every tensor shape and its real vocabulary, all data zero.

llama.cpp's no_alloc dry run never reads tensor data, so this file (sparse: its zero tensors are
holes, a few MB on disk) gives llama.cpp's real compute-buffer figure for a model we have only the
metadata of, and the parameter count of every tensor class.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ...core.errors import BadModelFile
from ...model.metadata import ModelMetadata, PublishedQuant
from ...world import gguf_file
from ..seeds.store import is_seeded
from .cache import cached_file
from .generic import write_generic_shape_twin


def vocab_size(meta: ModelMetadata) -> int:
    n = meta.arch_key("vocab_size")
    if not isinstance(n, int) or n < 259:
        raise BadModelFile(f"{meta.source}: a shape twin needs {meta.architecture}.vocab_size "
                           f"(the real vocabulary size)")
    return n


def write_shape_twin(meta: ModelMetadata, out_path: str | os.PathLike,
                     types: tuple[tuple[str, str], ...] = ()) -> Path:
    """llama.cpp's own tensor list for the model's keys, at every real size (generic.py). Its compact storage is
    checked by a dry run, unless the shipped seeds hold llama.cpp's answers on a twin of these very bytes (its name
    is their digest): llama.cpp created contexts on it then. `types`: a published file's tensor types."""
    seeded = is_seeded(f"shape-twins/{Path(out_path).name}")
    return write_generic_shape_twin(meta, out_path, vocab_size(meta), checked=not seeded, types=types).path


def cached_shape_twin(meta: ModelMetadata, label: str, quant: PublishedQuant | None = None) -> Path:
    """The shape twin; with a published quant that states its tensor types, one that stores them (its label and
    name carry the quant and the digest of its types)."""
    if quant is None or not quant.tensor_types:
        return cached_file("shape-twins", meta, label, (__file__,), write_shape_twin)
    types = quant.tensor_types
    digest = hashlib.sha256(json.dumps(types).encode()).hexdigest()[:8]
    return cached_file("shape-twins", meta, f"{label}-{quant.name}-{digest}", (__file__,),
                       lambda m, path: write_shape_twin(m, path, types))


def published_weights(source, quant: str | None = None):
    """A catalog model's shape twin (path and metadata) and the published quant its weights scale to: `quant`
    by name, or without one Q4_K_M, else the first published; None where the catalog publishes none."""
    quants = source.entry.published_quants if source.entry else ()
    if quant is not None:
        chosen = next((q for q in quants if q.name == quant), None)
    else:
        chosen = next((q for q in quants if q.name == "Q4_K_M"), quants[0] if quants else None)
    path = cached_shape_twin(source.metadata, source.label, chosen)
    return path, gguf_file.read_metadata(path), chosen
