"""Twins of Falcon-H1: every layer runs attention and a Mamba2 mixer side by side, so every layer has
both a KV cache and a recurrent state (llama_memory_hybrid with both filters true).

Tensors as in src/models/falcon-h1.cpp (load_arch_tensors). The hidden size shrinks (it only feeds
the projections); ssm.* keys and the attention heads stay real. The FFN norm is `blk.N.ffn_norm`,
without a `.weight` suffix; head counts are read from layer 0 only.
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec
from .mamba2 import mamba2_mixer


def tensors(t: TwinContext) -> list[TensorSpec]:
    E = t.n_embd
    specs = t.embeddings()
    for il in range(t.n_layer):
        p = f"blk.{il}."
        specs += mamba2_mixer(t, il)
        specs += t.attention(il)
        specs += [t.norm(p + "attn_norm.weight", E), t.norm(p + "ffn_norm", E)]
        specs += t.dense_ffn(il, n_ff=t.n_ff(0))
    return specs
