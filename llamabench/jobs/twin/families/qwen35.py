"""Twins of Qwen3.5 / Qwen3.5-MoE / Qwen3-Next: Gated DeltaNet layers with every Nth layer full attention.

Tensors as in src/models/qwen35.cpp, qwen35moe.cpp and qwen3next.cpp (load_arch_tensors).
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec


def adjust_keys(keys: dict, arch: str) -> None:
    keys.setdefault(f"{arch}.rope.dimension_sections", (11, 11, 10, 0))
    if arch == "qwen35":
        keys[f"{arch}.feed_forward_length"] = 64


def tensors(t: TwinContext) -> list[TensorSpec]:
    E = t.n_embd
    d_state = int(t.get("ssm.state_size"))
    n_k_heads = int(t.get("ssm.group_count"))
    n_v_heads = int(t.get("ssm.time_step_rank"))
    d_conv = int(t.get("ssm.conv_kernel"))
    key_dim, value_dim = d_state * n_k_heads, d_state * n_v_heads
    conv_dim = 2 * key_dim + value_dim

    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs += [t.norm(p + "attn_norm.weight", E), t.norm(p + "post_attention_norm.weight", E)]
        if t.layer_kind(il) == "recurrent":
            specs += [
                t.mat(p + "attn_qkv.weight", E, conv_dim),
                t.mat(p + "attn_gate.weight", E, value_dim),
                t.mat(p + "ssm_conv1d.weight", d_conv, conv_dim, dtype="f32"),
                t.vec(p + "ssm_dt.bias", n_v_heads, fill="zeros"),
                t.vec(p + "ssm_a", n_v_heads, fill="negative"),
                t.norm(p + "ssm_norm.weight", d_state),
                t.mat(p + "ssm_out.weight", value_dim, E),
            ]
            if t.architecture == "qwen3next":
                specs.append(t.mat(p + "ssm_ba.weight", E, 2 * n_v_heads))
            else:
                specs += [t.mat(p + "ssm_beta.weight", E, n_v_heads), t.mat(p + "ssm_alpha.weight", E, n_v_heads)]
        else:
            specs += t.attention(il, q_width=2 * t.n_head * t.head_k, qk_norm=True)
        if t.architecture == "qwen35":
            specs += t.dense_ffn(il)
        else:
            specs += t.moe(il, shared=True, gate_inp_shexp=True)
    return specs
