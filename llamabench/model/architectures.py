"""One row per GGUF architecture of the vendored llama.cpp: every per-architecture fact, once.

Pure data (like gguf-py's `gguf/constants.py`): `layout` reads it to place caches, the twin writer
to pick a tensor family and widths; `rs_rollback` says how many recurrent rows a sequence keeps.

Every name in llama.cpp's `LLM_ARCH_NAMES` (src/llama-arch.cpp:8-170) has a row. A row with no field
set follows the generic rule of `layout`: every layer attends and caches K and V, widths from the
standard keys (`llama_model_base::load_hparams`, src/llama-model.cpp:1298-1492), NextN layers left to
the MTP context (src/llama-model.cpp:2796-2804). Every other field is an exception, with a comment
citing the llama.cpp file and line it follows. Paths are relative to `vendor/llama.cpp/` of
llama-cpp-python 0.3.36; `M/` stands for `src/models/`.

A row whose `layout` is NO_RULE names why llamabench cannot express that cache; a name that is not in
the table (an architecture newer than this llama.cpp) has no rule either. `get()` raises for both;
`lookup()` does not.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from ..core.errors import UnsupportedArchitecture
from . import gguf_keys as K

# llama.cpp's own per-architecture lists. They live in its source only (no exported function lists
# them), so they are data here; tests/pure/test_architecture_rules.py parses src/llama-arch.cpp and
# checks these sets and the table against it.
RECURRENT_ARCHS = frozenset({  # llm_arch_is_recurrent, src/llama-arch.cpp:1071-1083
    "mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
HYBRID_ARCHS = frozenset({  # llm_arch_is_hybrid, src/llama-arch.cpp:1085-1109
    "jamba", "falcon-h1", "plamo2", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe",
    "qwen3next", "kimi-linear", "bailingmoe3", "kimi-k3", "glm5-next", "qwen35", "qwen35moe", "qwen4exp",
    "deepseek4", "minimax-01"})
DIFFUSION_ARCHS = frozenset({  # llm_arch_is_diffusion, src/llama-arch.cpp:1111-1121
    "dream", "llada", "llada-moe", "rnd1"})
RS_ROLLBACK_ARCHS = frozenset({  # llm_arch_supports_rs_rollback, src/llama-arch.cpp:1123-1140
    "kimi-k3", "qwen35", "qwen35moe", "qwen4exp", "deepseek4", "glm5-next", "nemotron_h", "nemotron_h_moe",
    "lfm2", "lfm2moe", "bailingmoe3"})
# create_memory returns nullptr for these (src/llama-model.cpp:2358-2374): no KV cache, no recurrent state
NO_CACHE_ARCHS = frozenset({
    "bert", "jina-bert-v2", "jina-bert-v3", "nomic-bert", "nomic-bert-moe", "neo-bert", "eurobert",
    "wavtokenizer-dec", "modern-bert", "gemma-embedding", *DIFFUSION_ARCHS})


class LayoutRule(StrEnum):
    """Which layers attend and which carry recurrent state (see layout.geometry_from_metadata)."""

    PLAIN = "plain"  # every layer attends and owns a KV cache (SWA, MLA, sharing: the row's other fields)
    INTERVAL = "interval"  # recurrent unless every Nth (full_attention_interval, or recurrent_layers)
    KV_ZERO = "kv-zero"  # recurrent iff the layer's head_count_kv is 0 (llama_memory_hybrid's default filters)
    NEMOTRON_H = "nemotron-h"  # head_count_kv and feed_forward_length per layer: attention, Mamba2 or FFN-only
    RECURRENT = "recurrent"  # recurrent only, no KV (llm_arch_is_recurrent)
    PARALLEL = "parallel"  # attention and SSM side by side in every layer (falcon-h1: both filters true)
    NO_CACHE = "no-cache"  # create_memory returns nullptr: encoders, diffusion, a vocoder
    NO_RULE = "no-rule"  # a cache llamabench cannot express (the row's `no_rule` says why)


class SwaRule(StrEnum):
    """When an architecture has sliding-window layers (`swa_type != NONE` after its load_arch_hparams)."""

    NONE = "none"  # never, whatever attention.sliding_window says
    ALWAYS = "always"  # set unconditionally: the pattern decides which layers
    IF_WINDOW = "if-window"  # only when attention.sliding_window > 0
    UNLESS_ZERO = "unless-zero"  # unless attention.sliding_window is present and 0 (llama4)
    ATTENTION = "attention"  # sliding_window > 0 makes every attention (non-recurrent) layer SWA (lfm2)


class RecurrentState(StrEnum):
    """Which branch of llama_hparams::n_embd_r / n_embd_s (src/llama-hparams.cpp:208-258) sizes a layer's state."""

    SSM = "ssm"  # conv (d_conv - 1) x (d_inner + 2 n_group d_state), state d_state x d_inner
    MAMBA1 = "mamba1"  # the same with no ssm.group_count read (the 2 n_group d_state term is 0)
    SHORTCONV = "shortconv"  # LFM2: conv n_embd x (l_cache - 1), no SSM state
    RWKV = "rwkv"  # token_shift_count x n_embd, and n_embd x wkv.head_size
    KDA = "kda"  # Kimi delta attention: 3 x (d_conv - 1, or 3) x n_head x kda.head_dim, and kda.head_dim^2 x n_head
    LIGHTNING = "lightning"  # MiniMax-01: no conv state, key_length^2 x n_head


