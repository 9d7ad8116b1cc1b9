"""Twins of Granite-4.0-H (granitehybrid): Mamba2 layers, with attention where head_count_kv > 0.

Tensors as in src/models/granite-hybrid.cpp (load_arch_tensors). llama.cpp asserts
2 * n_embd == ssm.inner_size, so the hidden size is pinned to inner_size / 2 (4096 for
Granite-4.0-H-Small): every matrix with a hidden-size side is an all-zero low-bit tensor, a hole on
disk. MoE layers use feed_forward_length (not expert_feed_forward_length) for the expert width.
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec
from .mamba2 import _big, mamba2_mixer, pin_hidden_to_inner

adjust_keys = pin_hidden_to_inner


def tensors(t: TwinContext) -> list[TensorSpec]:
    E, X = t.n_embd, t.n_expert
    q = _big(t, E)
    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        F = t.n_ff(il)
        specs += [t.norm(p + "attn_norm.weight", E), t.norm(p + "ffn_norm.weight", E)]
        if t.layer_kind(il) == "recurrent":
            specs += mamba2_mixer(t, il, big=True)
        else:
            H, kv = t.n_head, t.n_head_kv(il)
            specs += [
                t.mat(p + "attn_q.weight", E, H * t.head_k, dtype=q, fill="zeros"),
                t.mat(p + "attn_k.weight", E, kv * t.head_k, dtype=q, fill="zeros"),
                t.mat(p + "attn_v.weight", E, kv * t.head_v, dtype=q, fill="zeros"),
                t.mat(p + "attn_output.weight", H * t.head_v, E, dtype=_big(t, H * t.head_v), fill="zeros"),
            ]
        if X:
            specs += [
                t.mat(p + "ffn_gate_inp.weight", E, X, dtype="f32"),
                t.mat(p + "ffn_gate_exps.weight", E, F, X, dtype=q, fill="zeros"),
                t.mat(p + "ffn_up_exps.weight", E, F, X, dtype=q, fill="zeros"),
                t.mat(p + "ffn_down_exps.weight", F, E, X, dtype=_big(t, F), fill="zeros"),
            ]
            S = t.n_ff_shexp
            if S:
                specs += [
                    t.mat(p + "ffn_gate_shexp.weight", E, S, dtype=q, fill="zeros"),
                    t.mat(p + "ffn_up_shexp.weight", E, S, dtype=q, fill="zeros"),
                    t.mat(p + "ffn_down_shexp.weight", S, E, dtype=_big(t, S), fill="zeros"),
                ]
        else:
            specs += [
                t.mat(p + "ffn_gate.weight", E, F, dtype=q, fill="zeros"),
                t.mat(p + "ffn_up.weight", E, F, dtype=q, fill="zeros"),
                t.mat(p + "ffn_down.weight", F, E, dtype=_big(t, F), fill="zeros"),
            ]
    return specs
