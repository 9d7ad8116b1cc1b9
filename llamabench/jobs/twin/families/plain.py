"""Twins of plain GQA transformers: llama, qwen2, qwen3 (dense) and qwen2moe, qwen3moe (MoE).

Tensors as in src/models/llama.cpp, qwen2.cpp, qwen2moe.cpp, qwen3.cpp and qwen3moe.cpp (load_arch_tensors):
- qwen2 / qwen2moe: attn_q and attn_output are {n_embd, n_embd} (not n_head x head_dim), so the hidden
  size is pinned to n_head x head_dim and every f16 matrix is an all-zero hole; optional q/k/v biases
  (create_tensor_qkv), written as real Qwen2 GGUFs carry them.
- qwen3 / qwen3moe: q/k norms.
- experts: {n_embd, F, n_expert} with F the architectures row's expert_ffn_key: n_ff for llama
  (Mixtral), n_ff_exp (else n_ff / n_expert_used) for qwen2moe / qwen3moe.
- qwen2moe: a shared expert of n_ff_shexp (else n_ff) behind a sigmoid gate ffn_gate_inp_shexp {n_embd}.
"""

from __future__ import annotations

import dataclasses

from ....model import architectures
from ....model import gguf_keys as K
from ..context import TwinContext
from ..writer import TensorSpec
from .mamba2 import _big

HIDDEN_IS_HEADS = ("qwen2", "qwen2moe")  # attn_q {n_embd, n_embd}: n_embd == n_head x head_dim
QKV_BIAS = ("qwen2", "qwen2moe")
QK_NORM = ("qwen3", "qwen3moe")
SHARED_EXPERT = ("qwen2moe",)


def adjust_keys(keys: dict, arch: str) -> None:
    if arch not in HIDDEN_IS_HEADS and arch != "llama":
        return
    n_head = keys[f"{arch}.{K.HEAD_COUNT}"]
    n_head = int(n_head[0] if isinstance(n_head, (tuple, list)) else n_head)
    # build.twin_keys pinned key_length to the source's n_embd / n_head before shrinking n_embd
    head_dim = int(keys.get(f"{arch}.{K.KEY_LENGTH}") or keys[f"{arch}.{K.EMBEDDING_LENGTH}"] // n_head)
    if arch in HIDDEN_IS_HEADS:
        keys[f"{arch}.{K.EMBEDDING_LENGTH}"] = n_head * head_dim
    else:
        # llama checks rope.dimension_count == key_length (llama_model_base::load_hparams); a real GGUF
        # carries it, a catalog entry may not
        keys[f"{arch}.rope.dimension_count"] = head_dim


def _experts(t: TwinContext, il: int, expert_ffn_key: str) -> list[TensorSpec]:
    """Routed experts of n_ff_exp (else n_ff / n_expert_used, as qwen2moe.cpp and llama.cpp size them)."""
    width = t.per_layer(expert_ffn_key, il) or t.n_ff(il) // max(t.per_layer(K.EXPERT_USED_COUNT, il, 1), 1)
    shared = t.architecture in SHARED_EXPERT
    return t.moe(il, n_ff_exp=width, shared=shared, gate_inp_shexp=shared, n_ff_shexp=t.n_ff_shexp or t.n_ff(il))


def _hole(t: TwinContext, spec: TensorSpec) -> TensorSpec:
    """An f16 matrix made an all-zero hole, in tq1_0 where its row allows (see mamba2._big)."""
    if spec.dtype != "f16" or len(spec.shape) < 2:
        return spec
    return dataclasses.replace(spec, dtype=_big(t, spec.shape[0]), fill="zeros")


def tensors(t: TwinContext) -> list[TensorSpec]:
    E, arch = t.n_embd, t.architecture
    expert_ffn_key = architectures.get(arch).expert_ffn_key  # None: the architecture has no experts
    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs += [t.norm(p + "attn_norm.weight", E), t.norm(p + "ffn_norm.weight", E)]
        specs += t.attention(il, qk_norm=arch in QK_NORM)
        if arch in QKV_BIAS:
            kv = t.n_head_kv(il)
            specs += [t.vec(p + "attn_q.bias", t.n_head * t.head_k), t.vec(p + "attn_k.bias", kv * t.head_k),
                      t.vec(p + "attn_v.bias", kv * t.head_v)]
        specs += _experts(t, il, expert_ffn_key) if t.n_expert and expert_ffn_key else t.dense_ffn(il)
    if arch in HIDDEN_IS_HEADS:
        specs = [_hole(t, s) for s in specs]
    return specs
