"""An EAGLE3 draft head for a real target GGUF, written for the tests (no EAGLE3 GGUF ships in a registry package).

The tensors are those `llama_model_eagle3::load_arch_tensors` creates (src/models/eagle3.cpp:38-101, the vendored
llama.cpp): the fusion layer `fc` (3 target layers' hidden states to the draft's width), one decoder layer whose
attention takes the token embedding and the fused features side by side (2 x n_embd wide), and the output norm.
Without `token_embd` and `output` of its own it borrows the target's through ctx_other (src/models/eagle3.cpp:
163-170, 295-303), as EAGLE3 heads for Llama 3.1 8B do; `own_head=True` gives it both. The tokenizer is the
target's, so llama-server takes the pair (common_speculative_are_compatible). Weights are small random values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

ARCH = "eagle3"


def _copy_tokenizer(reader: GGUFReader, writer: GGUFWriter) -> None:
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            writer.add_array(field.name, field.contents())
        elif kind == GGUFValueType.STRING:
            writer.add_string(field.name, field.contents())
        else:
            writer.add_key_value(field.name, field.contents(), kind)


def _target_value(reader: GGUFReader, key: str) -> int:
    return int(reader.fields[key].contents())


def write_eagle3(target: Path, out: Path, *, n_head_kv: int = 2, n_ff: int = 1024, own_head: bool = False,
                 extract_layers: tuple[int, int, int] | None = None) -> Path:
    """An EAGLE3 head for `target` (its width, its tokenizer) at `out`; returns `out`."""
    reader = GGUFReader(str(target))
    arch = str(reader.fields["general.architecture"].contents())
    n_embd = _target_value(reader, f"{arch}.embedding_length")
    n_head = _target_value(reader, f"{arch}.attention.head_count")
    n_layer_tgt = _target_value(reader, f"{arch}.block_count")
    head = n_embd // n_head
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].contents())
    layers = extract_layers or (2, n_layer_tgt // 2, n_layer_tgt - 3)

    writer = GGUFWriter(str(out), ARCH)
    writer.add_name("eagle3 test head")
    writer.add_block_count(1)
    writer.add_context_length(_target_value(reader, f"{arch}.context_length"))
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1e6)
    writer.add_array(f"{ARCH}.target_layers", list(layers))
    writer.add_uint32(f"{ARCH}.target_hidden_size", n_embd)
    _copy_tokenizer(reader, writer)

    rng = np.random.default_rng(0)

    def add(name: str, *shape: int) -> None:  # shape as ggml lists it (ne0 first); numpy takes it reversed
        data = (rng.standard_normal(tuple(reversed(shape))) * 0.02).astype(np.float16 if len(shape) > 1 else
                                                                           np.float32)
        if len(shape) == 1:
            data = np.ones(shape, dtype=np.float32)
        writer.add_tensor(name, data)

    add("fc.weight", 3 * n_embd, n_embd)
    add("output_norm.weight", n_embd)
    if own_head:
        add("token_embd.weight", n_embd, n_vocab)
        add("output.weight", n_embd, n_vocab)
    add("blk.0.attn_norm.weight", n_embd)
    add("blk.0.attn_norm_2.weight", n_embd)
    add("blk.0.attn_q.weight", 2 * n_embd, head * n_head)
    add("blk.0.attn_k.weight", 2 * n_embd, head * n_head_kv)
    add("blk.0.attn_v.weight", 2 * n_embd, head * n_head_kv)
    add("blk.0.attn_output.weight", head * n_head, n_embd)
    add("blk.0.ffn_norm.weight", n_embd)
    add("blk.0.ffn_gate.weight", n_embd, n_ff)
    add("blk.0.ffn_down.weight", n_ff, n_embd)
    add("blk.0.ffn_up.weight", n_embd, n_ff)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
