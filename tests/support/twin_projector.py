"""A vision projector GGUF with real clip metadata and zero tensors of the real shapes (a sparse file).

Gemma 3's SigLIP encoder as llama.cpp's converter writes it (google/gemma-3-27b-it config.json
vision_config: image_size 896, patch_size 14, hidden_size 1152, intermediate_size 4304,
num_hidden_layers 27, num_attention_heads 16; projector into the text model's hidden size).
"""

from __future__ import annotations

from pathlib import Path

from llamabench.jobs.twin.writer import TensorSpec, write_gguf

GEMMA3_VISION = {"image_size": 896, "patch_size": 14, "embedding_length": 1152, "feed_forward_length": 4304,
                 "block_count": 27, "attention.head_count": 16}


def write_projector(path: Path, *, text_hidden: int = 5376, vision: dict = GEMMA3_VISION) -> Path:
    E, F, L = vision["embedding_length"], vision["feed_forward_length"], vision["block_count"]
    n_patches = (vision["image_size"] // vision["patch_size"]) ** 2
    keys = {"general.architecture": "clip", "clip.has_vision_encoder": True, "clip.projector_type": "gemma3",
            "clip.vision.projection_dim": text_hidden, "clip.vision.attention.layer_norm_epsilon": 1e-6,
            "clip.vision.image_mean": (0.5, 0.5, 0.5), "clip.vision.image_std": (0.5, 0.5, 0.5),
            **{f"clip.vision.{k}": v for k, v in vision.items()}}
    zero = dict(dtype="f16", fill="zeros")
    specs = [TensorSpec("v.patch_embd.weight", (vision["patch_size"], vision["patch_size"], 3, E), **zero),
             TensorSpec("v.position_embd.weight", (E, n_patches), **zero),
             TensorSpec("v.post_ln.weight", (E,), "f32", "zeros"),
             TensorSpec("mm.input_projection.weight", (E, text_hidden), **zero)]
    for il in range(L):
        p = f"v.blk.{il}."
        specs += [TensorSpec(p + n, (E, E), **zero) for n in ("attn_q.weight", "attn_k.weight", "attn_v.weight",
                                                              "attn_out.weight")]
        specs += [TensorSpec(p + "ffn_up.weight", (E, F), **zero), TensorSpec(p + "ffn_down.weight", (F, E), **zero),
                  TensorSpec(p + "ln1.weight", (E,), "f32", "zeros"),
                  TensorSpec(p + "ln2.weight", (E,), "f32", "zeros")]
    write_gguf(path, "clip", keys, specs)
    return Path(path)