class KvSharing(StrEnum):
    """Layers from n_layer_kv_from_start on own no cache: they read an earlier layer's (reuse callback)."""

    NONE = "none"
    FIRST_20 = "first-20"  # gemma3n: n_layer_kv_from_start = 20, hard-coded
    SHARED_KV_LAYERS = "shared-kv-layers"  # gemma4: block_count - attention.shared_kv_layers


class Indexer(StrEnum):
    """An extra per-token cache of indexer keys (sparse attention), one head of attention.indexer.key_length."""

    DSA = "dsa"  # every trunk layer; K-only when the model is MLA, else a V of value_length too
    DSA_TYPES = "dsa-types"  # glm-dsa: trunk layers marked by attention.indexer.types (default by context_length)
    QSA = "qsa"  # qwen4exp: every trunk attention layer, K-only
    KPOOL = "kpool"  # glm5-next: trunk attention layers marked by indexer.types, K x 3 with indexer.kpool > 0
    TOP_K = "top-k"  # hy_v4: only with attention.indexer.top_k > 0, on layers marked by indexer.types
    MSA = "msa"  # minimax-m3: layers from leading_dense_block_count on, K and a V of value_length


class LayerCount(StrEnum):
    """How many layers the cache spans, where it is not block_count."""

    STANDARD = "standard"
    ROUTER = "router"  # graniteswitch: one more single-head layer at the end, cached
    LOOPS = "loops"  # nanbeige: block_count x num_loops logical layers, each with its own cache


SSM_KEYS = (K.SSM_CONV_KERNEL, K.SSM_INNER_SIZE, K.SSM_STATE_SIZE, K.SSM_TIME_STEP_RANK, K.SSM_GROUP_COUNT)
MAMBA1_SSM_KEYS = SSM_KEYS[:4]  # src/models/jamba.cpp, mamba.cpp read no ssm.group_count
MLA_KEYS = (K.KEY_LENGTH_MLA, K.VALUE_LENGTH_MLA)
KDA_KEYS = (K.SSM_CONV_KERNEL, K.KDA_HEAD_DIM)
_QWEN_MTP_UNCONVERTED = ("nextn.embed_tokens.weight", "nextn.shared_head_head.weight")
NO_LAYOUT_TAIL = "bench, verify, fit, roofline and twin answer with llama.cpp's own numbers, measured"


