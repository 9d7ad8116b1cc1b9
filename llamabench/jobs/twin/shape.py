"""Full-size shape twins: a real model's every tensor shape and its real vocabulary, all data zero.

llama.cpp's no_alloc dry run never reads tensor data, so this file (sparse: its zero tensors are
holes, a few MB on disk) gives llama.cpp's real compute-buffer figure for a model we have only the
metadata of, and the parameter count of every tensor class.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...core import cache_types
from ...core.errors import BadModelFile, EngineError, UsageError
from ...core.units import file_size
from ...llama import worker
from ...model.metadata import TWIN_TENSOR_TYPES, ModelMetadata, PublishedQuant
from ...model.quants import LLAMA_FTYPES, ftype_of, imatrix_note, retyped
from ...world import gguf_file
from ..seeds.store import is_seeded
from .cache import cached_file
from .generic import TensorTypes, write_generic_shape_twin
from .writer import GGML_TYPE_NAMES

DEFAULT_QUANT = "Q4_K_M"  # the quant a catalog model is weighed in when none is named: what most people download


def vocab_size(meta: ModelMetadata) -> int:
    n = meta.arch_key("vocab_size")
    if not isinstance(n, int) or n < 259:
        raise BadModelFile(f"{meta.source}: a shape twin needs {meta.architecture}.vocab_size "
                           f"(the real vocabulary size)")
    return n


def write_shape_twin(meta: ModelMetadata, out_path: str | os.PathLike, types: TensorTypes | None = None, *,
                     checked: bool = True) -> Path:
    """llama.cpp's own tensor list for the model's keys, at every real size (generic.py). Its compact storage is
    checked by a dry run, unless the shipped seeds hold llama.cpp's answers on a twin of these very bytes (its name
    is their digest): llama.cpp created contexts on it then; `checked` off: no context is made on it (a recipe's
    input). `types`: each matrix's type in a published file or in llama.cpp's quantize recipe."""
    checked = checked and not is_seeded(f"shape-twins/{Path(out_path).name}")
    return write_generic_shape_twin(meta, out_path, vocab_size(meta), checked=checked, types=types).path


def cached_shape_twin(meta: ModelMetadata, label: str) -> Path:
    """The compact shape twin: big matrices in 1.69-bit tq1_0 (f16 where no 256-block divides a row)."""
    return cached_file("shape-twins", meta, label, (__file__,), write_shape_twin)


def _patterns(rows: tuple[tuple[str, str], ...]) -> TensorTypes:
    """A published file's tensor_types rows as a lookup: the first pattern that matches a tensor's name."""
    return lambda name: next((dtype for pattern, dtype in rows if re.search(pattern, name)), None)


def typed_shape_twin(meta: ModelMetadata, label: str, quant: str, rows: tuple[tuple[str, str], ...] = ()) -> Path:
    """A shape twin whose matrices are stored in a quant's types: a published file's (`rows`, models.toml's
    tensor_types), else llama.cpp's own recipe for that file type (llama_model_quantize with dry_run on the compact
    twin: llama_tensor_get_type, src/llama-quant.cpp). EngineError where llama.cpp has no such recipe."""
    if rows:
        digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:8]
        return cached_file("shape-twins", meta, f"{label}-{quant}-{digest}", (__file__,),
                           lambda m, path: write_shape_twin(m, path, _patterns(rows)))
    ftype = ftype_of(quant)
    if ftype is None:
        raise EngineError(f"{quant} is not one of llama-quantize's file types: " + ", ".join(LLAMA_FTYPES))

    def write(m: ModelMetadata, path: Path) -> Path:
        # the recipe reads the tensor list alone: a compact twin of its own, no context made on it (about 2 s less)
        listed = cached_file("shape-twins", m, f"{label}-tensors", (__file__,),
                             lambda mm, p: write_shape_twin(mm, p, checked=False))
        recipe = dict(worker.quantize_recipe(str(listed), ftype))
        unknown = sorted({t for t in recipe.values() if t not in TWIN_TENSOR_TYPES})
        if unknown:
            raise EngineError(f"llama.cpp's {quant} recipe uses types a twin cannot store: {', '.join(unknown)}")
        return write_shape_twin(m, path, recipe.get)

    return cached_file("shape-twins", meta, f"{label}-{quant.upper()}-recipe", (__file__,), write)


@dataclass(frozen=True)
class ShapeWeights:
    """A catalog model's weights without its file: the shape twin llama.cpp sizes, and what its tensors weigh."""

    path: Path
    meta: ModelMetadata  # the twin's, with tensor infos
    quant: PublishedQuant | None  # the published quant whose size they take (None: none published)
    scale: int | None  # a published size spread over the tensors; None: the twin's own tensors are the weights
    by_bytes: bool  # spread by each tensor's bytes in its type (typed twins), else by element count
    basis: str  # in words
    hint: str  # the file name a printed command uses


