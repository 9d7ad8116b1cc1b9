"""Every tensor llama.cpp creates for a model, from its GGUF metadata alone (no file, no tensor data).

`llama_model_init_from_user` (src/llama.cpp) builds a model from a `gguf_context` of metadata: with no file
behind it, `llama_model_loader::create_tensor` creates every tensor the architecture asks for (the optional
ones too), each of type F32 and of the shape the metadata gives it (src/llama-model-loader.cpp). Loaded with
no_alloc nothing is allocated, whatever the sizes; the tensors are then read from the model's own list
(`llama_internal_get_tensor_map`, src/llama-model.cpp), so any architecture, at any size, gives its tensor
list without a line of per-architecture code.

A bad value can make llama.cpp abort (a GGML_ASSERT) rather than refuse: `model_tensors` runs in a process
that may die, so the parent calls it through `worker.model_tensors` (a child with a timeout).
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..core.errors import EngineError
from . import binding

# enum gguf_type (ggml/include/gguf.h); "arr" is not a value type here: an array is a GgufValue of tuple value
GGUF_TYPE_IDS = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8,
                 "u64": 10, "i64": 11, "f64": 12}
INT_TYPES = ("u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64")
_INT_RANGES = {"u8": (0, 2**8), "i8": (-(2**7), 2**7), "u16": (0, 2**16), "i16": (-(2**15), 2**15),
               "u32": (0, 2**32), "i32": (-(2**31), 2**31), "u64": (0, 2**64), "i64": (-(2**63), 2**63)}
_C_TYPES = {"u8": ctypes.c_uint8, "i8": ctypes.c_int8, "u16": ctypes.c_uint16, "i16": ctypes.c_int16,
            "u32": ctypes.c_uint32, "i32": ctypes.c_int32, "u64": ctypes.c_uint64, "i64": ctypes.c_int64,
            "f32": ctypes.c_float, "f64": ctypes.c_double, "bool": ctypes.c_bool}


def _fits(kind: str, x) -> bool:
    if kind in INT_TYPES:
        low, high = _INT_RANGES[kind]
        return isinstance(x, int) and not isinstance(x, bool) and low <= x < high
    if kind in ("f32", "f64"):
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    if kind == "bool":
        return isinstance(x, bool)
    return isinstance(x, str)


@dataclass(frozen=True)
class GgufValue:
    """One metadata value with its GGUF type: `type` names the scalar's type, or the array's element type when
    `value` is a tuple (an array)."""

    type: str  # u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool str
    value: Any  # int, float, bool or str; a tuple of them for an array

    def __post_init__(self) -> None:
        if self.type not in GGUF_TYPE_IDS:
            raise ValueError(f"not a GGUF value type: {self.type!r} (the types: {', '.join(GGUF_TYPE_IDS)})")
        if isinstance(self.value, list):
            object.__setattr__(self, "value", tuple(self.value))
        values = self.value if self.is_array else (self.value,)
        for x in values:
            if not _fits(self.type, x):
                raise ValueError(f"a {self.type} value cannot be {str(x)[:40]!r}")

    @property
    def is_array(self) -> bool:
        return isinstance(self.value, tuple)

    def __len__(self) -> int:
        return len(self.value) if self.is_array else 1


Metadata = Mapping[str, GgufValue]


@dataclass(frozen=True)
class TensorShape:
    """A tensor llama.cpp created: its name, its shape in ggml order (ne0, the row, first; trailing 1s left out)
    and its ggml type (enum ggml_type)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int = 0  # GGML_TYPE_F32

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class _TensorHead(ctypes.Structure):
    """The head of struct ggml_tensor (ggml/include/ggml.h, LP64): type, buffer, ne[4], nb[4], op, op_params[16],
    flags, src[10], view_src, view_offs, data, name[64]."""

    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64)]


assert _TensorHead.name.offset == 256  # noqa: S101 - the layout this module reads

# std::vector<std::pair<std::string, ggml_tensor *>> under libstdc++'s C++11 ABI: three pointers (begin, end,
# capacity); each pair a 32-byte std::string (data pointer, length, 16-byte buffer) then the tensor pointer
_TENSOR_MAP = "_Z29llama_internal_get_tensor_mapB5cxx11PK11llama_model"
_PAIR_BYTES, _TENSOR_AT = 40, 32
_ggml_base = None


