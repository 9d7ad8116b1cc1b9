"""Full-size shape twins: a real model's every tensor shape and its real vocabulary, all data zero.

llama.cpp's no_alloc dry run never reads tensor data, so this file (sparse: its zero tensors are
holes, a few MB on disk) gives llama.cpp's real compute-buffer figure for a model we have only the
metadata of, and the parameter count of every tensor class.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ...core.errors import BadModelFile
from ...model.layout import geometry_from_metadata
from ...model.metadata import ModelMetadata
from ...world import gguf_file
from .build import family_for
from .cache import cached_file
from .context import TwinContext
from .generic import write_generic_shape_twin
from .writer import TensorSpec, write_gguf


def shape_keys(meta: ModelMetadata, family) -> dict:
    arch = meta.architecture
    keys = {k: v for k, v in meta.keys.items() if k.startswith(arch + ".")}
    keys["general.architecture"] = arch
    keys["general.name"] = f"{meta.display_name} shape twin"
    keys["general.type"] = "model"
    keys.setdefault(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    keys.setdefault(f"{arch}.rope.freq_base", 10000.0)
    if hasattr(family, "adjust_keys"):
        saved_embd, saved_ff = keys.get(f"{arch}.embedding_length"), keys.get(f"{arch}.feed_forward_length")
        family.adjust_keys(keys, arch)
        # families shrink for small twins; a shape twin keeps the real sizes
        keys[f"{arch}.embedding_length"] = saved_embd
        if saved_ff is not None:
            keys[f"{arch}.feed_forward_length"] = saved_ff
    return keys


def _zeroed(spec: TensorSpec) -> TensorSpec:
    dtype = spec.dtype
    if dtype == "f16" and len(spec.shape) >= 2 and spec.shape[0] % 32 == 0:
        dtype = "q4_0"  # keeps the apparent file size near a 4-bit quant
    return dataclasses.replace(spec, dtype=dtype, fill="zeros")


def vocab_size(meta: ModelMetadata) -> int:
    n = meta.arch_key("vocab_size")
    if not isinstance(n, int) or n < 259:
        raise BadModelFile(f"{meta.source}: a shape twin needs {meta.architecture}.vocab_size "
                           f"(the real vocabulary size)")
    return n


def write_shape_twin(meta: ModelMetadata, out_path: str | os.PathLike) -> Path:
    family = family_for(meta.architecture)
    n_vocab = vocab_size(meta)
    if family is None or geometry_from_metadata(meta).mtp_layers:  # llama.cpp's own tensor list, every real size
        return write_generic_shape_twin(meta, out_path, n_vocab).path
    keys = shape_keys(meta, family)
    twin_meta = ModelMetadata(source=str(out_path), architecture=meta.architecture, keys=keys)
    ctx = TwinContext(meta.architecture, keys, geometry_from_metadata(twin_meta), n_vocab_override=n_vocab)
    specs = [_zeroed(s) for s in family.tensors(ctx)]
    write_gguf(out_path, meta.architecture, keys, specs, n_vocab=n_vocab)
    return Path(out_path)


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
