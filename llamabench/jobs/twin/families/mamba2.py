"""Twins of pure Mamba2 models (mamba2, e.g. Mamba-Codestral-7B): no KV cache, a recurrent state per layer.

Tensors as in src/models/mamba2.cpp (load_arch_tensors). The hidden size only feeds ssm_in and leaves
ssm_out, so it shrinks; ssm.inner_size / state_size / group_count / conv_kernel stay real because they
size the conv and SSM states (n_embd_r, n_embd_s). `mamba2_mixer` is shared with the hybrid families
(granitehybrid, nemotron_h, falcon-h1), which build the same mixer through build_mamba2_layer.
"""

from __future__ import annotations

from ..context import TwinContext
from ..writer import TensorSpec

# 64 layers x ssm_in {E, 2*d_inner + 2*n_group*d_state + n_head} in f16 would pass 200 MB at 64
N_EMBD = 32


def pin_hidden_to_inner(keys: dict, arch: str) -> None:
    """For families where llama.cpp asserts 2 * n_embd == ssm.inner_size (granitehybrid, jamba)."""
    keys[f"{arch}.embedding_length"] = int(keys[f"{arch}.ssm.inner_size"]) // 2
    # the MoE path sizes experts by feed_forward_length; a dense model needs it too
    if not keys.get(f"{arch}.feed_forward_length"):
        keys[f"{arch}.feed_forward_length"] = 64


def _big(t: TwinContext, row: int) -> str:
    """Storage for an all-zero matrix (a hole on disk): tq1_0 (1.69 bits a weight) where the row allows,
    else f16. Not q4_0/q8_0: on CPUs with AMX those go to the AMX buffer type, whose mul_mat crashed
    (SIGSEGV in ggml_backend_amx_mul_mat) on a q4_0 {32, 4096} matrix."""
    return "tq1_0" if row % 256 == 0 else "f16"


def mamba2_mixer(t: TwinContext, il: int, *, big: bool = False, ssm_norm: bool = True) -> list[TensorSpec]:
    """One Mamba2 mixer: ssm_in, conv1d (+bias, which the graph adds though the loaders call it optional),
    dt bias, A, D, grouped norm, out projection. `big`: store ssm_in / ssm_out as zero holes."""
    E = t.n_embd
    d_conv = int(t.get("ssm.conv_kernel"))
    d_inner = int(t.get("ssm.inner_size"))
    d_state = int(t.get("ssm.state_size"))
    n_head = int(t.get("ssm.time_step_rank"))
    n_group = int(t.get("ssm.group_count"))
    conv_dim = d_inner + 2 * n_group * d_state
    d_in_proj = d_inner + conv_dim + n_head
    p = f"blk.{il}."
    specs = [
        t.mat(p + "ssm_in.weight", E, d_in_proj, dtype=_big(t, E) if big else "f16", fill="zeros" if big else "normal"),
        t.mat(p + "ssm_conv1d.weight", d_conv, conv_dim, dtype="f32"),
        t.vec(p + "ssm_conv1d.bias", conv_dim),
        t.vec(p + "ssm_dt.bias", n_head, fill="zeros"),
        t.mat(p + "ssm_a", 1, n_head, dtype="f32", fill="negative"),  # no .weight suffix
        t.mat(p + "ssm_d", 1, n_head, dtype="f32"),
        t.mat(p + "ssm_out.weight", d_inner, E, dtype=_big(t, d_inner) if big else "f16",
              fill="zeros" if big else "normal"),
    ]
    if ssm_norm:
        specs.append(t.mat(p + "ssm_norm.weight", d_inner // n_group, n_group, dtype="f32", fill="ones"))
    return specs


def tensors(t: TwinContext) -> list[TensorSpec]:
    specs = t.embeddings()
    for il in range(t.n_layer):
        specs.append(t.norm(f"blk.{il}.attn_norm.weight", t.n_embd))
        specs += mamba2_mixer(t, il)
    return specs
