"""Twins of Jamba: Mamba (v1) layers, with attention where head_count_kv > 0.

Tensors as in src/models/jamba.cpp (load_arch_tensors). llama.cpp asserts 2 * n_embd == ssm.inner_size,
so the hidden size stays real (inner_size / 2): the big matrices are all-zero tq1_0 holes. Every layer
gets a dense FFN (a layer is MoE only where ffn_gate_inp exists; that does not change any cache).
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec
from .mamba2 import _big, pin_hidden_to_inner

adjust_keys = pin_hidden_to_inner


def tensors(t: TwinContext) -> list[TensorSpec]:
    E = t.n_embd
    d_conv = int(t.get("ssm.conv_kernel"))
    d_inner = int(t.get("ssm.inner_size"))
    d_state = int(t.get("ssm.state_size"))
    dt_rank = int(t.get("ssm.time_step_rank"))
    zeros = lambda name, *shape: t.mat(name, *shape, dtype=_big(t, shape[0]), fill="zeros")  # noqa: E731
    specs = [zeros("token_embd.weight", E, t.n_vocab) if E % 256 == 0 else t.mat("token_embd.weight", E, t.n_vocab),
             t.norm("output_norm.weight", E), t.mat("output.weight", E, t.n_vocab, fill="zeros")]
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs.append(t.norm(p + "attn_norm.weight", E))
        if t.n_head_kv(il) == 0:
            specs += [
                zeros(p + "ssm_in.weight", E, 2 * d_inner),
                t.mat(p + "ssm_conv1d.weight", d_conv, d_inner, dtype="f32"),
                t.vec(p + "ssm_conv1d.bias", d_inner),
                zeros(p + "ssm_x.weight", d_inner, dt_rank + 2 * d_state),
                t.norm(p + "ssm_dt_norm.weight", dt_rank),
                zeros(p + "ssm_dt.weight", dt_rank, d_inner),
                t.vec(p + "ssm_dt.bias", d_inner, fill="zeros"),
                t.norm(p + "ssm_b_norm.weight", d_state),
                t.norm(p + "ssm_c_norm.weight", d_state),
                t.mat(p + "ssm_a", d_state, d_inner, dtype="f32", fill="negative"),
                t.vec(p + "ssm_d", d_inner),
                zeros(p + "ssm_out.weight", d_inner, E),
            ]
        else:
            kv = t.n_head_kv(il) * t.head_v
            specs += [zeros(p + "attn_q.weight", E, E), zeros(p + "attn_k.weight", E, kv),
                      zeros(p + "attn_v.weight", E, kv), zeros(p + "attn_output.weight", E, E)]
        F = t.n_ff(il)
        specs += [t.norm(p + "ffn_norm.weight", E), zeros(p + "ffn_gate.weight", E, F),
                  zeros(p + "ffn_up.weight", E, F), t.mat(p + "ffn_down.weight", F, E, fill="zeros")]
    return specs
