"""Full-size shape twins: a real model's every tensor shape and its real vocabulary, all data zero.

llama.cpp's no_alloc dry run never reads tensor data, so this file (sparse: its zero tensors are
holes, a few MB on disk) gives llama.cpp's real compute-buffer figure for a model we have only the
metadata of, and the parameter count of every tensor class.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...core.errors import BadModelFile
from ...model.metadata import ModelMetadata
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


def write_shape_twin(meta: ModelMetadata, out_path: str | os.PathLike) -> Path:
    """llama.cpp's own tensor list for the model's keys, at every real size (generic.py). Its compact storage is
    checked by a dry run, unless the shipped seeds hold llama.cpp's answers on a twin of these very bytes (its name
    is their digest): llama.cpp created contexts on it then."""
    seeded = is_seeded(f"shape-twins/{Path(out_path).name}")
    return write_generic_shape_twin(meta, out_path, vocab_size(meta), checked=not seeded).path


def cached_shape_twin(meta: ModelMetadata, label: str) -> Path:
    return cached_file("shape-twins", meta, label, (__file__,), write_shape_twin)


def published_weights(source, quant: str | None = None):
    """A catalog model's shape twin (path and metadata) and the published quant its weights scale to: `quant`
    by name, or without one Q4_K_M, else the first published; None where the catalog publishes none."""
    path = cached_shape_twin(source.metadata, source.label)
    quants = source.entry.published_quants if source.entry else ()
    if quant is not None:
        chosen = next((q for q in quants if q.name == quant), None)
    else:
        chosen = next((q for q in quants if q.name == "Q4_K_M"), quants[0] if quants else None)
    return path, gguf_file.read_metadata(path), chosen
