"""One row per GGUF architecture llamabench supports: every per-architecture fact, once.

Pure data (like gguf-py's `gguf/constants.py`): `layout` reads it to place caches, the twin writer
to pick a tensor family and widths; `rs_rollback` says how many recurrent rows a sequence keeps.
Facts from the llama.cpp vendored in llama-cpp-python 0.3.36:
- layout rules: each family's `load_arch_hparams` (src/models/<arch>.cpp) and the layer filters of
  `llama_model::create_memory` (src/llama-model.cpp)
- required keys: `ml.get_key(...)` calls without `required = false` in `load_arch_hparams`
- default SWA patterns: the `load_swa_pattern(ml, n_pattern)` calls (src/models/gemma3.cpp, openai-moe.cpp)
- recurrent state: `llama_hparams::n_embd_r / n_embd_s` (src/llama-hparams.cpp)
- rs rollback: `llm_arch_supports_rs_rollback` (src/llama-arch.cpp)
- expert widths: the `ffn_*_exps` shapes in each family's `load_arch_tensors`
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..core.errors import UnsupportedArchitecture
from . import gguf_keys as K


class LayoutRule(StrEnum):
    """How llama.cpp decides which layer caches what (see layout.geometry_from_metadata)."""

    PLAIN = "plain"  # every layer full GQA attention with a KV cache
    INTERVAL = "interval"  # recurrent unless every Nth (full_attention_interval, or recurrent_layers)
    KV_ZERO = "kv-zero"  # recurrent iff the layer's head_count_kv is 0 (llama_memory_hybrid's default filters)
    NEMOTRON_H = "nemotron-h"  # head_count_kv and feed_forward_length per layer: attention, Mamba2 or FFN-only
    SWA = "swa"  # attention everywhere, sliding-window layers by sliding_window_pattern
    RECURRENT = "recurrent"  # recurrent only, no KV (llm_arch_is_recurrent)
    PARALLEL = "parallel"  # attention and SSM side by side in every layer (falcon-h1: both filters true)
    MLA = "mla"  # MLA-capable: one K-only latent row per layer when key_length_mla / value_length_mla are set


class RecurrentState(StrEnum):
    """Which branch of llama_hparams::n_embd_r / n_embd_s sizes a recurrent layer's state."""

    SSM = "ssm"  # conv (d_conv - 1) x (d_inner + 2 n_group d_state), state d_state x d_inner
    SHORTCONV = "shortconv"  # LFM2: conv n_embd x (l_cache - 1), no SSM state


SSM_KEYS = (K.SSM_CONV_KERNEL, K.SSM_INNER_SIZE, K.SSM_STATE_SIZE, K.SSM_TIME_STEP_RANK, K.SSM_GROUP_COUNT)
MAMBA1_SSM_KEYS = SSM_KEYS[:4]  # src/models/jamba.cpp reads no ssm.group_count


@dataclass(frozen=True)
class Architecture:
    name: str  # general.architecture, as LLM_ARCH_NAMES spells it (src/llama-arch.cpp)
    layout: LayoutRule
    twin_family: str  # module under llamabench/twin/families that writes this architecture's tensors
    # keys llama.cpp requires that size or place the cache; keys it needs only for the weights (norm
    # epsilons, rope sections, expert widths) are left to the twin writer
    required_keys: tuple[str, ...] = ()
    swa_pattern: int | None = None  # default sliding_window_pattern (SWA rule): layer i is SWA iff i % N < N - 1
    swa_on_attention: bool = False  # with sliding_window > 0 every attention layer is SWA (lfm2)
    recurrent_state: RecurrentState | None = None  # None: no recurrent layers
    rs_rollback: bool = False  # keeps 1 + n_rs_seq state rows per sequence (elsewhere n_rs_seq is reset to 0)
    expert_ffn_key: str | None = None  # the key that sizes routed experts' FFN width; None: no experts

    @property
    def ffn_decides_layout(self) -> bool:
        """A per-layer feed_forward_length of 0 marks a mixer layer, so the FFN width is a layout key."""
        return self.layout is LayoutRule.NEMOTRON_H


_SSM = RecurrentState.SSM
_EXP_FF = K.EXPERT_FEED_FORWARD_LENGTH  # n_ff_exp (falling back to n_ff / n_expert_used where the family allows)
_FF = K.FEED_FORWARD_LENGTH  # experts shaped {n_embd, n_ff, n_expert}

