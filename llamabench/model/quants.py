"""llama.cpp's file types by the names people give quants (Q4_K_M): the `enum llama_ftype` values of include/llama.h
and the names tools/quantize/quantize.cpp takes (QUANT_OPTIONS). Pure data.

A file type is a recipe, not one tensor type: llama.cpp's quantizer gives each tensor its own type
(src/llama-quant.cpp, llama_tensor_get_type: the output and embedding matrices, attn_v and ffn_down promoted, a
fallback type where no block divides a row). `llama.engine.quantize_recipe` asks it, nothing written.
"""

from __future__ import annotations

import dataclasses
import math

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

LLAMA_FTYPES = {  # QUANT_OPTIONS's name -> enum llama_ftype (include/llama.h)
    "F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_S": 11,
    "Q3_K_M": 12, "Q3_K": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q4_K": 15, "Q5_K_S": 16, "Q5_K_M": 17,
    "Q5_K": 17, "Q6_K": 18, "IQ2_XXS": 19, "IQ2_XS": 20, "Q2_K_S": 21, "IQ3_XS": 22, "IQ3_XXS": 23, "IQ1_S": 24,
    "IQ4_NL": 25, "IQ3_S": 26, "IQ3_M": 27, "IQ2_S": 28, "IQ2_M": 29, "IQ4_XS": 30, "IQ1_M": 31, "BF16": 32,
    "TQ1_0": 36, "TQ2_0": 37, "MXFP4_MOE": 38,
}


def ftype_of(quant: str) -> int | None:
    """The llama_ftype of a quant's name (Q4_K_M, q8_0, UD-Q4_K_XL is none of them), or None."""
    return LLAMA_FTYPES.get(str(quant).strip().upper())


# the tensor types llama-quantize makes only with an importance matrix (src/llama-quant.cpp:856,
# tensor_requires_imatrix; the token embedding and output matrices are exempt), and Q2_K within a Q2_K_S file
NEEDS_IMATRIX = frozenset({"iq3_xxs", "iq2_xxs", "iq2_xs", "iq2_s", "iq1_m", "iq1_s"})


def imatrix_note(quant: str, tensor_types: "dict[str, str] | None" = None) -> str | None:
    """One line where llama-quantize refuses `quant` without an importance matrix, else None: its recipe types a
    tensor (other than the token embedding and output matrices) in a type that needs one."""
    name = str(quant).strip().upper()
    needs = name == "Q2_K_S" or any(t in NEEDS_IMATRIX for n, t in (tensor_types or {}).items()
                                     if n not in ("token_embd.weight", "output.weight"))
    if not needs and tensor_types is None:
        needs = name.startswith(("IQ1_", "IQ2_")) or name == "IQ3_XXS"
    if not needs:
        return None
    return (f"{name} needs an importance matrix: llama-quantize makes it only with --imatrix FILE (src/llama-quant.cpp "
            "tensor_requires_imatrix); sized here as its recipe types the tensors, which an imatrix does not change")


def retyped(meta, recipe: dict[str, str]):
    """The model's tensor infos as a quant's recipe types them (`recipe`: tensor name -> ggml type name, what
    llama.cpp's quantizer answers asked without writing): each tensor's bytes from its type's blocks
    (gguf's GGML_QUANT_SIZES); a tensor the recipe does not name keeps its own type."""
    out = []
    for t in meta.tensors:
        name = recipe.get(t.name)
        if name is None:
            out.append(t)
            continue
        kind = GGMLQuantizationType[name.upper()]
        block, size = GGML_QUANT_SIZES[kind]
        out.append(dataclasses.replace(t, ggml_type=int(kind), n_bytes=math.prod(t.shape) // block * size, offset=0))
    return dataclasses.replace(meta, tensors=tuple(out))
