"""The one module that opens GGUF files. Reads metadata and tensor infos, never tensor data."""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
from gguf import GGUFReader, GGUFValueType

from .errors import BadModelFile
from .metadata import ModelMetadata, TensorInfo, cut
from .outputs import note_input
from .safe_text import escaped, escaped_tree


GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
# Arrays that can hold hundreds of thousands of entries and decide nothing about memory.
SKIPPED_ARRAY_PREFIXES = ("tokenizer.",)


SKIM_ARRAYS_ABOVE = 4096  # longer arrays (vocabularies, merges) are stepped over, not decoded
# Bounds on what a header may make the reader build (gguf.GGUFReader keeps a few objects per key, per
# decoded array entry and per tensor: about 3 KiB a key, 0.75 KiB an entry). Real GGUFs hold tens of
# keys, a few per-layer arrays of at most a few hundred entries, and at most some thousands of tensors.
MAX_KEYS = 16_384
MAX_TENSORS = 65_536
MAX_DECODED_ENTRIES = 65_536  # entries of the arrays short enough to be decoded, summed over the file


class _TooMuch(Exception):
    """A header that asks the reader to decode more array entries than MAX_DECODED_ENTRIES."""


def _skimming_reader_class():
    """gguf.GGUFReader, but stepping over long arrays instead of building one numpy view per item.

    The stock reader takes over 10 s on a 150k-token vocabulary; metadata that decides memory
    is never in such arrays.
    """
    class SkimmingReader(GGUFReader):
        def _get_field_parts(self, orig_offs, raw_type):
            if raw_type != GGUFValueType.ARRAY:
                return super()._get_field_parts(orig_offs, raw_type)
            raw_itype = self._get(orig_offs, np.uint32)
            alen = self._get(orig_offs + 4, np.uint64)
            n_items = int(alen[0])
            if n_items <= SKIM_ARRAYS_ABOVE:
                self.decoded_entries = getattr(self, "decoded_entries", 0) + n_items
                if self.decoded_entries > MAX_DECODED_ENTRIES:
                    raise _TooMuch()
                return super()._get_field_parts(orig_offs, raw_type)
            itype = GGUFValueType(int(raw_itype[0]))
            offs = orig_offs + 12
            if itype == GGUFValueType.STRING:
                order = ">" if self.byte_order == "S" else "<"
                view = memoryview(self.data)
                unpack = struct.Struct(order + "Q").unpack_from
                for _ in range(n_items):
                    offs += 8 + unpack(view, offs)[0]
            elif itype in self.gguf_scalar_to_np:
                offs += n_items * np.dtype(self.gguf_scalar_to_np[itype]).itemsize
            else:
                return super()._get_field_parts(orig_offs, raw_type)
            return offs - orig_offs, [raw_itype, alen], [], [GGUFValueType.ARRAY, itype]

    return SkimmingReader


def _field_value(field):
    if field.types and field.types[0] == GGUFValueType.ARRAY:
        return tuple(field.contents())
    return field.contents()


MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8  # name length, a 1-byte name, n_dims, one dim, type, offset
MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, a 1-byte key, value type, a 1-byte value
def check_regular_file(path: Path, what: str = "GGUF file") -> None:
    """A regular file, or a one-line error at once: a FIFO or a device would block or never end."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise BadModelFile(f"{path}: no such file") from None
    except OSError as exc:
        raise BadModelFile(f"{path}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise BadModelFile(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(mode):
        raise BadModelFile(f"{path}: not a regular file (a FIFO, socket or device), not a {what}")


SPLIT_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


def sibling_part(first: Path, index: int, count: int) -> Path:
    """Part `index` (1-based) of a split set, beside the first: NAME-00002-of-00003.gguf."""
    m = SPLIT_NAME.search(first.name)
    if not m:
        raise BadModelFile(f"{first}: a split GGUF ({count} parts) whose name does not end in -00001-of-{count:05d}.gguf")
    return first.with_name(first.name[:m.start()] + f"-{index:05d}-of-{count:05d}.gguf")


def read_metadata(path: str | os.PathLike, part: Callable[[int, int], Path] | None = None) -> ModelMetadata:
    """Read a GGUF's metadata keys and tensor infos. Every failure is a one-line BadModelFile.

    A split set (split.count > 1) is read as one model from its first part: metadata from it,
    tensor infos from every part (`part(index, count)` locates part `index`; default: beside it).
    """
    meta = _read_one(Path(path))
    count = meta.keys.get("split.count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count <= 1:
        return meta
    if count > 9999:
        raise BadModelFile(f"{path}: split.count {count:,} is not a split set llama.cpp reads")
    split_no = meta.keys.get("split.no", 0)
    if not isinstance(split_no, int) or isinstance(split_no, bool):
        raise BadModelFile(f"{path}: split.no should be a number, got {cut(split_no)}")
    if split_no != 0:
        raise BadModelFile(f"{path}: part {split_no + 1} of a split set: give the first part")
    locate = part or (lambda index, n: sibling_part(Path(path), index, n))
    tensors, total = list(meta.tensors), meta.file_bytes
    for index in range(2, count + 1):
        part_path = locate(index, count)
        if not Path(part_path).exists():
            raise BadModelFile(f"{path}: part {index} of {count} is missing: {part_path}")
        part_meta = _read_one(Path(part_path), need_architecture=False)
        tensors += [replace(t, part=index - 1) for t in part_meta.tensors]
        total += part_meta.file_bytes
    expected = meta.keys.get("split.tensors.count")
    if isinstance(expected, int) and expected != len(tensors):
        raise BadModelFile(f"{path}: the split set holds {len(tensors)} tensors, split.tensors.count says {expected}")
    # offsets are per part: llama.cpp maps each part's span of host tensors apart (weights.host_mapped)
    return replace(meta, tensors=tuple(tensors), file_bytes=total)


def _read_one(path: Path, *, need_architecture: bool = True) -> ModelMetadata:
    check_regular_file(path)
    note_input(path)  # an input of this run: no output may be written over it
    file_bytes = path.stat().st_size
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError as exc:  # /proc/self/mem, a file on a failing disk
        raise BadModelFile(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        raise BadModelFile(f"{path}: not a GGUF file (no GGUF magic at the start)")
    version = int.from_bytes(head[4:8], "little")
    if version not in SUPPORTED_VERSIONS:
        raise BadModelFile(f"{path}: GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)")
    if len(head) < 24:
        raise BadModelFile(f"{path}: truncated GGUF header ({file_bytes} bytes)")
    n_tensors, n_kv = int.from_bytes(head[8:16], "little"), int.from_bytes(head[16:24], "little")
    if n_kv > MAX_KEYS or n_tensors > MAX_TENSORS:
        raise BadModelFile(f"{path}: {n_kv:,} keys and {n_tensors:,} tensors: more than llamabench reads "
                           f"({MAX_KEYS:,} keys, {MAX_TENSORS:,} tensors at most; real models hold far fewer)")
    if n_tensors * MIN_TENSOR_INFO_BYTES + n_kv * MIN_KV_BYTES > file_bytes:
        raise BadModelFile(f"{path}: truncated or corrupt GGUF header: {n_tensors:,} tensors and {n_kv:,} keys cannot fit in "
                           f"{file_bytes:,} bytes")

    try:
        reader = _skimming_reader_class()(path, "r")
    except _TooMuch:
        raise BadModelFile(f"{path}: its metadata arrays hold over {MAX_DECODED_ENTRIES:,} entries outside the "
                           "vocabulary: not a model header llamabench reads") from None
    except MemoryError:
        raise BadModelFile(f"{path}: its header is too large to read") from None
    except Exception as exc:  # the reader raises ValueError, IndexError, struct errors...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadModelFile(f"{path}: unreadable or truncated GGUF ({cut(reason, 200)})") from exc

    keys, types, lengths = {}, {}, {}
    try:
        for name, field in reader.fields.items():
            if name.startswith("GGUF."):
                continue
            name = escaped(name)  # printed in messages and tables: no control characters
            if field.types and field.types[0] == GGUFValueType.ARRAY:
                lengths[name] = int(field.parts[4][0])  # parts: key length, key, value type, item type, count
            if name.startswith(SKIPPED_ARRAY_PREFIXES) and len(field.data) > 1:
                continue
            if len(field.types) > 1 and not field.data:  # a skimmed long array
                if not name.startswith(SKIPPED_ARRAY_PREFIXES):
                    raise BadModelFile(f"{path}: key {cut(name)} holds {lengths[name]:,} entries, more than any "
                                       f"llama.cpp layer array ({SKIM_ARRAYS_ABOVE:,} read at most)")
                continue
            keys[name] = escaped_tree(_field_value(field))  # strings are printed: no control characters
            types[name] = tuple(int(t) for t in field.types)
        tensors = tuple(
            TensorInfo(
                name=escaped(t.name),
                shape=tuple(int(d) for d in t.shape),
                ggml_type=int(t.tensor_type),
                n_bytes=int(t.n_bytes),
                offset=int(t.data_offset),
            )
            for t in reader.tensors
        )
        data_end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    except BadModelFile:
        raise
    except Exception as exc:
        raise BadModelFile(f"{path}: corrupt GGUF metadata ({type(exc).__name__}: {cut(str(exc), 200)})") from exc
    if data_end > file_bytes:
        raise BadModelFile(f"{path}: truncated GGUF: tensor data ends at byte {data_end}, the file has {file_bytes}")

    architecture = keys.get("general.architecture")
    if not need_architecture and architecture is None:
        return ModelMetadata(source=str(path), architecture="", keys=keys, tensors=tensors, file_bytes=file_bytes)
    if not isinstance(architecture, str) or not architecture:
        raise BadModelFile(f"{path}: missing required key general.architecture")
    if len(architecture) > 64 or not architecture.isprintable():
        raise BadModelFile(f"{path}: general.architecture is not an architecture name: {cut(architecture)}")
    return ModelMetadata(
        source=str(path),
        architecture=architecture,
        keys=keys,
        tensors=tensors,
        file_bytes=file_bytes,
        name=str(keys.get("general.name", ""))[:200],
        value_types=types,
        array_lengths=lengths,
    )