@dataclass(frozen=True)
class Architecture:
    name: str  # general.architecture, as LLM_ARCH_NAMES spells it (src/llama-arch.cpp)
    layout: LayoutRule = LayoutRule.PLAIN
    # keys llama.cpp requires that size or place the cache; keys it needs only for the weights (norm
    # epsilons, rope sections, expert widths) are left to the twin writer
    required_keys: tuple[str, ...] = ()
    swa: SwaRule = SwaRule.NONE
    swa_pattern: int | None = None  # load_swa_pattern's default period N (layer i SWA iff i % N < N - 1); None:
    #                                 the bool array attention.sliding_window_pattern is required (get_arr)
    swa_dense_first: bool = False  # set_swa_pattern(N, dense_first): layer i SWA iff i % N != 0
    swa_window_default: int = 0  # n_swa when attention.sliding_window is absent
    swa_window_fixed: int = 0  # n_swa whatever attention.sliding_window says
    swa_only_with_layers: int = 0  # SWA only when n_layer() equals this (exaone4: the 64-layer 32B)
    mla: bool = False  # reads key_length_mla / value_length_mla: K-only cache when both are set
    kv_sharing: KvSharing = KvSharing.NONE
    recurrent_state: RecurrentState | None = None  # None: no recurrent layers
    recurrent_interval: int = 4  # INTERVAL: the default full_attention_interval
    nextn_cached: bool = False  # the main cache holds the NextN/MTP layers too (no il < n_layer() filter)
    indexer: Indexer | None = None
    layer_count: LayerCount = LayerCount.STANDARD
    ple: bool = False  # qwen4exp: a PLE conv row beside the recurrent state on the layer in ple.layers
    no_rule: str = ""  # NO_RULE: why llamabench cannot express this architecture's cache
    expert_ffn_key: str | None = None  # the key that sizes routed experts' FFN width; None: no experts
    # tensors the loader creates as optional (TENSOR_NOT_REQUIRED) that llama.cpp's converter never writes for this
    # architecture, by their name within a layer: a twin leaves them out, as a converted file does
    unconverted: tuple[str, ...] = ()

    @property
    def has_rule(self) -> bool:
        return self.layout is not LayoutRule.NO_RULE

    @property
    def rs_rollback(self) -> bool:
        """Keeps 1 + n_rs_seq state rows per sequence (elsewhere llama.cpp resets n_rs_seq to 0)."""
        return self.name in RS_ROLLBACK_ARCHS

    @property
    def exceptions(self) -> tuple[str, ...]:
        """The fields where this row departs from the generic rule."""
        skip = ("name", "required_keys", "expert_ffn_key", "no_rule")
        return tuple(f.name for f in dataclasses.fields(self)
                     if f.name not in skip and getattr(self, f.name) != f.default)


_SSM = RecurrentState.SSM
_KDA = RecurrentState.KDA
_EXP_FF = K.EXPERT_FEED_FORWARD_LENGTH  # n_ff_exp (falling back to n_ff / n_expert_used where the family allows)
_FF = K.FEED_FORWARD_LENGTH  # experts shaped {n_embd, n_ff, n_expert}
_WIN = (K.SLIDING_WINDOW,)
_ARR = (K.SLIDING_WINDOW, K.SLIDING_WINDOW_PATTERN)
A, L = Architecture, LayoutRule

# the generic rule, nothing else: every layer attends, widths from the standard keys
_PLAIN = (
    "apertus", "arcee", "arctic", "baichuan", "bailingmoe", "bailingmoe2", "bitnet", "bloom", "chameleon",
    "chatglm", "codeshell", "cogvlm", "command-r", "dbrx", "deci", "deepseek", "deepseek2-ocr", "dots1", "ernie4_5",
    "ernie4_5-moe", "exaone", "falcon", "gemma", "glm4", "glm4moe", "gpt2", "gptneox", "granite", "granitemoe",
    "grok", "grovemoe", "hunyuan-dense", "hunyuan-moe", "hunyuan_vl", "hy_v3", "internlm2", "jais", "jais2",
    "maincoder", "minicpm", "minimax-m2", "mistral3", "mpt", "nemotron", "olmo", "olmoe", "openelm", "orion",
    "paddleocr", "pangu-embedded", "phi2", "phimoe", "plamo", "pockettts", "qwen", "qwen2vl", "qwen3tts", "qwen3vl",
    "qwen3vlmoe", "refact", "seed_oss", "smollm3", "stablelm", "starcoder", "starcoder2", "talkie", "xverse",
    # M/hrm-text.cpp:21-23: block_count is already the expanded slot count (asserted)
    "hrm_text",
    # M/minicpm3.cpp:3-12, M/plm.cpp:3-11: read kv_lora_rank only, never the MLA keys: full per-head K and V
    "minicpm3", "plm",
    # M/t5.cpp:12-13: the cache has block_count layers (decoder_block_count only sizes the decoder graph)
    "t5",
    # not in the no-cache list of create_memory (src/llama-model.cpp:2358-2374): a plain cache is allocated
    # although the encoder graph (M/t5encoder.cpp) and llama-embed's (M/llama.cpp:113-119) never use it
    "t5encoder", "llama-embed",
)

