"""Twins of DeepSeek-V2 (deepseek2): MLA when the GGUF has the MLA keys, full per-head K/V otherwise.

Tensors as in src/models/deepseek2.cpp (load_arch_tensors). The MLA decompression matrices
(attn_k_b, attn_v_b) keep their real sizes (they are tied to kv_lora_rank and the head dims) and are
written as all-zero holes; everything tied to the hidden size shrinks.
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec


def adjust_keys(keys: dict, arch: str) -> None:
    keys.setdefault(f"{arch}.expert_shared_count", 0)
    keys.setdefault(f"{arch}.leading_dense_block_count", 0)


def tensors(t: TwinContext) -> list[TensorSpec]:
    E, H = t.n_embd, t.n_head
    mla = bool(t.get("attention.key_length_mla")) and bool(t.get("attention.value_length_mla"))
    head_k = int(t.get("attention.key_length_mla")) if mla else t.head_k
    head_v = int(t.get("attention.value_length_mla")) if mla else t.head_v
    rope = int(t.get("rope.dimension_count", 64))
    nope = head_k - rope
    kv_lora = int(t.get("attention.kv_lora_rank"))
    q_lora = int(t.get("attention.q_lora_rank", 0)) if t.n_layer not in (26, 27) else 0
    n_dense = int(t.get("leading_dense_block_count", 0))
    n_shared = int(t.get("expert_shared_count", 0))
    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs += [t.norm(p + "attn_norm.weight", E), t.norm(p + "attn_kv_a_norm.weight", kv_lora)]
        if q_lora:
            specs += [t.norm(p + "attn_q_a_norm.weight", q_lora), t.mat(p + "attn_q_a.weight", E, q_lora),
                      t.mat(p + "attn_q_b.weight", q_lora, H * head_k)]
        else:
            specs.append(t.mat(p + "attn_q.weight", E, H * head_k))
        specs.append(t.mat(p + "attn_kv_a_mqa.weight", E, kv_lora + rope))
        if mla:
            # f32, not f16: on this AMX CPU the f16 twin made llama.cpp's scheduler abort at context creation
            # (GGML_ASSERT(*cur_backend_id != -1)); f32, or loading without extra buffer types, avoids it
            specs += [t.mat(p + "attn_k_b.weight", nope, kv_lora, H, dtype="f32", fill="zeros"),
                      t.mat(p + "attn_v_b.weight", kv_lora, head_v, H, dtype="f32", fill="zeros")]
        else:
            specs.append(t.mat(p + "attn_kv_b.weight", kv_lora, H * (nope + head_v), fill="zeros"))
        specs += [t.mat(p + "attn_output.weight", H * head_v, E), t.norm(p + "ffn_norm.weight", E)]
        if il < n_dense:
            specs += t.dense_ffn(il)
        else:
            specs += t.moe(il)
            if n_shared:
                S = t.n_ff_exp * n_shared
                specs += [t.mat(p + "ffn_gate_shexp.weight", E, S), t.mat(p + "ffn_up_shexp.weight", E, S),
                          t.mat(p + "ffn_down_shexp.weight", S, E)]
    return specs
