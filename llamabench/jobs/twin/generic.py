"""Twins of any architecture, with no per-architecture code: llama.cpp itself lists the tensors.

The metadata goes to llama.cpp (`llama.worker.model_tensors`: `llama_model_init_from_user` with no_alloc, in a
child process), which answers every tensor it creates for it, name, shape and type; the twin is that metadata,
a tiny byte-level vocabulary and those tensors, all zero: the data region is a hole in a sparse file, so even a
full-shape twin (every real size) takes a few MB of disk.

- `write_from_metadata`: a twin of exactly the metadata given (a geometry twin when its sizes are tiny).
- `write_generic_twin`: the geometry twin of a real model (a catalog entry or a GGUF): every key kept, the
  vocabulary, FFN and expert widths and the expert count shrunk (none of them sizes a cache), big matrices
  stored in 1.69 bits a weight; where llama.cpp refuses the shrunk keys, the real ones.
- `write_generic_shape_twin`: every real size and the real vocabulary, for llama.cpp's compute buffers.
This is the twin writer of every architecture (build.write_twin, shape.write_shape_twin).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import gguf
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ...core.errors import EngineError, LlamabenchError
from ...llama import worker
from ...llama.user_model import GGUF_TYPE_IDS, INT_TYPES, GgufValue, Metadata, TensorShape
from ...memory.footprint import compute_footprint
from ...memory.verification import all_ok, compare
from ...model import architectures
from ...model import gguf_keys as K
from ...model.layout import geometry_from_metadata
from ...model.metadata import ModelMetadata
from ...settings.params import Params
from ..seeds.store import keys_digest, seeded_listing
from .writer import GGML_TYPE_NAMES, N_VOCAB, TensorSpec, write_gguf

TWIN_NAME = "llamabench twin"  # general.name: never the model's own (llama-vocab.cpp special-cases phi3 by name)
# not copied from the source: llama.cpp reads general.* for the name only; the vocabulary is the twin's own;
# a split set's keys would make llama.cpp look for the other parts
DROPPED_PREFIXES = ("general.", "tokenizer.", "split.", "adapter.", "quantize.", "imatrix.")
KEPT_TOKENIZER_KEYS = ("tokenizer.ggml.token_type_count",)  # sizes a tensor (BERT's token_types)
SMALL_FF, SMALL_FF_EXP, SMALL_N_EXPERT = 64, 32, 4
SMALL_EMBD = 256  # a geometry twin's hidden size, where no cache or state depends on it (narrowed)
COMPACT_MIN_ELEMENTS = 1 << 20  # smaller tensors stay f32, as llama.cpp created them
COMPACT_ROW = 256  # tq1_0's block: a row of a multiple of it can be stored in 1.69 bits a weight
KEEP_F32 = ("norm", "conv", "ssm_a", "ssm_d", "time_", "pos_embd")  # read by ops other than a matmul
VALIDATE_N_CTX = 256

# keys llama.cpp requires that size no cache and that a catalog entry may leave out (it sources what sizes a cache):
# stated, with these values, only when llama.cpp names one missing ("key not found in model: ARCH.SUFFIX")
WEIGHT_ONLY_DEFAULTS = {
    "attention.layer_norm_rms_epsilon": GgufValue("f32", 1e-6),
    "attention.layer_norm_epsilon": GgufValue("f32", 1e-5),  # nemotron_h's MTP head norm, read even without one
    "rope.freq_base": GgufValue("f32", 10000.0),
    "rope.dimension_sections": GgufValue("i32", (11, 11, 10, 0)),  # qwen35 / qwen35moe's M-RoPE sections
    "expert_shared_count": GgufValue("u32", 0),
    "leading_dense_block_count": GgufValue("u32", 0),
}
_MISSING_KEY = re.compile(r"key not found in model: (\S+)")

_TYPE_NAMES = {i: name for name, i in GGUF_TYPE_IDS.items()}
_ARRAY = 9  # GGUFValueType.ARRAY


@dataclass(frozen=True)
class WrittenTwin:
    path: Path
    file_bytes: int  # apparent size
    disk_bytes: int  # allocated on disk (the tensor data is a hole)
    n_tensors: int
    seconds: float
    metadata: dict[str, GgufValue]  # what was written, vocabulary included


def _inferred(value) -> GgufValue:
    """A value without a stated GGUF type (a catalog entry), typed as writer._add_key writes it."""
    if isinstance(value, tuple):
        kind = ("bool" if all(isinstance(v, bool) for v in value)
                else "i32" if all(isinstance(v, int) for v in value)
                else "f32" if all(isinstance(v, (int, float)) for v in value) else "str")
        return GgufValue(kind, tuple(float(v) for v in value) if kind == "f32" else value)
    if isinstance(value, bool):
        return GgufValue("bool", value)
    if isinstance(value, int):
        return GgufValue("i32" if value < 0 else "u32" if value < 2**32 else "u64", value)
    if isinstance(value, float):
        return GgufValue("f32", value)
    return GgufValue("str", str(value))


def _stated(value, types: tuple[int, ...] | None) -> GgufValue:
    """A value with the GGUF type its file states (floats as floats), else the type writer._add_key gives it."""
    kind = _TYPE_NAMES.get(types[-1]) if types else None
    if kind is None or (types[0] == _ARRAY) != isinstance(value, tuple):
        return _inferred(value)
    if kind in ("f32", "f64"):
        return GgufValue(kind, tuple(float(v) for v in value) if isinstance(value, tuple) else float(value))
    return GgufValue(kind, value)


def typed_metadata(meta: ModelMetadata) -> dict[str, GgufValue]:
    """The model's keys a twin keeps, each with its GGUF type (as the file states it, else inferred)."""
    out = {key: _stated(value, meta.value_types.get(key)) for key, value in meta.keys.items()
           if not key.startswith(DROPPED_PREFIXES) or key in KEPT_TOKENIZER_KEYS}
    out["general.architecture"] = GgufValue("str", meta.architecture)
    return out