_ROWS = (
    # src/models/llama.cpp: MoE variants (Mixtral) shape experts by n_ff
    A("llama", expert_ffn_key=_FF),
    A("qwen2"),
    # an EAGLE3 draft head (-md with --spec-type draft-eagle3): one decoder layer caching K and V as the generic
    # rule says (M/eagle3.cpp:81-101, build_attn_inp_kv 200); its context is made against its target's (ctx_other,
    # src/llama-context.cpp:156-163)
    A("eagle3"),
    # src/models/qwen2moe.cpp: n_ff_exp ? n_ff_exp : n_ff / n_expert_used; shared expert n_ff_shexp ? : n_ff
    A("qwen2moe", expert_ffn_key=_EXP_FF),
    A("qwen3"),
    A("qwen3moe", expert_ffn_key=_EXP_FF),
    *(A(name) for name in _PLAIN),
    # M/phi3.cpp:13-24: a sliding_window > 0 is read, then swa_type NONE and set_swa_pattern(1): never SWA
    A("phi3", swa=SwaRule.NONE),

    # --- sliding-window attention: load_swa_pattern (src/llama-model.cpp:3434-3441) takes a bool array, else a
    # scalar period replacing the row's default; set_swa_pattern (src/llama-hparams.cpp:8-22) marks NextN
    # layers non-SWA. Two caches (llama_kv_cache_iswa, src/llama-kv-cache-iswa.cpp:34-106).
    # M/gemma3.cpp:4-11: SWA only when sliding_window > 0, then load_swa_pattern(ml, 6)
    A("gemma3", swa=SwaRule.IF_WINDOW, swa_pattern=6),
    # M/openai-moe.cpp:6-9: sliding_window required, load_swa_pattern(ml, 2)
    A("gpt-oss", required_keys=_WIN, swa=SwaRule.ALWAYS, swa_pattern=2,
      expert_ffn_key=_EXP_FF),
    # M/gemma2.cpp:4-12: n_swa = 4096 unless sliding_window is set; load_swa_pattern(ml, 2)
    A("gemma2", swa=SwaRule.ALWAYS, swa_pattern=2, swa_window_default=4096),
    # M/cohere2.cpp:4-11, M/muse-glimmer.cpp:5-13: load_swa_pattern(ml, 4); sliding_window required
    A("cohere2", required_keys=_WIN, swa=SwaRule.ALWAYS, swa_pattern=4),
    A("muse-glimmer", required_keys=_WIN, swa=SwaRule.ALWAYS, swa_pattern=4),
    # M/exaone-moe.cpp:4-11: n_swa 128 then sliding_window (required) overwrites it; load_swa_pattern(ml, 4)
    A("exaone-moe", required_keys=_WIN, swa=SwaRule.ALWAYS, swa_pattern=4),
    # M/cohere2moe.cpp:13,27-28: load_swa_pattern(ml, 4, dense_first = true): layers 0, 4, 8... full
    A("cohere2moe", required_keys=_WIN, swa=SwaRule.ALWAYS, swa_pattern=4, swa_dense_first=True),
    # array-only patterns: ml.get_arr(sliding_window_pattern) is required, a scalar is refused
    # (M/gemma4.cpp:6, M/granite-swa.cpp:17, M/maple.cpp:10, M/mimo2.cpp:12, M/step35.cpp:26, M/spark2-5.cpp:8)
    A("granite_swa", required_keys=_ARR, swa=SwaRule.ALWAYS),
    A("maple", required_keys=_ARR, swa=SwaRule.ALWAYS),
    A("mimo2", required_keys=_ARR, swa=SwaRule.ALWAYS),
    A("step35", required_keys=_ARR, swa=SwaRule.ALWAYS),
    A("spark2_5", required_keys=_ARR, swa=SwaRule.ALWAYS),
    # M/gemma4.cpp:6-20: array pattern; SWA layers' heads from key_length_swa / value_length_swa (required);
    # KV sharing: n_layer_kv_from_start = n_layer_all - shared_kv_layers (line 11); a later layer reads layer
    # n_layer_kv_from_start - 2 if SWA, else - 1 (src/llama-model.cpp:2780-2790)
    A("gemma4", required_keys=(*_ARR, K.KEY_LENGTH_SWA, K.VALUE_LENGTH_SWA), swa=SwaRule.ALWAYS,
      kv_sharing=KvSharing.SHARED_KV_LAYERS),
    # M/gemma3n.cpp:4-11: load_swa_pattern(ml, 5); n_layer_kv_from_start = 20 hard-coded (line 7): layers
    # 20.. own no cache (src/llama-hparams.cpp:321-332) and read layer 18 if SWA, else 19 (llama-model.cpp:2780-2790)
    A("gemma3n", required_keys=_WIN, swa=SwaRule.ALWAYS, swa_pattern=5, kv_sharing=KvSharing.FIRST_20),
    # SWA only when sliding_window > 0, then load_swa_pattern(ml, 4) (M/afmoe.cpp:11-17, M/mellum.cpp:6-11,
    # M/olmo2.cpp:6-9), period 8 (M/plamo3.cpp:5-9), dense_first (M/laguna.cpp:34-39)
    A("afmoe", swa=SwaRule.IF_WINDOW, swa_pattern=4),
    A("mellum", swa=SwaRule.IF_WINDOW, swa_pattern=4),
    A("olmo2", swa=SwaRule.IF_WINDOW, swa_pattern=4),
    A("plamo3", swa=SwaRule.IF_WINDOW, swa_pattern=8),
    A("laguna", swa=SwaRule.IF_WINDOW, swa_pattern=4, swa_dense_first=True),
    # M/smallthinker.cpp:4-9: with sliding_window > 0, n_swa = 4096 whatever the key says; dense_first period 4
    A("smallthinker", swa=SwaRule.IF_WINDOW, swa_pattern=4, swa_dense_first=True, swa_window_fixed=4096),
    # M/llama4.cpp:8-19: chunked attention with n_swa = 8192 unless sliding_window is present and 0; period 4
    A("llama4", swa=SwaRule.UNLESS_ZERO, swa_pattern=4, swa_window_fixed=8192),
    # M/exaone4.cpp:4-14: SWA (n_swa 4096, period 4) only when n_layer() == 64; sliding_window overrides n_swa
    A("exaone4", swa=SwaRule.ALWAYS, swa_pattern=4, swa_window_default=4096, swa_only_with_layers=64),

    # --- MLA: is_mla() iff key_length_mla and value_length_mla are both set (src/llama-hparams.cpp:298-303); then
    # the cache has no V tensor (src/llama-kv-cache.cpp:163,230-234) and K is key_length x head_count_kv.
    # M/deepseek2.cpp:16-17 reads them optionally (older GGUFs: full per-head K and V); mistral4 inherits it
    A("deepseek2", required_keys=(K.KV_LORA_RANK,), mla=True, expert_ffn_key=_EXP_FF),
    A("mistral4", mla=True),
    # llama_kv_cache_dsa (src/llama-model.cpp:2397-2449, src/llama-kv-cache-dsa.cpp:38-53): trunk layers only,
    # plus an indexer cache of attention.indexer.key_length, 1 head (M/deepseek32.cpp:21-28, M/glm-dsa.cpp:43-66)
    A("deepseek32", required_keys=(K.INDEXER_KEY_LENGTH,), mla=True, indexer=Indexer.DSA),
    A("glm-dsa", required_keys=(K.INDEXER_KEY_LENGTH,), mla=True, indexer=Indexer.DSA_TYPES),
    # M/hy-v4.cpp:29-62: MLA asserted; an indexer cache only with indexer.top_k > 0; no NextN filter
    # (src/llama-model.cpp:2494-2535)
    A("hy_v4", required_keys=MLA_KEYS, mla=True, indexer=Indexer.TOP_K, nextn_cached=True),
    # llama_kv_cache_msa (src/llama-model.cpp:2375-2396, src/llama-kv-cache-msa.cpp:39-49): no NextN filter;
    # indexer on layers >= leading_dense_block_count with K of indexer.key_length and (not MLA) a V of value_length
    A("minimax-m3", required_keys=(K.INDEXER_KEY_LENGTH,), indexer=Indexer.MSA, nextn_cached=True),
    # M/granite-switch.cpp:55-68: a router layer at index n_layer() (1 head, K and V) and n_layer_nextn = 1;
    # router_layer >= 0 turns the NextN filter off (src/llama-model.cpp:2796-2798), so it is cached
    A("graniteswitch", layer_count=LayerCount.ROUTER),
    # M/nanbeige.cpp:6-32: num_loops (default 1) repeats the layers; every logical layer has its own cache
    A("nanbeige", layer_count=LayerCount.LOOPS),

    # --- recurrent only (llm_arch_is_recurrent; llama_memory_recurrent over il < n_layer(),
    # src/llama-memory-recurrent.cpp:29,77). RWKV widths: src/llama-hparams.cpp:209-212,237-240
    A("mamba2", L.RECURRENT, required_keys=SSM_KEYS, recurrent_state=_SSM),
    A("mamba", L.RECURRENT, required_keys=MAMBA1_SSM_KEYS, recurrent_state=RecurrentState.MAMBA1),
    *(A(name, L.RECURRENT, required_keys=(K.WKV_HEAD_SIZE,), recurrent_state=RecurrentState.RWKV)
      for name in ("rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7")),

    # --- hybrids (llm_arch_is_hybrid). The default attention filter of llama_memory_hybrid is !is_recr over
    # all n_layer_all layers (src/llama-memory-hybrid.cpp:48-50): NextN layers ARE in the main cache, unless
    # create_memory passes il < n_layer() filters (qwen3next/qwen35/qwen4exp/minimax-01, 2698-2704; glm5-next)
    # conversion/qwen.py _QwenMtpMixin maps mtp.fc, the MTP norms and layers to the NextN block and never writes an
    # embed_tokens or a shared head: the MTP layer reuses the trunk's (src/models/qwen35moe.cpp:136-137, optional)
    A("qwen35", L.INTERVAL, required_keys=SSM_KEYS, recurrent_state=_SSM, unconverted=_QWEN_MTP_UNCONVERTED),
    A("qwen35moe", L.INTERVAL, required_keys=SSM_KEYS, recurrent_state=_SSM, expert_ffn_key=_EXP_FF,
      unconverted=_QWEN_MTP_UNCONVERTED),
    A("qwen3next", L.INTERVAL, required_keys=SSM_KEYS, recurrent_state=_SSM, expert_ffn_key=_EXP_FF,
      unconverted=_QWEN_MTP_UNCONVERTED),
    # M/qwen4exp.cpp:36-64,131-145: llama_memory_hybrid_idx (src/llama-model.cpp:2706-2711,2734-2755): an indexer
    # K cache on the trunk attention layers; a PLE conv row on the ple.layers layer (llama-memory-recurrent.cpp:109-114)
    A("qwen4exp", L.INTERVAL, required_keys=(*SSM_KEYS, K.INDEXER_KEY_LENGTH, K.HYPER_CONNECTION_COUNT),
      recurrent_state=_SSM, indexer=Indexer.QSA, ple=True),
    # M/minimax-01.cpp:9-17: full_attention_interval defaults to 8, not 4; lightning state key_length^2 x n_head
    # (n_embd_head_la = key_length, src/llama-hparams.cpp:249-254)
    A("minimax-01", L.INTERVAL, recurrent_state=RecurrentState.LIGHTNING, recurrent_interval=8),
    # recurrent iff head_count_kv[il] == 0 on trunk layers (M/granite-hybrid.cpp:22-25, M/jamba.cpp:11-13,
    # M/plamo2.cpp:18-20, M/lfm2.cpp:11-13, M/lfm2moe.cpp:12-14); default hybrid filter: NextN layers cached
    A("granitehybrid", L.KV_ZERO, required_keys=SSM_KEYS, recurrent_state=_SSM, nextn_cached=True,
      expert_ffn_key=_FF),
    A("jamba", L.KV_ZERO, required_keys=MAMBA1_SSM_KEYS, recurrent_state=RecurrentState.MAMBA1, nextn_cached=True,
      expert_ffn_key=_FF),
    A("plamo2", L.KV_ZERO, required_keys=SSM_KEYS, recurrent_state=_SSM, nextn_cached=True),
    # M/lfm2.cpp:26-31: sliding_window > 0 makes every attention layer SWA (llama_memory_hybrid_iswa)
    A("lfm2", L.KV_ZERO, required_keys=(K.SHORTCONV_L_CACHE,), swa=SwaRule.ATTENTION,
      recurrent_state=RecurrentState.SHORTCONV, nextn_cached=True),
    A("lfm2moe", L.KV_ZERO, required_keys=(K.SHORTCONV_L_CACHE,), recurrent_state=RecurrentState.SHORTCONV,
      nextn_cached=True),
    # KDA + MLA hybrids: MLA keys required (M/kimi-linear.cpp:6-10, M/kimi-k3.cpp:18-23, M/bailingmoe3.cpp:8-13),
    # KDA widths (src/llama-hparams.cpp:219-224,242-247); default hybrid filter: NextN layers cached
    A("kimi-linear", L.KV_ZERO, required_keys=(*MLA_KEYS, *KDA_KEYS), mla=True, recurrent_state=_KDA,
      nextn_cached=True),
    A("kimi-k3", L.KV_ZERO, required_keys=(*MLA_KEYS, *KDA_KEYS), mla=True, recurrent_state=_KDA, nextn_cached=True),
    A("bailingmoe3", L.KV_ZERO, required_keys=(*MLA_KEYS, *KDA_KEYS), mla=True, recurrent_state=_KDA,
      nextn_cached=True),
    # M/glm5-next.cpp:10-47: KDA + MLA, its own create_memory case with il < n_layer() filters
    # (src/llama-model.cpp:2450-2493); indexer K cache x 3 with indexer.kpool (llama-memory-hybrid-idx.cpp:57)
    A("glm5-next", L.KV_ZERO, required_keys=(*MLA_KEYS, *KDA_KEYS, K.INDEXER_KEY_LENGTH, K.INDEXER_KPOOL), mla=True,
      recurrent_state=_KDA, indexer=Indexer.KPOOL),
    # M/nemotron-h.cpp:14-16 and src/llama-model.cpp:2691-2697: head_count_kv and feed_forward_length per layer;
    # the attention filter has no il < n_layer() check (NextN layers with ff 0 are cached)
    A("nemotron_h", L.NEMOTRON_H, required_keys=SSM_KEYS, recurrent_state=_SSM, nextn_cached=True),
    # src/models/nemotron-h.cpp (shared with nemotron_h_moe): n_ff_exp(i) ? : n_ff(i) / n_expert_used(i)
    A("nemotron_h_moe", L.NEMOTRON_H, required_keys=SSM_KEYS, recurrent_state=_SSM, nextn_cached=True,
      expert_ffn_key=_EXP_FF),
    # M/falcon-h1.cpp:14 and src/llama-model.cpp:2688-2690: both filters true on every layer
    A("falcon-h1", L.PARALLEL, required_keys=SSM_KEYS, recurrent_state=_SSM, nextn_cached=True),

    # --- no cache at all: create_memory returns nullptr (src/llama-model.cpp:2358-2374)
    *(A(name, L.NO_CACHE) for name in sorted(NO_CACHE_ARCHS)),

    # --- caches llamabench cannot express: llama.cpp's own numbers only
    A("deepseek4", L.NO_RULE, no_rule="compressed CSA/HCA caches and f32 compressor states sized by "
      "compress_ratios (llama_kv_cache_dsv4, src/llama-kv-cache-dsv4.cpp:1210-1336)"),
    A("dots3note", L.NO_RULE, no_rule="MLA with SWA layers of their own MLA width and an indexer cache "
      "(llama_kv_cache_dsa_iswa, src/llama-kv-cache-dsa-iswa.cpp:14-76)"),
    A("gemma4-assistant", L.NO_RULE, no_rule="a draft head that shares its target context's cache "
      "(ctx_other, src/llama-model.cpp:2809-2836): it allocates none of its own"),
    A("dflash", L.NO_RULE, no_rule="a draft head whose cache depends on its target (ctx_other) and, with "
      "hyper-connections, on DSpark keys (src/models/dflash.cpp:7-106, src/llama-model.cpp:2630-2654)"),
    A("clip", L.NO_RULE, no_rule="a projector stub for llama-quantize, not a text decoder "
      "(src/llama-model.cpp:1316-1318, src/models/clip.cpp:6-8)"),
    A("gptj", L.NO_RULE, no_rule="a name without a model class in this llama.cpp "
      "(src/llama-model.cpp:349-350)"),
)

