"""The one module that opens GGUF files, and the one GGUF header parser. Reads metadata and tensor infos,
never tensor data.

`parse_header` walks the bytes of a header wherever they come from: a local file mapped whole, or the
first bytes of a remote one (world/remote fetches them and asks again with more while the parser
raises NeedMore). Value types, scalar layouts, quantization block sizes and the default alignment come
from gguf-py; what a field holds is what gguf.GGUFReader would give for it.
"""

from __future__ import annotations

import math
import mmap
import os
import stat
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import gguf
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType
from gguf.quants import quant_shape_to_byte_shape

from ..core.errors import BadModelFile
from ..core.safe_text import escaped, escaped_tree
from ..model.metadata import ModelMetadata, TensorInfo, cut
from ..model.split_name import split_path, split_prefix
from .outputs import note_input

GGUF_MAGIC = struct.pack("<I", gguf.GGUF_MAGIC)  # b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
# Arrays that can hold hundreds of thousands of entries and decide nothing about memory.
SKIPPED_ARRAY_PREFIXES = ("tokenizer.",)


SKIM_ARRAYS_ABOVE = 4096  # longer arrays (vocabularies, merges) are stepped over, not decoded
# Bounds on what a header may make the reader build. Real GGUFs hold tens of keys, a few per-layer arrays
# of at most a few hundred entries, and at most some thousands of tensors.
MAX_KEYS = 16_384
MAX_TENSORS = 65_536
MAX_DECODED_ENTRIES = 65_536  # entries of the arrays short enough to be decoded, summed over the file
MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8  # name length, a 1-byte name, n_dims, one dim, type, offset
MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, a 1-byte key, value type, a 1-byte value

ARRAY, STRING = int(GGUFValueType.ARRAY), int(GGUFValueType.STRING)
# the scalar types, little-endian, as gguf.GGUFReader decodes them
_SCALAR = {int(t): np.dtype(d).newbyteorder("<") for t, d in GGUFReader.gguf_scalar_to_np.items()}
# gguf.GGUFReader's own fields: a key of one of these names is a duplicate to it
_READER_FIELDS = frozenset({"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"})
# the tensor types gguf.GGUFReader views element by element; it views the others (quantized) as bytes
_ELEMENT_TYPES = frozenset(GGMLQuantizationType[n] for n in ("F16", "F32", "F64", "I8", "I16", "I32", "I64"))
# numpy's bounds on one array (its bytes, its dimensions): gguf.GGUFReader views every tensor as one
_MAX_ARRAY_BYTES, _MAX_ARRAY_DIMS = 2**63 - 1, 64
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


class NeedMore(Exception):
    """The bytes given end before the header does: the first `n` bytes of the file are needed."""

    def __init__(self, n: int):
        super().__init__(f"{n:,} bytes needed")
        self.n = n


class BadHeader(Exception):
    """A header llamabench does not read. The message is the user's, less the file's name."""


@dataclass(frozen=True)
class Field:
    """One metadata value as gguf.GGUFReader holds it: its GGUFValueType(s) (an array's item type after
    ARRAY), its entries flattened (strings as raw bytes; none for a long array stepped over), and for
    an array its length."""

    types: tuple[int, ...]
    items: tuple
    length: int = 0

    @property
    def skimmed(self) -> bool:
        return len(self.types) > 1 and not self.items

    def value(self):
        """What gguf.GGUFReader's field.contents() gives, an array as a tuple."""
        if self.types[0] == ARRAY:
            if self.types[-1] == STRING:
                return tuple(str(item, "utf-8") for item in self.items)
            return tuple(v for item in self.items for v in (item if isinstance(item, bytes) else (item,)))
        return str(self.items[0], "utf-8") if self.types[0] == STRING else self.items[0]


@dataclass(frozen=True)
class Header:
    version: int
    fields: dict[str, Field]  # by key name as written (not yet escaped)
    tensors: tuple[TensorInfo, ...]  # names escaped, offsets from the start of the file
    data_offset: int  # where tensor data starts: the end of the tensor infos, aligned


