"""Write a twin GGUF: metadata keys, a tiny byte-level SPM vocabulary, and tensor data.

Small tensors get seeded random values (norms ones); large quantized tensors are all zero and
written as holes, so a twin whose hidden size cannot shrink stays small on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, GGUFWriter

from ...core.errors import LlamabenchError
from ...model.metadata import TWIN_TENSOR_TYPES
from ...world.outputs import write_with

ALIGNMENT = 32  # GGUF default general.alignment
N_VOCAB = 3 + 256  # <unk>, <s>, </s> and the 256 byte tokens
# the tensor types a twin may store: its own (f32, f16, tq1_0) and a published file's (models.toml tensor_types)
_TYPES = {name: GGMLQuantizationType[name.upper()] for name in TWIN_TENSOR_TYPES}
GGML_TYPE_NAMES = {int(t): name for name, t in _TYPES.items()}  # enum ggml_type -> the dtypes a TensorSpec takes


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]  # ggml order: ne0 (the row length) first
    dtype: str = "f16"
    fill: str = "normal"  # normal | ones | zeros | negative

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def n_bytes(self) -> int:
        block, type_size = GGML_QUANT_SIZES[_TYPES[self.dtype]]
        if self.shape[0] % block:
            raise LlamabenchError(f"twin tensor {self.name}: row of {self.shape[0]} is not a multiple of {block} "
                                  f"for {self.dtype}")
        return self.n_elements // block * type_size


# GGUF value types by the names llama.cpp's gguf_type_name gives them (a typed value: llama.user_model.GgufValue)
_VALUE_TYPES = {"u8": GGUFValueType.UINT8, "i8": GGUFValueType.INT8, "u16": GGUFValueType.UINT16,
                "i16": GGUFValueType.INT16, "u32": GGUFValueType.UINT32, "i32": GGUFValueType.INT32,
                "u64": GGUFValueType.UINT64, "i64": GGUFValueType.INT64, "f32": GGUFValueType.FLOAT32,
                "f64": GGUFValueType.FLOAT64, "bool": GGUFValueType.BOOL, "str": GGUFValueType.STRING}


def _typed(value) -> bool:
    """A value that carries its GGUF type (`type`, a name of _VALUE_TYPES, and `value`, a tuple for an array)."""
    return isinstance(getattr(value, "type", None), str) and hasattr(value, "value")


def _add_key(writer: GGUFWriter, key: str, value) -> None:
    """A typed value as its type says; else llama.cpp reads counts as uint32 and arrays as int32/uint32/bool:
    write them so."""
    if _typed(value):
        if isinstance(value.value, tuple):
            writer.add_key_value(key, list(value.value), GGUFValueType.ARRAY, sub_type=_VALUE_TYPES[value.type])
        else:
            writer.add_key_value(key, value.value, _VALUE_TYPES[value.type])
    elif isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        if value < 0:
            writer.add_int32(key, value)
        else:
            writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    elif isinstance(value, (tuple, list)):
        if all(isinstance(v, bool) for v in value):
            writer.add_array(key, [bool(v) for v in value])
        elif all(isinstance(v, int) for v in value):
            writer.add_key_value(key, [int(v) for v in value], GGUFValueType.ARRAY, sub_type=GGUFValueType.INT32)
        elif all(isinstance(v, float) for v in value):
            writer.add_key_value(key, [float(v) for v in value], GGUFValueType.ARRAY, sub_type=GGUFValueType.FLOAT32)
        else:
            writer.add_array(key, list(value))
    else:
        raise LlamabenchError(f"twin key {key}: cannot write a {type(value).__name__}")


def _add_vocab(writer: GGUFWriter, n_vocab: int = N_VOCAB) -> None:
    """A byte-level SPM vocabulary, padded with plain tokens up to n_vocab."""
    extra = max(0, n_vocab - N_VOCAB)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [f"<t{i}>" for i in range(extra)]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    # token types: 1 normal, 2 unknown, 3 control, 6 byte
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * extra)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)


def _data(spec: TensorSpec, rng: np.random.Generator) -> bytes | None:
    """Tensor bytes, or None for an all-zero tensor (left as a hole in the file)."""
    if spec.dtype not in ("f32", "f16") or spec.fill == "zeros":
        return None
    np_type = np.float32 if spec.dtype == "f32" else np.float16
    n = spec.n_elements
    if spec.fill == "ones":
        values = np.ones(n, dtype=np_type)
    elif spec.fill == "negative":
        values = -np.abs(rng.standard_normal(n, dtype=np.float32) * 0.5 + 1.0).astype(np_type)
    else:
        values = (rng.standard_normal(n, dtype=np.float32) * 0.02).astype(np_type)
    return values.tobytes()


def write_gguf(
    path: str | os.PathLike,
    architecture: str,
    keys: Mapping[str, object],
    tensors: list[TensorSpec],
    *,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    n_vocab: int = N_VOCAB,
) -> int:
    """Write the file; returns its size in bytes (apparent size: zero tensors are holes). `n_vocab` 0: no
    vocabulary is added (the keys carry their own tokenizer)."""
    path = Path(path)
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise LlamabenchError(f"twin: duplicated tensor names {dup}")
    size = 0

    def write(tmp: Path) -> None:  # to a temporary name; outputs.write_with renames it into place or removes it
        nonlocal size
        writer = GGUFWriter(tmp, architecture)
        for key, value in keys.items():
            if key == "general.architecture":
                continue
            _add_key(writer, key, value)
        if n_vocab:
            _add_vocab(writer, n_vocab)
        for spec in tensors:
            numpy_shape = tuple(reversed(spec.shape))
            writer.add_tensor_info(spec.name, numpy_shape, np.dtype(np.float32), spec.n_bytes,
                                   raw_dtype=_TYPES[spec.dtype])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        fout = writer.fout[0]
        fout.flush()
        data_start = GGUFWriter.ggml_pad(fout.tell(), ALIGNMENT)
        writer.close()

        rng = np.random.default_rng(seed)
        offset = data_start
        total = len(tensors)
        with open(tmp, "r+b") as f:
            for i, spec in enumerate(tensors):
                blob = _data(spec, rng)
                if blob is not None:
                    f.seek(offset)
                    f.write(blob)
                offset += GGUFWriter.ggml_pad(spec.n_bytes, ALIGNMENT)
                if progress:
                    progress(i + 1, total)
            f.truncate(offset)
        size = offset

    # two processes may write the same cached twin: each its own temporary name, the last rename wins
    write_with(path, write, "GGUF")
    return size