ARCHITECTURES: dict[str, Architecture] = {row.name: row for row in _ROWS}
assert len(ARCHITECTURES) == len(_ROWS), "an architecture has two rows"
SUPPORTED: tuple[str, ...] = tuple(sorted(name for name, row in ARCHITECTURES.items() if row.has_rule))
NO_RULE: tuple[str, ...] = tuple(sorted(name for name, row in ARCHITECTURES.items() if not row.has_rule))


def lookup(arch: str) -> Architecture | None:
    """The row of `arch` if llamabench has a layout rule for it, else None (never raises): for callers that can
    go on with llama.cpp's own numbers."""
    row = ARCHITECTURES.get(arch)
    return row if row is not None and row.has_rule else None


def no_rule_reason(arch: str) -> str:
    """Why `arch` has no layout rule (a row's reason, or that the table does not name it)."""
    row = ARCHITECTURES.get(arch)
    if row is not None:
        return row.no_rule
    return "not an architecture of the llama.cpp llamabench follows (llama-cpp-python 0.3.36)"


def no_rule_line(arch: str) -> str:
    """One line for an architecture without a layout rule."""
    return f"architecture '{arch}': no layout rule in llamabench ({no_rule_reason(arch)}); {NO_LAYOUT_TAIL}"


def get(arch: str, source: str = "") -> Architecture:
    """The row of `arch`, for a caller that needs its layout rule; an UnsupportedArchitecture naming `source` (a
    path or catalog id) where there is none."""
    row = lookup(arch)
    if row is None:
        where = f"{source}: " if source else ""
        raise UnsupportedArchitecture(where + no_rule_line(arch))
    return row


