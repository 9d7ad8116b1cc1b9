"""KV cache types: names as llama.cpp spells them, ggml type ids, and row sizes.

Block sizes come from gguf's GGML_QUANT_SIZES, the same table ggml uses.
"""

from __future__ import annotations

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from .errors import UsageError

CACHE_TYPES: dict[str, GGMLQuantizationType] = {
    "f32": GGMLQuantizationType.F32,
    "f16": GGMLQuantizationType.F16,
    "bf16": GGMLQuantizationType.BF16,
    "q8_0": GGMLQuantizationType.Q8_0,
    "q4_0": GGMLQuantizationType.Q4_0,
    "q4_1": GGMLQuantizationType.Q4_1,
    "q5_0": GGMLQuantizationType.Q5_0,
    "q5_1": GGMLQuantizationType.Q5_1,
    "iq4_nl": GGMLQuantizationType.IQ4_NL,
}

F32_BYTES = 4  # recurrent state is always f32


def parse_cache_type(name: str) -> str:
    key = name.strip().lower()
    if key not in CACHE_TYPES:
        raise UsageError(f"unknown cache type '{name}'", hint="choose one of: " + ", ".join(CACHE_TYPES))
    return key


def ggml_type_id(name: str) -> int:
    return int(CACHE_TYPES[name])


def is_quantized(name: str) -> bool:
    return GGML_QUANT_SIZES[CACHE_TYPES[name]][0] > 1


def row_bytes(name: str, n_elements: int) -> int:
    """ggml_row_size: bytes of one row of n_elements of this type."""
    block, type_size = GGML_QUANT_SIZES[CACHE_TYPES[name]]
    if n_elements % block:
        raise UsageError(f"a row of {n_elements} elements cannot be stored as {name} (blocks of {block})")
    return n_elements // block * type_size
