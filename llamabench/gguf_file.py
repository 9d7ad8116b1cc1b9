"""The one module that opens GGUF files. Reads metadata and tensor infos, never tensor data."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import BadModelFile
from .metadata import ModelMetadata, TensorInfo

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
# Arrays that can hold hundreds of thousands of entries and decide nothing about memory.
SKIPPED_ARRAY_PREFIXES = ("tokenizer.",)


def _field_value(field):
    from gguf import GGUFValueType

    if field.types and field.types[0] == GGUFValueType.ARRAY:
        return tuple(field.contents())
    return field.contents()


def read_metadata(path: str | os.PathLike) -> ModelMetadata:
    """Read a GGUF's metadata keys and tensor infos. Every failure is a one-line BadModelFile."""
    path = Path(path)
    if not path.exists():
        raise BadModelFile(f"{path}: no such file")
    if path.is_dir():
        raise BadModelFile(f"{path}: is a directory, not a GGUF file")
    file_bytes = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        raise BadModelFile(f"{path}: not a GGUF file (no GGUF magic at the start)")
    version = int.from_bytes(head[4:8], "little")
    if version not in SUPPORTED_VERSIONS:
        raise BadModelFile(f"{path}: GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)")

    from gguf import GGUFReader

    try:
        reader = GGUFReader(path, "r")
    except Exception as exc:  # the reader raises ValueError, IndexError, struct errors...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadModelFile(f"{path}: unreadable or truncated GGUF ({reason})") from exc

    keys = {}
    try:
        for name, field in reader.fields.items():
            if name.startswith("GGUF."):
                continue
            if name.startswith(SKIPPED_ARRAY_PREFIXES) and len(field.data) > 1:
                continue
            keys[name] = _field_value(field)
        tensors = tuple(
            TensorInfo(
                name=t.name,
                shape=tuple(int(d) for d in t.shape),
                ggml_type=int(t.tensor_type),
                n_bytes=int(t.n_bytes),
            )
            for t in reader.tensors
        )
        data_end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    except Exception as exc:
        raise BadModelFile(f"{path}: corrupt GGUF metadata ({type(exc).__name__}: {exc})") from exc
    if data_end > file_bytes:
        raise BadModelFile(f"{path}: truncated GGUF: tensor data ends at byte {data_end}, the file has {file_bytes}")

    architecture = keys.get("general.architecture")
    if not isinstance(architecture, str) or not architecture:
        raise BadModelFile(f"{path}: missing required key general.architecture")
    return ModelMetadata(
        source=str(path),
        architecture=architecture,
        keys=keys,
        tensors=tensors,
        file_bytes=file_bytes,
        name=str(keys.get("general.name", "")),
    )
