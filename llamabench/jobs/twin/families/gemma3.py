"""Twins of gemma-3 (gemma3): sliding-window layers with every Nth layer global.

Tensors as in src/models/gemma3.cpp (load_arch_tensors): q/k norms and post-attention / post-FFN norms.
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec


def tensors(t: TwinContext) -> list[TensorSpec]:
    E = t.n_embd
    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs += [t.norm(p + "attn_norm.weight", E)]
        specs += t.attention(il, qk_norm=True)
        specs += [t.norm(p + "post_attention_norm.weight", E), t.norm(p + "ffn_norm.weight", E),
                  t.norm(p + "post_ffw_norm.weight", E)]
        specs += t.dense_ffn(il)
    return specs
