"""What llama.cpp would abort on (GGML_ASSERT, SIGABRT) rather than refuse, seen first and said in one line. Pure.

Checked before any llama.cpp load, after `layout.geometry_from_metadata` has checked the layout keys:
- `expert_used_count` above `expert_count` (the MoE graph asserts);
- tokenizer arrays of different lengths (tokens, scores, token types: the vocab loader indexes them together);
- per-layer K/V widths that disagree with the layer's own attn_k / attn_v tensors.
"""

from __future__ import annotations

import re

from ..core.errors import BadModelFile
from .geometry import ModelGeometry
from .metadata import ModelMetadata

TOKENIZER_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")
_ATTN = re.compile(r"^blk\.(\d+)\.attn_(k|v)\.weight$")


def check_for_llama(meta: ModelMetadata, geometry: ModelGeometry) -> None:
    used, count = meta.arch_count("expert_used_count"), meta.arch_count("expert_count")
    if used > count:
        raise BadModelFile(f"{meta.source}: {meta.architecture}.expert_used_count ({used}) is above expert_count "
                           f"({count}); llama.cpp would abort")
    lengths = {k: meta.array_lengths[k] for k in TOKENIZER_ARRAYS if k in meta.array_lengths}
    if len(set(lengths.values())) > 1:
        raise BadModelFile(f"{meta.source}: tokenizer arrays of different lengths ("
                           + ", ".join(f"{k.rsplit('.', 1)[1]} {n:,}" for k, n in lengths.items())
                           + "); llama.cpp would abort loading the vocabulary")
    widths = {layer.index: layer for layer in geometry.layers if layer.has_kv and not geometry.is_mla}
    for t in meta.tensors:
        m = _ATTN.match(t.name)
        if not m or int(m[1]) not in widths or len(t.shape) < 2:
            continue
        layer = widths[int(m[1])]
        want = layer.k_width if m[2] == "k" else layer.v_width
        if want and t.shape[1] != want:
            raise BadModelFile(f"{meta.source}: layer {layer.index}: {t.name} is {t.shape[1]} wide but the metadata "
                               f"says {layer.n_head_kv} KV heads x {want // max(1, layer.n_head_kv)} = {want}; "
                               "llama.cpp would abort")