def describe(row: Architecture) -> str:
    """The row's rule in a few words (the README's table)."""
    if not row.has_rule:
        return f"no layout rule: {row.no_rule}"
    if row.layout is LayoutRule.NO_CACHE:
        return "no cache (create_memory returns nullptr)"
    parts = [_LAYOUT_WORDS[row.layout].format(interval=row.recurrent_interval)]
    if row.recurrent_state is not None:
        parts.append(_STATE_WORDS[row.recurrent_state])
    if row.swa is not SwaRule.NONE:
        parts.append(_swa_words(row))
    if row.mla:
        parts.append("MLA K-only" + ("" if set(MLA_KEYS) <= set(row.required_keys) else " with the MLA keys"))
    if row.kv_sharing is not KvSharing.NONE:
        parts.append("KV sharing: " + ("first 20 layers own a cache" if row.kv_sharing is KvSharing.FIRST_20
                                       else "last shared_kv_layers layers reuse earlier caches"))
    if row.indexer is not None:
        parts.append(f"{row.indexer.upper()} indexer cache")
    if row.ple:
        parts.append("PLE conv row")
    if row.layer_count is not LayerCount.STANDARD:
        parts.append("router layer cached" if row.layer_count is LayerCount.ROUTER else "num_loops layers")
    if row.nextn_cached:
        parts.append("NextN layers cached")
    return "; ".join(parts)