def published_weights(source, quant: str | None = None) -> ShapeWeights:
    """A catalog model's weights: `quant` by name, or without one its published Q4_K_M, else its first published
    quant, else llama.cpp's Q4_K_M recipe. A published size is spread over the tensors in the types of the published
    file (tensor_types) or of llama.cpp's recipe for its name; a quant with no published size takes the recipe's own
    bytes (what llama-quantize writes); where llama.cpp has no recipe, the compact twin stands, at q4_0 (an
    estimate, said so)."""
    quants = source.entry.published_quants if source.entry else ()
    chosen = (next((q for q in quants if q.name == quant), None) if quant is not None
              else next((q for q in quants if q.name == DEFAULT_QUANT), quants[0] if quants else None))
    meta, label = source.metadata, source.label
    name = chosen.name if chosen else quant or DEFAULT_QUANT
    if chosen is None and ftype_of(name) is None:
        published = ", ".join(q.name for q in quants) or "none"
        raise UsageError(f"--quant {quant}: the catalog holds no published {quant} size of {label}, and it is not one "
                         "of llama-quantize's file types", hint=f"published: {published}; llama.cpp's recipes: "
                         + ", ".join(LLAMA_FTYPES))
    hint = f"{label}-{name}.gguf"
    if chosen is not None and chosen.tensor_types:
        path = typed_shape_twin(meta, label, chosen.name, chosen.tensor_types)
        twin = gguf_file.read_metadata(path)
        return ShapeWeights(path, twin, chosen, None, True,
                            f"the published {chosen.name} file's tensor types (models.toml) on a full-size shape twin: "
                            f"{file_size(twin.weights_bytes)} of tensors (published file {file_size(chosen.bytes)})",
                            hint)
    try:
        path = typed_shape_twin(meta, label, name)
    except EngineError as exc:
        path = cached_shape_twin(meta, label)
        twin = gguf_file.read_metadata(path)
        if chosen is not None:
            return ShapeWeights(path, twin, chosen, chosen.bytes, False,
                                f"published {chosen.name} file size {file_size(chosen.bytes)} (models.toml), spread "
                                f"over tensors by parameter count: an estimate ({exc})", hint)
        q4 = q4_0_bytes(twin)
        return ShapeWeights(path, twin, None, q4, False, f"no published size in the catalog: every big matrix at "
                            f"q4_0, {file_size(q4)} (estimate; {exc})", hint)
    twin = gguf_file.read_metadata(path)
    recipe = f"llama.cpp's {name} recipe (llama_tensor_get_type)"
    if chosen is not None:
        return ShapeWeights(path, twin, chosen, chosen.bytes, True,
                            f"published {chosen.name} file size {file_size(chosen.bytes)} (models.toml), spread over "
                            f"the tensors as {recipe} types them: an estimate of each tensor's share", hint)
    return ShapeWeights(path, twin, None, None, True, f"no published {name} file in the catalog: {recipe} on a "
                        f"full-size shape twin, {file_size(twin.weights_bytes)} (what llama-quantize writes; a "
                        "published file may differ)", hint)


def q4_0_bytes(meta) -> int:
    """A shape twin's weights as if its big matrices (stored in tq1_0) were q4_0, the rest as stored: an estimate
    of a Q4 file. ggml's own row size (cache_types.row_bytes); a tq1_0 row is a multiple of 256, so of 32."""
    return sum(cache_types.row_bytes("q4_0", t.shape[0]) * math.prod(t.shape[1:])
               if GGML_TYPE_NAMES.get(t.ggml_type) == "tq1_0" else t.n_bytes for t in meta.tensors)


def file_in_quant(source, quant: str) -> ShapeWeights:
    """A local GGUF's weights as llama-quantize would write them in `quant` (`fit FILE --quant Q2_K`): llama.cpp's
    own recipe for that file type asked of this very file (llama_model_quantize with dry_run and allow_requantize,
    nothing written), each tensor's bytes from the type it gets. UsageError for a remote file (its tensor data is
    not here) or a name that is not one of llama-quantize's file types."""
    if source.path is None or source.url:
        raise UsageError(f"--quant {quant} on {source.label}: the recipe is asked of the file's own tensors, which "
                         "are not here", hint="download the file, or read that quant's own header: -hf OWNER/REPO:"
                                              f"{quant}")
    ftype = ftype_of(quant)
    if ftype is None:
        raise UsageError(f"--quant {quant}: not one of llama-quantize's file types",
                         hint="its file types: " + ", ".join(LLAMA_FTYPES))
    recipe = dict(worker.quantize_recipe(str(source.path), ftype))
    meta = retyped(source.metadata, recipe)
    name = quant.strip().upper()
    stem = source.path.name.removesuffix(".gguf")
    basis = (f"{source.path.name} as llama.cpp's {name} recipe types its tensors (llama_tensor_get_type, asked of "
             f"this file without writing, as llama-quantize --allow-requantize would): {file_size(meta.weights_bytes)}"
             f" against {file_size(source.metadata.weights_bytes)} as it is")
    needs = imatrix_note(name, recipe)
    return ShapeWeights(source.path, meta, None, None, False, basis + (f"; {needs}" if needs else ""),
                        f"{stem}-{name}.gguf")
