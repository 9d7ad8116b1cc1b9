"""Twins of LFM2: short-conv layers (head_count_kv 0) interleaved with GQA attention layers.

Tensors as in src/models/lfm2.cpp (load_arch_tensors). The conv state is (l_cache - 1) x n_embd
f32 per layer and sequence, and the attention projections are n_embd x n_embd (so n_head x head_dim
must equal n_embd): the hidden size cannot shrink. The twin keeps the source's n_embd (recovered as
head_count x key_length, which build.py pins before it shrinks embedding_length) and stores every
n_embd-sized matrix as an all-zero tq1_0 tensor, written as a hole.
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec

# type of the all-zero n_embd x n_embd matrices: tq1_0, not q4_0 (on AMX CPUs a q4_0 zero matrix
# crashed llama.cpp's AMX mul_mat during decode; see mamba2._big)
BIG = "tq1_0"


def _big(row: int) -> str:
    return BIG if row % 256 == 0 else "f16"


def adjust_keys(keys: dict, arch: str) -> None:
    n_head = keys[f"{arch}.attention.head_count"]
    n_head = n_head[0] if isinstance(n_head, (tuple, list)) else n_head
    # key_length was pinned to source n_embd / n_head (or is the source's own head size, and
    # llama.cpp's wq {n_embd, n_embd} needs n_head x head_dim == n_embd anyway)
    head_dim = keys.get(f"{arch}.attention.key_length") or keys[f"{arch}.embedding_length"] // int(n_head)
    keys[f"{arch}.embedding_length"] = int(n_head) * int(head_dim)


def tensors(t: TwinContext) -> list[TensorSpec]:
    E = t.n_embd
    l_cache = int(t.get("shortconv.l_cache"))
    specs = [
        t.mat("token_embd.weight", E, t.n_vocab),
        t.norm("token_embd_norm.weight", E),  # LLM_TENSOR_OUTPUT_NORM_LFM2; output.weight tied
    ]
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs += [t.norm(p + "attn_norm.weight", E), t.norm(p + "ffn_norm.weight", E)]
        specs += [
            t.mat(p + "ffn_gate.weight", E, t.n_ff(il), dtype=_big(E), fill="zeros"),
            t.mat(p + "ffn_up.weight", E, t.n_ff(il), dtype=_big(E), fill="zeros"),
            t.mat(p + "ffn_down.weight", t.n_ff(il), E, dtype=_big(t.n_ff(il)), fill="zeros"),
        ]
        if t.layer_kind(il) == "recurrent":
            specs += [
                t.mat(p + "shortconv.conv.weight", l_cache, E, dtype="f32"),
                t.mat(p + "shortconv.in_proj.weight", E, 3 * E, dtype=_big(E), fill="zeros"),
                t.mat(p + "shortconv.out_proj.weight", E, E, dtype=_big(E), fill="zeros"),
            ]
        else:
            kv = t.n_head_kv(il)
            specs += [
                t.norm(p + "attn_q_norm.weight", t.head_k),
                t.norm(p + "attn_k_norm.weight", t.head_k),
                t.mat(p + "attn_q.weight", E, E, dtype=_big(E), fill="zeros"),
                t.mat(p + "attn_k.weight", E, kv * t.head_k, dtype=_big(E), fill="zeros"),
                t.mat(p + "attn_v.weight", E, kv * t.head_v, dtype=_big(E), fill="zeros"),
                t.mat(p + "attn_output.weight", E, E, dtype=_big(E), fill="zeros"),
            ]
    return specs
