"""Twins of Nemotron-H (nemotron_h) and Nemotron-H MoE (nemotron_h_moe, e.g. Nemotron-3-Nano).

Tensors as in src/models/nemotron-h.cpp (load_arch_tensors; nemotron_h_moe reuses it). Each layer
is one of three kinds, decided by the per-layer arrays: Mamba2 (head_count_kv 0 and
feed_forward_length 0), attention (head_count_kv > 0, feed_forward_length 0), FFN (feed_forward_length
> 0: a ReLU^2 up/down MLP, or with expert_count a sigmoid-routed MoE with a shared expert). Only
Mamba2 layers hold recurrent state and only attention layers hold KV. Appended NextN/MTP blocks
(nextn_predict_layers) are not written.
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec
from .mamba2 import mamba2_mixer


def adjust_keys(keys: dict, arch: str) -> None:
    # the loader requires layer_norm_epsilon (the MTP head's final norm) even without an MTP head
    keys.setdefault(f"{arch}.attention.layer_norm_epsilon", keys[f"{arch}.attention.layer_norm_rms_epsilon"])
    if keys.get(f"{arch}.moe_latent_size"):
        keys[f"{arch}.moe_latent_size"] = 32


def tensors(t: TwinContext) -> list[TensorSpec]:
    E = t.n_embd
    X = t.n_expert
    latent = int(t.get("moe_latent_size", 0) or 0)
    M = latent or E
    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs.append(t.norm(p + "attn_norm.weight", E))
        kind = t.layer_kind(il)
        if kind == "recurrent":
            specs += mamba2_mixer(t, il)
        elif kind == "full":
            specs += t.attention(il)
        elif X:
            F = (t.per_layer("expert_feed_forward_length", il)
                 or t.n_ff(il) // max(t.per_layer("expert_used_count", il), 1))
            S = t.n_ff_shexp
            specs += [
                t.mat(p + "ffn_gate_inp.weight", E, X, dtype="f32"),
                t.vec(p + "exp_probs_b.bias", X, fill="zeros"),
                t.mat(p + "ffn_up_exps.weight", M, F, X),
                t.mat(p + "ffn_down_exps.weight", F, M, X),
                t.mat(p + "ffn_up_shexp.weight", E, S),
                t.mat(p + "ffn_down_shexp.weight", S, E),
            ]
            if latent:
                specs += [t.mat(p + "ffn_latent_down.weight", E, M), t.mat(p + "ffn_latent_up.weight", M, E)]
        else:
            F = t.n_ff(il)
            specs += [t.mat(p + "ffn_up.weight", E, F), t.mat(p + "ffn_down.weight", F, E)]
    return specs