_ROWS = (
    # src/models/llama.cpp: MoE variants (Mixtral) shape experts by n_ff
    Architecture("llama", LayoutRule.PLAIN, "plain", expert_ffn_key=_FF),
    Architecture("qwen2", LayoutRule.PLAIN, "plain"),
    # src/models/qwen2moe.cpp: n_ff_exp ? n_ff_exp : n_ff / n_expert_used; shared expert n_ff_shexp ? : n_ff
    Architecture("qwen2moe", LayoutRule.PLAIN, "plain", expert_ffn_key=_EXP_FF),
    Architecture("qwen3", LayoutRule.PLAIN, "plain"),
    Architecture("qwen3moe", LayoutRule.PLAIN, "plain", expert_ffn_key=_EXP_FF),
    Architecture("qwen35", LayoutRule.INTERVAL, "qwen35", SSM_KEYS, recurrent_state=_SSM, rs_rollback=True),
    Architecture("qwen35moe", LayoutRule.INTERVAL, "qwen35", SSM_KEYS, recurrent_state=_SSM, rs_rollback=True,
                 expert_ffn_key=_EXP_FF),
    # not in llm_arch_supports_rs_rollback, unlike qwen35 / qwen35moe
    Architecture("qwen3next", LayoutRule.INTERVAL, "qwen35", SSM_KEYS, recurrent_state=_SSM, expert_ffn_key=_EXP_FF),
    Architecture("granitehybrid", LayoutRule.KV_ZERO, "granite_hybrid", SSM_KEYS, recurrent_state=_SSM,
                 expert_ffn_key=_FF),
    Architecture("jamba", LayoutRule.KV_ZERO, "jamba", MAMBA1_SSM_KEYS, recurrent_state=_SSM, expert_ffn_key=_FF),
    Architecture("lfm2", LayoutRule.KV_ZERO, "lfm2", (K.SHORTCONV_L_CACHE,), swa_on_attention=True,
                 recurrent_state=RecurrentState.SHORTCONV, rs_rollback=True),
    Architecture("nemotron_h", LayoutRule.NEMOTRON_H, "nemotron_h", SSM_KEYS, recurrent_state=_SSM, rs_rollback=True),
    # src/models/nemotron-h.cpp (shared with nemotron_h_moe): n_ff_exp(i) ? : n_ff(i) / n_expert_used(i)
    Architecture("nemotron_h_moe", LayoutRule.NEMOTRON_H, "nemotron_h", SSM_KEYS, recurrent_state=_SSM,
                 rs_rollback=True, expert_ffn_key=_EXP_FF),
    # src/models/gemma3.cpp: SWA only when sliding_window > 0, then load_swa_pattern(ml, 6)
    Architecture("gemma3", LayoutRule.SWA, "gemma3", swa_pattern=6),
    # src/models/openai-moe.cpp: sliding_window required, load_swa_pattern(ml, 2)
    Architecture("gpt-oss", LayoutRule.SWA, "gpt_oss", (K.SLIDING_WINDOW,), swa_pattern=2, expert_ffn_key=_EXP_FF),
    Architecture("mamba2", LayoutRule.RECURRENT, "mamba2", SSM_KEYS, recurrent_state=_SSM),
    Architecture("falcon-h1", LayoutRule.PARALLEL, "falcon_h1", SSM_KEYS, recurrent_state=_SSM),
    Architecture("deepseek2", LayoutRule.MLA, "deepseek2", (K.KV_LORA_RANK,), expert_ffn_key=_EXP_FF),
)

ARCHITECTURES: dict[str, Architecture] = {row.name: row for row in _ROWS}
SUPPORTED: tuple[str, ...] = tuple(sorted(ARCHITECTURES))


def get(arch: str, source: str = "") -> Architecture:
    """The row of `arch`; an UnsupportedArchitecture naming `source` (a path or catalog id) where there is none."""
    row = ARCHITECTURES.get(arch)
    if row is None:
        where = f"{source}: " if source else ""
        raise UnsupportedArchitecture(f"{where}architecture '{arch}' is not supported by llamabench",
                                      hint="supported: " + ", ".join(SUPPORTED))
    return row
