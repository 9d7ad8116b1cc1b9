"""Twins of gpt-oss: alternating sliding-window (even layers) and full attention, MoE with biases.

Tensors as in src/models/openai-moe.cpp (load_arch_tensors): attention sinks, output bias, and
biases on the router and on every expert tensor; output.weight is required (no tied fallback).
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec


def tensors(t: TwinContext) -> list[TensorSpec]:
    E, H = t.n_embd, t.n_head
    n_rot = int(t.get("rope.dimension_count", t.head_k))
    specs = t.embeddings(output=True)
    for il in range(t.n_layer):
        p = f"blk.{il}."
        kv = t.n_head_kv(il)
        specs += [
            t.norm(p + "attn_norm.weight", E),
            t.norm(p + "post_attention_norm.weight", E),
            t.mat(p + "attn_q.weight", E, H * n_rot),
            t.mat(p + "attn_k.weight", E, kv * n_rot),
            t.mat(p + "attn_v.weight", E, kv * n_rot),
            t.mat(p + "attn_output.weight", H * n_rot, E),
            t.vec(p + "attn_output.bias", E),
            t.vec(p + "attn_sinks.weight", H),
        ]
        specs += t.moe(il, bias=True)
    return specs