class _Walker:
    """A position in the bytes of a header; NeedMore when they end too soon."""

    def __init__(self, buf):
        self.buf, self.pos, self.decoded = buf, 0, 0

    def need(self, n: int) -> int:
        """The position before stepping `n` bytes on."""
        start, self.pos = self.pos, self.pos + n
        if self.pos > len(self.buf):
            raise NeedMore(self.pos)
        return start

    def take(self, n: int) -> bytes:
        start = self.need(n)
        return bytes(self.buf[start:self.pos])

    def u32(self) -> int:
        return _U32.unpack_from(self.buf, self.need(4))[0]

    def u64(self) -> int:
        return _U64.unpack_from(self.buf, self.need(8))[0]

    def string(self) -> bytes:
        return self.take(self.u64())

    def scalars(self, vtype: int, n: int) -> list:
        dtype = _SCALAR[vtype]
        return np.frombuffer(self.take(dtype.itemsize * n), dtype).tolist()

    def skip_strings(self, n: int) -> None:
        buf, pos, end, unpack = self.buf, self.pos, len(self.buf), _U64.unpack_from
        for _ in range(n):
            if pos + 8 > end:
                raise NeedMore(pos + 8)
            pos += 8 + unpack(buf, pos)[0]
        self.pos = pos
        if pos > end:
            raise NeedMore(pos)

    def value(self, raw_type: int) -> tuple[list[int], list, int]:
        """(types, entries, array length) of one value, walked as gguf.GGUFReader walks it; long arrays
        stepped over."""
        vtype = int(GGUFValueType(raw_type))
        if vtype == STRING:
            return [vtype], [self.string()], 0
        if vtype != ARRAY:
            return [vtype], self.scalars(vtype, 1), 0
        raw_itype, n = self.u32(), self.u64()
        if n > SKIM_ARRAYS_ABOVE:
            itype = int(GGUFValueType(raw_itype))
            if itype == STRING:
                self.skip_strings(n)
                return [ARRAY, itype], [], n
            if itype != ARRAY:
                self.need(n * _SCALAR[itype].itemsize)
                return [ARRAY, itype], [], n
        else:  # an array of arrays is walked entry by entry, however long
            self.decoded += n
            if self.decoded > MAX_DECODED_ENTRIES:
                raise BadHeader(f"its metadata arrays hold over {MAX_DECODED_ENTRIES:,} entries outside the "
                                "vocabulary: not a model header llamabench reads")
        if n and raw_itype in _SCALAR:
            return [ARRAY, raw_itype], self.scalars(raw_itype, n), n
        types, items = [ARRAY], []
        for i in range(n):
            item_types, item, _ = self.value(raw_itype)
            if i == 0:
                types += item_types
            items += item
        return types, items, n

    def tensor_info(self) -> tuple[str, tuple[int, ...], int, int]:
        """(name, dims, ggml type, offset in the data) of one tensor info."""
        name = str(self.string(), "utf-8")
        n_dims = self.u32()
        dims = struct.unpack_from(f"<{n_dims}Q", self.buf, self.need(8 * n_dims))
        return name, dims, self.u32(), self.u64()