_STATE_WORDS = {
    RecurrentState.SSM: "Mamba2-style SSM state",
    RecurrentState.MAMBA1: "Mamba SSM state (no groups)",
    RecurrentState.SHORTCONV: "short-conv state",
    RecurrentState.RWKV: "RWKV state",
    RecurrentState.KDA: "KDA state",
    RecurrentState.LIGHTNING: "lightning-attention state",
}
_LAYOUT_WORDS = {
    LayoutRule.PLAIN: "attention",
    LayoutRule.INTERVAL: "hybrid: attention every full_attention_interval (default {interval}) layers",
    LayoutRule.KV_ZERO: "hybrid: recurrent where head_count_kv is 0",
    LayoutRule.NEMOTRON_H: "hybrid: head_count_kv and feed_forward_length per layer",
    LayoutRule.RECURRENT: "recurrent only",
    LayoutRule.PARALLEL: "hybrid: attention and SSM in every layer",
}


def _swa_words(row: Architecture) -> str:
    when = {SwaRule.ALWAYS: "", SwaRule.IF_WINDOW: " when sliding_window > 0",
            SwaRule.UNLESS_ZERO: " unless sliding_window is 0",
            SwaRule.ATTENTION: ": every attention layer when sliding_window > 0"}[row.swa]
    if row.swa is SwaRule.ATTENTION:
        return "SWA" + when
    pattern = "array pattern" if row.swa_pattern is None else f"period {row.swa_pattern}"
    if row.swa_dense_first:
        pattern += " dense-first"
    window = (f", window {row.swa_window_fixed}" if row.swa_window_fixed else
              f", window default {row.swa_window_default}" if row.swa_window_default else "")
    only = f", only with {row.swa_only_with_layers} layers" if row.swa_only_with_layers else ""
    return f"SWA {pattern}{when}{window}{only}"
