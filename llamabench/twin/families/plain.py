"""Twins of plain GQA transformers: llama, qwen2, qwen3 (dense) and qwen2moe/qwen3moe (MoE).

Tensors as in src/models/llama.cpp, qwen3.cpp, qwen3moe.cpp (load_arch_tensors).
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec

ARCHITECTURES = ("llama", "qwen2", "qwen3", "qwen3moe")


def adjust_keys(keys: dict, arch: str) -> None:
    # llama checks rope.dimension_count == key_length; a real GGUF carries it, a catalog entry may not
    if arch == "llama":
        head_dim = keys.get(f"{arch}.attention.key_length") or (
            keys[f"{arch}.embedding_length"] // keys[f"{arch}.attention.head_count"])
        keys[f"{arch}.rope.dimension_count"] = head_dim


def tensors(t: TwinContext) -> list[TensorSpec]:
    E = t.n_embd
    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs += [t.norm(p + "attn_norm.weight", E), t.norm(p + "ffn_norm.weight", E)]
        specs += t.attention(il, qk_norm=t.architecture in ("qwen3", "qwen3moe"))
        if t.architecture == "qwen2":
            kv = t.n_head_kv(il)
            specs += [t.vec(p + "attn_q.bias", t.n_head * t.head_k), t.vec(p + "attn_k.bias", kv * t.head_k),
                      t.vec(p + "attn_v.bias", kv * t.head_v)]
        if t.n_expert:
            specs += t.moe(il)
        else:
            specs += t.dense_ffn(il)
    return specs