def vocab_keys(n_vocab: int = N_VOCAB) -> dict[str, GgufValue]:
    """A byte-level SPM vocabulary of `n_vocab` tokens (at least 259), as writer._add_vocab writes it."""
    extra = max(0, n_vocab - N_VOCAB)
    tokens = ("<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *(f"<t{i}>" for i in range(extra)))
    return {
        "tokenizer.ggml.model": GgufValue("str", "llama"),
        "tokenizer.ggml.tokens": GgufValue("str", tokens),
        "tokenizer.ggml.scores": GgufValue("f32", (0.0,) * len(tokens)),
        # token types: 1 normal, 2 unknown, 3 control, 6 byte
        "tokenizer.ggml.token_type": GgufValue("i32", (2, 3, 3) + (6,) * 256 + (1,) * extra),
        "tokenizer.ggml.unknown_token_id": GgufValue("u32", 0),
        "tokenizer.ggml.bos_token_id": GgufValue("u32", 1),
        "tokenizer.ggml.eos_token_id": GgufValue("u32", 2),
        "tokenizer.ggml.add_bos_token": GgufValue("bool", True),
    }


def with_vocab(metadata: Metadata, n_vocab: int | None = None) -> dict[str, GgufValue]:
    """The metadata with a vocabulary: its own where it has tokens, else one of `n_vocab` tokens (default: its
    `{arch}.vocab_size`, at least 259), the vocab_size key then set to the count written."""
    keys = dict(metadata)
    if "tokenizer.ggml.tokens" in keys:
        return keys
    arch = keys["general.architecture"].value
    stated = keys.get(f"{arch}.vocab_size")
    count = max(N_VOCAB, n_vocab or (stated.value if stated is not None and not stated.is_array else 0))
    if stated is not None:
        keys[f"{arch}.vocab_size"] = GgufValue(stated.type, count)
    keys.setdefault("general.name", GgufValue("str", TWIN_NAME))
    keys.setdefault("general.type", GgufValue("str", "model"))
    return keys | vocab_keys(count)


# the weights whose ".scale" / ".input_scale" sidecars llama.cpp's generic pass adds (NVFP4 / FP8 files only), by
# their GGUF names: src/llama-model.cpp:1634-1795 (attention, FFN, shared and routed experts, NextN, output, SSM)
_SIDECAR_OWNERS = frozenset(gguf.TENSOR_NAMES[getattr(gguf.MODEL_TENSOR, n)].removeprefix("blk.{bid}.") for n in (
    "ATTN_GATE", "ATTN_K", "ATTN_OUT", "ATTN_Q", "ATTN_QKV", "ATTN_V", "FFN_DOWN", "FFN_DOWN_EXP", "FFN_DOWN_SHEXP",
    "FFN_GATE", "FFN_GATE_EXP", "FFN_GATE_SHEXP", "FFN_UP", "FFN_UP_EXP", "FFN_UP_SHEXP", "NEXTN_EH_PROJ",
    "NEXTN_SHARED_HEAD_HEAD", "OUTPUT", "SSM_ALPHA", "SSM_BETA", "SSM_IN", "SSM_OUT"))


def twin_tensors(tensors: tuple[TensorShape, ...]) -> tuple[TensorShape, ...]:
    """The tensors a twin file carries: llama.cpp's list without the per-tensor quantization sidecars its
    generic pass adds after every weight of `_SIDECAR_OWNERS` (`X.scale`, `X.input_scale`: NVFP4 / FP8 files
    only). Another `.scale` is the architecture's own and stays (gemma4's router `ffn_gate_inp.scale`,
    src/models/gemma4.cpp:116, is required)."""
    names = {t.name for t in tensors}

    def sidecar(name: str) -> bool:
        for suffix in (".input_scale", ".scale"):
            base = name.removesuffix(suffix)
            if base != name and base + ".weight" in names:
                return (base.split(".", 2)[-1] if base.startswith("blk.") else base) in _SIDECAR_OWNERS
        return False

    return tuple(t for t in tensors if not sidecar(t.name))


def converted(meta: ModelMetadata, tensors: tuple[TensorShape, ...]) -> tuple[TensorShape, ...]:
    """llama.cpp's list without the optional tensors a converted file of this model lacks: output.weight where the
    model ties its embeddings (a catalog entry's tied_embeddings: llama.cpp then reuses token_embd), and what the
    architecture's converter never writes (architectures.Architecture.unconverted: Qwen3.5's NextN embed_tokens and
    shared head)."""
    rule = architectures.lookup(meta.architecture)
    gone = rule.unconverted if rule is not None else ()

    def base(name: str) -> str:  # a weight and its quantization sidecars (.scale, .input_scale) go together
        for suffix in (".weight", ".input_scale", ".scale"):
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name

    dropped = {base(g) for g in gone}

    def kept(name: str) -> bool:
        if meta.tied_embeddings and base(name) == "output":
            return False
        return not (name.startswith("blk.") and base(name.split(".", 2)[-1]) in dropped)

    return tuple(t for t in tensors if kept(t.name))


TensorTypes = Callable[[str], "str | None"]  # a tensor's name -> the ggml type a published file stores it in, or None


def _dtype(t: TensorShape, compact: bool, types: TensorTypes | None = None) -> str:
    """How a tensor is stored: as llama.cpp created it (f32), or where `compact` a big matrix in tq1_0 (1.69 bits
    a weight) where its row allows, else f16. Not q4_0 / q8_0: on CPUs with AMX those go to the AMX buffer type,
    whose matmul crashed (SIGSEGV in ggml_backend_amx_mul_mat) on a q4_0 {32, 4096} matrix. `types`: a published
    file's (or llama.cpp's quantize recipe's) type of a matrix, where its block divides the row (dry runs only: they
    load with no repacked buffer types)."""
    dtype = types(t.name) if types is not None and len(t.shape) >= 2 else None
    if dtype is not None and t.shape[0] % GGML_QUANT_SIZES[GGMLQuantizationType[dtype.upper()]][0] == 0:
        return dtype
    if (compact and len(t.shape) >= 2 and t.n_elements >= COMPACT_MIN_ELEMENTS
            and not any(word in t.name for word in KEEP_F32)):
        return "tq1_0" if t.shape[0] % COMPACT_ROW == 0 else "f16"
    return GGML_TYPE_NAMES.get(t.ggml_type, "f32")


def tensor_specs(tensors: tuple[TensorShape, ...], *, compact: bool = False,
                 types: TensorTypes | None = None) -> list[TensorSpec]:
    return [TensorSpec(t.name, t.shape, _dtype(t, compact, types), fill="zeros") for t in twin_tensors(tensors)]


def write_from_metadata(
    metadata: Metadata,
    out_path: str | os.PathLike,
    *,
    tensors: tuple[TensorShape, ...] | None = None,
    tensors_of: Callable[[Metadata], tuple[TensorShape, ...]] = worker.model_tensors,
    compact: bool = False,
    types: TensorTypes | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> WrittenTwin:
    """A twin of exactly this metadata (a vocabulary added where it has none): the tensors llama.cpp creates for
    it (`tensors_of`, a child process by default; or `tensors` already listed), all zero. EngineError with
    llama.cpp's reason where it refuses the metadata."""
    start = time.perf_counter()
    keys = with_vocab(metadata)
    arch = keys["general.architecture"].value
    listed = tensors if tensors is not None else tensors_of(keys)
    specs = tensor_specs(listed, compact=compact, types=types)
    size = write_gguf(out_path, arch, keys, specs, n_vocab=0, progress=progress)
    out = Path(out_path)
    st = out.stat()
    disk = st.st_blocks * 512 if hasattr(st, "st_blocks") else size
    return WrittenTwin(out, size, disk, len(specs), time.perf_counter() - start, keys)


def _shrink_value(v: GgufValue, new: int) -> GgufValue:
    if v.is_array:
        return GgufValue(v.type, tuple(min(x, new) if x else 0 for x in v.value))
    return GgufValue(v.type, min(v.value, new) if v.value else 0)


def shrunk(metadata: Metadata) -> dict[str, GgufValue]:
    """Geometry-twin keys: the FFN and expert widths, the expert count and the vocabulary made small. None of
    them sizes a KV cache or a recurrent state (a per-layer FFN width of 0, a layer-kind marker, stays 0)."""
    keys = dict(metadata)
    arch = keys["general.architecture"].value
    p = f"{arch}."
    for suffix, new in ((K.FEED_FORWARD_LENGTH, SMALL_FF), (K.EXPERT_FEED_FORWARD_LENGTH, SMALL_FF_EXP),
                        (K.EXPERT_SHARED_FEED_FORWARD_LENGTH, SMALL_FF_EXP), (K.EXPERT_COUNT, SMALL_N_EXPERT)):
        if p + suffix in keys and keys[p + suffix].type in INT_TYPES:
            keys[p + suffix] = _shrink_value(keys[p + suffix], new)
    n_expert, used = keys.get(p + K.EXPERT_COUNT), keys.get(p + K.EXPERT_USED_COUNT)
    if n_expert is not None and used is not None and not n_expert.is_array and used.type in INT_TYPES:
        keys[p + K.EXPERT_USED_COUNT] = _shrink_value(keys[p + K.EXPERT_USED_COUNT], n_expert.value)
    for suffix in ("expert_group_count", "expert_group_used_count"):  # groups of the real expert count
        keys.pop(p + suffix, None)
    keys[p + "vocab_size"] = GgufValue("u32", N_VOCAB)
    return keys


def listed_tensors(metadata: Metadata) -> tuple[dict[str, GgufValue], tuple[TensorShape, ...]]:
    """The tensors llama.cpp creates for `metadata`, and the keys they were listed for: the metadata, with each
    weight-only key llama.cpp names missing stated at its default (WEIGHT_ONLY_DEFAULTS). EngineError otherwise.
    llama.cpp's own list where the shipped seeds hold it for these very keys (the built-in default's twins)."""
    seeded = seeded_listing(keys_digest(metadata))
    if seeded is not None:
        keys = dict(metadata) | {name: GgufValue(t, tuple(v) if isinstance(v, list) else v)
                                 for name, (t, v) in seeded.get("added", {}).items()}
        return keys, tuple(TensorShape(name, tuple(shape), int(kind)) for name, shape, kind in seeded["tensors"])
    keys = dict(metadata)
    prefix = keys["general.architecture"].value + "."
    while True:
        try:
            return keys, worker.model_tensors(keys)
        except EngineError as exc:
            missing = _MISSING_KEY.search(str(exc))
            name = missing.group(1) if missing else ""
            default = WEIGHT_ONLY_DEFAULTS.get(name.removeprefix(prefix)) if name.startswith(prefix) else None
            if default is None or name in keys:
                raise
            keys[name] = default


def _dry_run_ok(path: Path) -> bool:
    """Whether llama.cpp loads the twin and creates a context (a stored type some op cannot read aborts it)."""
    try:
        worker.dry_runs(str(path), [Params(n_ctx=VALIDATE_N_CTX)])
    except EngineError:
        return False
    return True


def _plain(metadata: Metadata) -> ModelMetadata:
    arch = metadata["general.architecture"].value
    return ModelMetadata(source="twin", architecture=arch, keys={k: v.value for k, v in metadata.items()})


def _cache_signature(metadata: Metadata) -> tuple | None:
    """Everything of the layout that sizes a cache or a state (the layers, their widths, the recurrent state, the
    window, the MTP layers), without the hidden size; None where llamabench has no rule for the architecture."""
    try:
        g = geometry_from_metadata(_plain(metadata))
    except LlamabenchError:
        return None
    return (g.layers, g.mtp_layers, g.n_swa, g.is_mla, g.recurrent_r_width, g.recurrent_s_width, g.v_width_max,
            g.index_v_width_max, g.n_layer, g.n_layer_nextn)


def narrowed(metadata: Metadata) -> dict[str, GgufValue] | None:
    """The keys with the hidden size cut to SMALL_EMBD, the head sizes it implied stated (key_length defaults to
    n_embd / n_head in llama.cpp); None where that would change a cache or a state, or it is small already."""
    keys = dict(metadata)
    p = keys["general.architecture"].value + "."
    embd = keys.get(p + K.EMBEDDING_LENGTH)
    heads = keys.get(p + K.HEAD_COUNT)
    if embd is None or embd.is_array or embd.type not in INT_TYPES or embd.value <= SMALL_EMBD:
        return None
    n_head = max(heads.value) if heads is not None and heads.is_array and heads.value else (
        heads.value if heads is not None and not heads.is_array else 0)
    for suffix in (K.KEY_LENGTH, K.VALUE_LENGTH):
        if p + suffix not in keys and n_head:
            keys[p + suffix] = GgufValue("u32", embd.value // n_head)
    keys[p + K.EMBEDDING_LENGTH] = GgufValue(embd.type, SMALL_EMBD)
    before = _cache_signature(metadata)
    return keys if before is not None and _cache_signature(keys) == before else None


def _llama_sizes_as_theory(path: Path, metadata: Metadata) -> bool:
    """Whether llama.cpp creates a context of the twin and sizes its caches as the theory of `metadata` does."""
    params = Params(n_ctx=VALIDATE_N_CTX)
    try:
        dry = worker.dry_runs(str(path), [params])[0]
    except EngineError:
        return False
    return all_ok(compare(compute_footprint(geometry_from_metadata(_plain(metadata)), params), dry.allocations))


def _layer_kinds(metadata: Metadata) -> list | None:
    """The layer layout llamabench's rules give these keys; None where it has none for the architecture."""
    arch = metadata["general.architecture"].value
    plain = ModelMetadata(source="twin", architecture=arch, keys={k: v.value for k, v in metadata.items()})
    try:
        return [layer.kind for layer in geometry_from_metadata(plain).layers]
    except LlamabenchError:
        return None


def _write_checked(keys: dict[str, GgufValue], tensors: tuple[TensorShape, ...], out_path,
                   progress, *, checked: bool = True, types: TensorTypes | None = None) -> WrittenTwin:
    """Big matrices in tq1_0 where llama.cpp then still creates a context; else every tensor in f32. `checked`
    off: the compact file is known to work (llama.cpp answered dry runs on these very bytes). `types`: a published
    file's tensor types, kept in either case."""
    twin = write_from_metadata(keys, out_path, tensors=tensors, compact=True, types=types, progress=progress)
    compacted = any(_dtype(t, True, types) != _dtype(t, False, types) for t in tensors)
    if compacted and checked and not _dry_run_ok(twin.path):
        twin = write_from_metadata(keys, out_path, tensors=tensors, compact=False, types=types, progress=progress)
    return twin


def write_generic_twin(meta: ModelMetadata, out_path: str | os.PathLike, *,
                       progress: Callable[[int, int], None] | None = None) -> WrittenTwin:
    """The geometry twin of a real model of any architecture: its keys with the FFN / expert widths, the expert
    count and the vocabulary shrunk, or, where llama.cpp refuses those or they would change the layer layout,
    its real keys; EngineError with llama.cpp's reason where it refuses both."""
    real = typed_metadata(meta)
    real["general.name"] = GgufValue("str", f"{TWIN_NAME} (geometry)")
    narrow = narrowed(shrunk(real))
    if narrow is not None:  # a narrow hidden size where no cache depends on it, llama.cpp sizing it as the theory
        try:
            keys, tensors = listed_tensors(with_vocab(narrow, N_VOCAB))
            twin = _write_checked(keys, converted(meta, tensors), out_path, progress)
            if _llama_sizes_as_theory(twin.path, real):
                return twin
        except EngineError:
            pass  # llama.cpp refuses the narrow keys: the real hidden size below
    layout = _layer_kinds(real)
    refused: EngineError | None = None
    for keys in (shrunk(real), real):
        if layout is not None and keys is not real and _layer_kinds(keys) != layout:
            continue
        try:
            keys, tensors = listed_tensors(with_vocab(keys, N_VOCAB))
        except EngineError as exc:
            refused = refused or exc
            continue
        return _write_checked(keys, converted(meta, tensors), out_path, progress)
    raise refused or EngineError(f"{meta.source}: no twin keys llama.cpp accepts")


def write_generic_shape_twin(meta: ModelMetadata, out_path: str | os.PathLike, n_vocab: int, *,
                             checked: bool = True, types: TensorTypes | None = None) -> WrittenTwin:
    """Every real size and the real vocabulary size (`n_vocab`), all data zero, big matrices in tq1_0 (or, with
    `types`, in a published file's types)."""
    keys, tensors = listed_tensors(shape_twin_keys(meta, n_vocab))
    return _write_checked(keys, converted(meta, tensors), out_path, None, checked=checked, types=types)


def shape_twin_keys(meta: ModelMetadata, n_vocab: int) -> dict[str, GgufValue]:
    """The keys a shape twin's tensors are listed for: the model's own, its real vocabulary size."""
    keys = typed_metadata(meta)
    keys["general.name"] = GgufValue("str", f"{TWIN_NAME} (shape)")
    return with_vocab(keys, n_vocab)