def parse_header(buf, file_bytes: int) -> Header:
    """The header at the start of `buf` (bytes, a bytearray, a mapped file) of a file of `file_bytes` bytes.

    NeedMore when `buf` ends before the header does. BadHeader for what is not a GGUF llamabench reads (no
    magic, another version, past the bounds on keys, tensors and decoded entries, tensor data past the end
    of the file); for a malformed header, the errors gguf.GGUFReader raises (ValueError, KeyError,
    UnicodeDecodeError).
    """
    w = _Walker(buf)
    if w.take(4) != GGUF_MAGIC:
        raise BadHeader("not a GGUF file (no GGUF magic at the start)")
    version = w.u32()
    if version not in SUPPORTED_VERSIONS:
        raise BadHeader(f"GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)")
    n_tensors, n_kv = w.u64(), w.u64()
    if n_kv > MAX_KEYS or n_tensors > MAX_TENSORS:
        raise BadHeader(f"{n_kv:,} keys and {n_tensors:,} tensors: more than llamabench reads "
                        f"({MAX_KEYS:,} keys, {MAX_TENSORS:,} tensors at most; real models hold far fewer)")
    if n_tensors * MIN_TENSOR_INFO_BYTES + n_kv * MIN_KV_BYTES > file_bytes:
        raise BadHeader(f"truncated or corrupt GGUF header: {n_tensors:,} tensors and {n_kv:,} keys cannot fit in "
                        f"{file_bytes:,} bytes")
    fields: dict[str, Field] = {}
    for _ in range(n_kv):
        start = w.pos
        name = str(w.string(), "utf-8")
        types, items, length = w.value(w.u32())
        if name in fields or name in _READER_FIELDS:
            raise KeyError(f"Duplicate {name} already in list at offset {start}")
        fields[name] = Field(tuple(types), tuple(items), length)
    infos = [w.tensor_info() for _ in range(n_tensors)]
    alignment = _alignment(fields.get("general.alignment"))
    data_offset = -(-w.pos // alignment) * alignment
    return Header(version, fields, _tensors(infos, data_offset, file_bytes), data_offset)


def _alignment(field: Field | None) -> int:
    """general.alignment, checked as gguf.GGUFReader checks it, or gguf-py's default (32)."""
    if field is None:
        return gguf.GGUF_DEFAULT_ALIGNMENT
    if field.types != (int(GGUFValueType.UINT32),):
        raise ValueError("Bad type for general.alignment field")
    alignment = field.items[0]
    if alignment == 0 or alignment & (alignment - 1):
        raise ValueError("Invalid alignment: must be a non-zero power of two")
    return alignment


def _tensors(infos: list, data_offset: int, file_bytes: int) -> tuple[TensorInfo, ...]:
    """Tensor infos with their sizes, refused where gguf.GGUFReader could not view their data: a shape past
    any array, data past the end of the file."""
    seen, out = set(), []
    for name, dims, raw_type, offset in infos:
        if name in seen:
            raise ValueError(f"Found duplicated tensor with name {name}")
        seen.add(name)
        ggml_type = GGMLQuantizationType(raw_type)
        block_size, type_size = GGML_QUANT_SIZES[ggml_type]
        n_elements = math.prod(dims)
        shape, item_size = tuple(reversed(dims)), type_size
        if ggml_type not in _ELEMENT_TYPES:
            shape, item_size = quant_shape_to_byte_shape(shape, ggml_type), 1
        if len(dims) > _MAX_ARRAY_DIMS:
            raise ValueError(f"tensor {name} has {len(dims)} dimensions, more than any array")
        if n_elements >= 2**64 or math.prod(d for d in shape if d) * item_size > _MAX_ARRAY_BYTES:
            raise ValueError(f"tensor {name} of shape {list(dims)} is larger than any array")
        n_bytes = n_elements * type_size // block_size
        start = (data_offset + offset) % 2**64  # uint64, as gguf.GGUFReader adds them
        if start + n_bytes > file_bytes:
            raise BadHeader(f"truncated GGUF: tensor data ends at byte {start + n_bytes}, the file has {file_bytes}")
        out.append(TensorInfo(name=escaped(name), shape=tuple(dims), ggml_type=int(ggml_type), n_bytes=n_bytes,
                              offset=start))
    return tuple(out)


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


def sibling_part(first: Path, index: int, count: int) -> Path:
    """Part `index` (1-based) of a split set, beside the first: NAME-00002-of-00003.gguf."""
    name = split_prefix(first.name)
    if name is None:
        raise BadModelFile(f"{first}: a split GGUF ({count} parts) whose name does not end in "
                           f"{split_path('', 1, count)}")
    return first.with_name(split_path(name.prefix, index, count))


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
    keys, entries = len(meta.keys), _array_entries(meta.keys)
    expected_count = meta.keys.get("split.tensors.count")
    if isinstance(expected_count, int) and expected_count > MAX_TENSORS:
        raise BadModelFile(f"{path}: split.tensors.count {expected_count:,}: more than {MAX_TENSORS:,} tensors in one "
                           "model (real models hold far fewer)")
    for index in range(2, count + 1):
        part_path = locate(index, count)
        if not Path(part_path).exists():
            raise BadModelFile(f"{path}: part {index} of {count} is missing: {part_path}")
        part_meta = _read_one(Path(part_path), need_architecture=False)
        tensors += [replace(t, part=index - 1) for t in part_meta.tensors]
        total += part_meta.file_bytes
        keys, entries = keys + len(part_meta.keys), entries + _array_entries(part_meta.keys)
        if keys > MAX_KEYS or entries > MAX_DECODED_ENTRIES:  # the set's bounds, as the tensors' below
            raise BadModelFile(f"{path}: the split set holds more than {MAX_KEYS:,} metadata keys or "
                               f"{MAX_DECODED_ENTRIES:,} array entries by part {index} of {count} (real models hold "
                               "far fewer)")
        if len(tensors) > MAX_TENSORS:  # the bound is the set's, not each part's: stop before reading more parts
            raise BadModelFile(f"{path}: the split set holds more than {MAX_TENSORS:,} tensors by part {index} of "
                               f"{count} (real models hold far fewer)")
    expected = meta.keys.get("split.tensors.count")
    if isinstance(expected, int) and expected != len(tensors):
        raise BadModelFile(f"{path}: the split set holds {len(tensors)} tensors, split.tensors.count says {expected}")
    # offsets are per part: llama.cpp maps each part's span of host tensors apart (weights.host_mapped)
    return replace(meta, tensors=tuple(tensors), file_bytes=total)


def _array_entries(keys: dict) -> int:
    """The entries of the decoded metadata arrays (those long arrays that stay undecoded count nothing)."""
    return sum(len(v) for v in keys.values() if isinstance(v, (list, tuple)))


def _read_one(path: Path, *, need_architecture: bool = True) -> ModelMetadata:
    check_regular_file(path)
    note_input(path)  # an input of this run: no output may be written over it
    file_bytes = path.stat().st_size
    header = _parse_file(path, file_bytes)
    keys, types, lengths = _keys(path, header.fields)

    architecture = keys.get("general.architecture")
    if not need_architecture and architecture is None:
        return ModelMetadata(source=str(path), architecture="", keys=keys, tensors=header.tensors,
                             file_bytes=file_bytes)
    if not isinstance(architecture, str) or not architecture:
        raise BadModelFile(f"{path}: missing required key general.architecture")
    if len(architecture) > 64 or not architecture.isprintable():
        raise BadModelFile(f"{path}: general.architecture is not an architecture name: {cut(architecture)}")
    return ModelMetadata(
        source=str(path),
        architecture=architecture,
        keys=keys,
        tensors=header.tensors,
        file_bytes=file_bytes,
        name=str(keys.get("general.name", ""))[:200],
        value_types=types,
        array_lengths=lengths,
    )


def _parse_file(path: Path, file_bytes: int) -> Header:
    """The header of a local GGUF, parsed where it lies (the file mapped, not read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)  # a file that cannot be read (/proc/self/mem, a failing disk) fails here
            if len(head) < 24:
                return parse_header(head, file_bytes)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return parse_header(mapped, file_bytes)
    except NeedMore as more:
        if more.n <= 8:
            raise BadModelFile(f"{path}: not a GGUF file (no GGUF magic at the start)") from None
        if more.n <= 24:
            raise BadModelFile(f"{path}: truncated GGUF header ({file_bytes} bytes)") from None
        raise BadModelFile(f"{path}: unreadable or truncated GGUF (its header runs past the end of the file, "
                           f"{file_bytes:,} bytes)") from None
    except BadHeader as exc:
        raise BadModelFile(f"{path}: {exc}") from None
    except MemoryError:
        raise BadModelFile(f"{path}: its header is too large to read") from None
    except OSError as exc:
        raise BadModelFile(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    except Exception as exc:  # what gguf.GGUFReader would refuse: ValueError, KeyError, UnicodeDecodeError...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadModelFile(f"{path}: unreadable or truncated GGUF ({cut(reason, 200)})") from exc


def _keys(path: Path, fields: dict[str, Field]) -> tuple[dict, dict, dict]:
    """(values, value types, array lengths) by escaped key name; long vocabulary arrays left out."""
    keys, types, lengths = {}, {}, {}
    try:
        for name, field in fields.items():
            if name.startswith("GGUF."):
                continue
            name = escaped(name)  # printed in messages and tables: no control characters
            if field.types[0] == ARRAY:
                lengths[name] = field.length
            if name.startswith(SKIPPED_ARRAY_PREFIXES) and len(field.items) > 1:
                continue
            if field.skimmed:
                if not name.startswith(SKIPPED_ARRAY_PREFIXES):
                    raise BadModelFile(f"{path}: key {cut(name)} holds {lengths[name]:,} entries, more than any "
                                       f"llama.cpp layer array ({SKIM_ARRAYS_ABOVE:,} read at most)")
                continue
            keys[name] = escaped_tree(field.value())  # strings are printed: no control characters
            types[name] = field.types
    except BadModelFile:
        raise
    except Exception as exc:
        raise BadModelFile(f"{path}: corrupt GGUF metadata ({type(exc).__name__}: {cut(str(exc), 200)})") from exc
    return keys, types, lengths