def _gguf():
    """libggml-base's gguf writer functions, typed once."""
    global _ggml_base
    if _ggml_base is None:
        lib = binding.ggml_lib("ggml-base")
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        lib.gguf_init_empty.restype = vp
        lib.gguf_init_empty.argtypes = []
        lib.gguf_free.argtypes = [vp]
        lib.gguf_set_val_str.argtypes = [vp, cp, cp]
        for name, ctype in _C_TYPES.items():
            setter = getattr(lib, f"gguf_set_val_{name}")
            setter.argtypes = [vp, cp, ctype]
            setter.restype = None
        lib.gguf_set_arr_data.argtypes = [vp, cp, ctypes.c_int, vp, ctypes.c_size_t]
        lib.gguf_set_arr_str.argtypes = [vp, cp, ctypes.POINTER(cp), ctypes.c_size_t]
        _ggml_base = lib
    return _ggml_base


def _gguf_context(metadata: Metadata):
    """A gguf_context holding the metadata (the caller frees it with gguf_free), and the buffers it was set from."""
    lib = _gguf()
    ctx = lib.gguf_init_empty()
    keep: list = []
    for key, v in metadata.items():
        name = key.encode()
        if not v.is_array:
            if v.type == "str":
                lib.gguf_set_val_str(ctx, name, v.value.encode())
            else:
                getattr(lib, f"gguf_set_val_{v.type}")(ctx, name, v.value)
        elif v.type == "str":
            strings = (ctypes.c_char_p * len(v.value))(*[s.encode() for s in v.value])
            keep.append(strings)
            lib.gguf_set_arr_str(ctx, name, strings, len(v.value))
        else:
            data = (_C_TYPES[v.type] * len(v.value))(*v.value)
            keep.append(data)
            lib.gguf_set_arr_data(ctx, name, GGUF_TYPE_IDS[v.type], ctypes.cast(data, ctypes.c_void_p), len(v.value))
    return ctx, keep


def _read_tensor_map(lc, model) -> tuple[TensorShape, ...]:
    """The model's tensors by name (a tied matrix listed twice is kept once)."""
    get_map = getattr(lc.llama_cpp._lib, _TENSOR_MAP)
    get_map.restype = ctypes.c_void_p
    get_map.argtypes = [ctypes.c_void_p]
    begin, end, _ = (ctypes.c_void_p * 3).from_address(get_map(model))
    begin, end = begin or 0, end or 0
    if (end - begin) % _PAIR_BYTES:
        raise EngineError("llama.cpp's tensor list does not have the layout this llamabench reads")
    out: dict[str, TensorShape] = {}
    for at in range(begin, end, _PAIR_BYTES):
        length = ctypes.c_size_t.from_address(at + 8).value
        head = _TensorHead.from_address(ctypes.c_void_p.from_address(at + _TENSOR_AT).value)
        name = head.name.decode("utf-8", errors="replace")
        if len(name.encode()) != length:  # the string and the tensor's own name must agree
            raise EngineError("llama.cpp's tensor list does not have the layout this llamabench reads")
        shape = list(head.ne)
        while len(shape) > 1 and shape[-1] == 1:
            shape.pop()
        out.setdefault(name, TensorShape(name, tuple(int(d) for d in shape), int(head.type)))
    return tuple(out.values())


_LOAD_ERROR = re.compile(r"error loading model: (.*)")


def load_error(log_lines: list[str]) -> str:
    """llama.cpp's own reason for refusing the metadata, one line."""
    found = _LOAD_ERROR.findall("".join(log_lines))
    if found:
        return found[-1].strip()
    return binding.error_reason(log_lines, "no reason logged")


def model_tensors(metadata: Metadata) -> tuple[TensorShape, ...]:
    """Every tensor llama.cpp creates for this metadata, in its order; EngineError with llama.cpp's reason when it
    refuses the metadata. Runs llama.cpp in this process, which a GGML_ASSERT ends: see worker.model_tensors."""
    lc = binding.llama_module()
    arch = metadata.get("general.architecture")
    what = f"a {arch.value} model" if arch is not None else "a model"
    with binding.captured_log() as lines:
        ctx, _keep = _gguf_context(metadata)
        try:
            params = lc.llama_model_default_params()
            params.no_alloc = True  # tensor shapes only: nothing is allocated, whatever the sizes
            params.n_gpu_layers = 0
            params.use_extra_bufts = False
            params.load_mtp = True  # the NextN (MTP) layers' tensors too, as a real file carries them
            no_data = ctypes.cast(None, lc.llama_model_set_tensor_data_t)  # never called under no_alloc
            model = lc.llama_model_init_from_user(ctx, no_data, None, params)
        finally:
            _gguf().gguf_free(ctx)
        if not model:
            raise EngineError(f"llama.cpp could not build {what} from its metadata: {load_error(lines)}")
    try:
        return _read_tensor_map(lc, model)
    finally:
        lc.llama_model_free(model)
