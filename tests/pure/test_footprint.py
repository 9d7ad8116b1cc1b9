"""The pure footprint math, one row per case; each row says why it matters.

Expected values are hand-computed from the llama.cpp formulas (LLAMA_CPP_NOTES.md) and, where
marked, were seen in llama.cpp's own `llama_kv_cache: size` lines on a twin.
"""

from __future__ import annotations

import pytest

from llamabench.memory.footprint import compute_footprint, context_shape
from llamabench.model.geometry import LayerKind
from llamabench.model.layout import geometry_from_metadata
from llamabench.settings.params import Params
from tests.support.metadata import model

MIB = 2**20

QWEN35MOE = dict(
    block_count=40, context_length=262144, embedding_length=2048, attention__head_count=16,
    attention__head_count_kv=2, attention__key_length=256, attention__value_length=256,
    full_attention_interval=4, ssm__conv_kernel=4, ssm__state_size=128, ssm__group_count=16,
    ssm__time_step_rank=32, ssm__inner_size=4096,
)
QWEN3MOE = dict(block_count=48, context_length=40960, embedding_length=2048, attention__head_count=32,
                attention__head_count_kv=4, attention__key_length=128, attention__value_length=128)
GEMMA3_27B = dict(block_count=62, context_length=131072, embedding_length=5376, attention__head_count=32,
                  attention__head_count_kv=16, attention__key_length=128, attention__value_length=128,
                  attention__sliding_window=1024)
GPT_OSS_20B = dict(block_count=24, context_length=131072, embedding_length=2880, attention__head_count=64,
                   attention__head_count_kv=8, attention__key_length=64, attention__value_length=64,
                   attention__sliding_window=128)
GRANITE_H_SMALL = dict(block_count=40, context_length=1048576, embedding_length=4096, attention__head_count=32,
                       attention__head_count_kv=tuple(8 if i in (5, 15, 25, 35) else 0 for i in range(40)),
                       ssm__conv_kernel=4, ssm__inner_size=8192, ssm__state_size=128, ssm__time_step_rank=128,
                       ssm__group_count=1)
DEEPSEEK_V2_LITE_MLA = dict(block_count=27, context_length=163840, embedding_length=2048, attention__head_count=16,
                            attention__head_count_kv=1, attention__key_length=576, attention__value_length=512,
                            attention__key_length_mla=192, attention__value_length_mla=128,
                            attention__kv_lora_rank=512)
DEEPSEEK_V2_LITE_OLD = dict(block_count=27, context_length=163840, embedding_length=2048, attention__head_count=16,
                            attention__head_count_kv=16, attention__key_length=192, attention__value_length=128,
                            attention__kv_lora_rank=512)
LFM2_1_2B = dict(block_count=16, context_length=128000, embedding_length=2048, attention__head_count=32,
                 attention__head_count_kv=tuple(8 if i in (2, 5, 8, 10, 12, 14) else 0 for i in range(16)),
                 shortconv__l_cache=3)
MAMBA2 = dict(block_count=64, context_length=1048576, embedding_length=4096, ssm__conv_kernel=4,
              ssm__inner_size=8192, ssm__state_size=128, ssm__time_step_rank=128, ssm__group_count=8)
NEMOTRON_H = dict(block_count=6, context_length=8192, embedding_length=4096, attention__head_count=32,
                  attention__head_count_kv=(0, 0, 8, 0, 0, 0), feed_forward_length=(0, 21504, 0, 0, 21504, 0),
                  attention__key_length=128, attention__value_length=128, ssm__conv_kernel=4,
                  ssm__inner_size=8192, ssm__state_size=128, ssm__group_count=8, ssm__time_step_rank=128)
FALCON_H1 = dict(block_count=4, context_length=8192, embedding_length=1024, attention__head_count=8,
                 attention__head_count_kv=2, attention__key_length=64, attention__value_length=64,
                 ssm__conv_kernel=4, ssm__inner_size=2048, ssm__state_size=128, ssm__time_step_rank=16,
                 ssm__group_count=1)

JAMBA = dict(block_count=32, context_length=262144, embedding_length=4096, attention__head_count=32,
             attention__head_count_kv=tuple(8 if i % 8 == 4 else 0 for i in range(32)), ssm__conv_kernel=4,
             ssm__inner_size=8192, ssm__state_size=16, ssm__time_step_rank=256)
QWEN3_8B = dict(block_count=36, context_length=40960, embedding_length=4096, attention__head_count=32,
                attention__head_count_kv=8, attention__key_length=128, attention__value_length=128)

# (id, arch, keys, settings, expected {field: value}, why)
CASES = [
    ("qwen35moe-128k", "qwen35moe", QWEN35MOE, Params(n_ctx=131072),
     dict(kv_bytes_per_token=20480, full_gqa_kv_bytes_per_token=81920, reduction=4.0, kv_bytes=2_684_354_560,
          recurrent_state_bytes=65_863_680, swa_kv_bytes=0),
     "the mission's headline numbers; 2560.00 MiB KV + 62.81 MiB state seen in llama.cpp"),
    ("qwen3moe-f16", "qwen3moe", QWEN3MOE, Params(n_ctx=131072),
     dict(kv_bytes_per_token=98304, kv_bytes=12 * 1024 * MIB, reduction=1.0),
     "plain GQA control: every layer cached; 12.0 GiB at 128k"),
    ("qwen3moe-q8_0", "qwen3moe", QWEN3MOE, Params(n_ctx=131072, type_k="q8_0", type_v="q8_0"),
     dict(kv_bytes_per_token=98304 * 34 // 64), "q8_0 rows are 34 bytes per 32 elements: 34/64 of f16"),
    ("qwen3moe-q4_0-k-only", "qwen3moe", QWEN3MOE, Params(n_ctx=4096, type_k="q4_0", type_v="f16"),
     dict(kv_bytes_per_token=49152 * 18 // 64 + 49152), "K and V types are independent"),
    ("qwen35moe-q8_0", "qwen35moe", QWEN35MOE, Params(n_ctx=131072, type_k="q8_0", type_v="q8_0"),
     dict(kv_bytes_per_token=20480 * 34 // 64, recurrent_state_bytes=65_863_680),
     "recurrent state stays f32 whatever the KV type"),
    ("qwen35moe-4seq", "qwen35moe", QWEN35MOE, Params(n_ctx=131072, n_seq=4),
     dict(kv_bytes=2_684_354_560, recurrent_state_bytes=4 * 65_863_680),
     "4 streams of n_ctx/4 cells: same KV, four recurrent states"),
    ("qwen3-dense", "qwen3", QWEN3_8B, Params(n_ctx=32768),
     dict(kv_bytes_per_token=36 * 8 * 128 * 4, kv_bytes=36 * 8 * 128 * 4 * 32768), "plain dense GQA"),
    ("jamba", "jamba", JAMBA, Params(n_ctx=131072),
     dict(kv_bytes_per_token=16384, recurrent_state_bytes=28 * (3 * 8192 + 16 * 8192) * 4),
     "Mamba v1: no groups, conv state (d_conv - 1) x d_inner, SSM state d_state x d_inner"),
    ("gemma3-swa", "gemma3", GEMMA3_27B, Params(n_ctx=131072),
     dict(kv_bytes_per_token=81920, swa_kv_bytes=624 * MIB, kv_bytes=10240 * MIB + 624 * MIB),
     "10 full layers grow; 52 SWA layers hold pad256(1024 + 512) = 1536 cells"),
    ("gemma3-swa-full", "gemma3", GEMMA3_27B, Params(n_ctx=131072, swa_full=True),
     dict(swa_kv_bytes=52 * 8192 * 131072), "llama.cpp's C default swa_full=true makes SWA layers full size"),
    ("gemma3-unified-4seq", "gemma3", GEMMA3_27B, Params(n_ctx=8192, n_seq=4, kv_unified=True),
     dict(swa_kv_bytes=52 * 8192 * 4608), "unified SWA cells: pad256(min(8192, 1024 x 4 + 512)) = 4608"),
    ("gpt-oss-20b", "gpt-oss", GPT_OSS_20B, Params(n_ctx=131072),
     dict(kv_bytes_per_token=24576, kv_bytes=3072 * MIB + 18 * MIB, swa_kv_bytes=18 * MIB),
     "even layers SWA by default (pattern 2); window 128 + 512 -> 768 cells"),
    ("granite-h-small", "granitehybrid", GRANITE_H_SMALL, Params(n_ctx=131072),
     dict(kv_bytes_per_token=16384, kv_bytes=2048 * MIB, recurrent_state_bytes=36 * (3 * 8448 + 128 * 8192) * 4),
     "head_count_kv zeros mark the 36 Mamba2 layers; 147.48 MiB of state"),
    ("lfm2-1.2b", "lfm2", LFM2_1_2B, Params(n_ctx=131072),
     dict(kv_bytes_per_token=12288, recurrent_state_bytes=10 * 2048 * 2 * 4),
     "short-conv layers: R = n_embd x (l_cache - 1), S = 0"),
    ("deepseek2-mla", "deepseek2", DEEPSEEK_V2_LITE_MLA, Params(n_ctx=131072),
     dict(kv_bytes_per_token=27 * 576 * 2, kv_bytes=3888 * MIB, full_gqa_kv_bytes_per_token=27 * 16 * 320 * 2),
     "MLA caches one K-only row of kv_lora_rank + rope dims per layer"),
    ("deepseek2-no-mla-keys", "deepseek2", DEEPSEEK_V2_LITE_OLD, Params(n_ctx=131072),
     dict(kv_bytes=34560 * MIB), "older GGUFs without the MLA keys cache full per-head K and V"),
    ("mamba2", "mamba2", MAMBA2, Params(n_ctx=131072),
     dict(kv_bytes=0, kv_bytes_per_token=0, reduction=None,
          recurrent_state_bytes=64 * (3 * (8192 + 2 * 8 * 128) + 128 * 8192) * 4),
     "recurrent only: no KV at all, state independent of n_ctx"),
    ("nemotron-h", "nemotron_h", NEMOTRON_H, Params(n_ctx=8192),
     dict(kv_bytes_per_token=8 * 128 * 4, recurrent_state_bytes=3 * (3 * (8192 + 2 * 8 * 128) + 128 * 8192) * 4,
          full_gqa_kv_bytes_per_token=4 * 8 * 128 * 4),
     "FFN-only layers hold nothing and do not count in the full-GQA basis"),
    ("falcon-h1", "falcon-h1", FALCON_H1, Params(n_ctx=8192),
     dict(kv_bytes_per_token=4 * 2 * 64 * 4, recurrent_state_bytes=4 * (3 * (2048 + 256) + 128 * 2048) * 4),
     "every layer holds KV and a Mamba2 state"),
    ("rs-seq-rollback-family", "qwen35moe", QWEN35MOE, Params(n_ctx=4096, n_seq=2, n_rs_seq=3),
     dict(recurrent_state_bytes=65_863_680 * 2 * 4), "qwen35 keeps 1 + n_rs_seq state rows per sequence"),
    ("rs-seq-ignored", "mamba2", MAMBA2, Params(n_ctx=4096, n_seq=2, n_rs_seq=3),
     dict(recurrent_state_bytes=2 * 64 * (3 * (8192 + 2 * 8 * 128) + 128 * 8192) * 4),
     "llama.cpp resets n_rs_seq to 0 where llm_arch_supports_rs_rollback is false"),
    ("fa-off-pads-v", "qwen3moe", QWEN3MOE, Params(n_ctx=4096, flash_attn=False),
     dict(kv_bytes_per_token=98304), "uniform V widths: transposed V needs no padding"),
]


@pytest.mark.parametrize("case_id, arch, keys, settings, expected, why", CASES, ids=[c[0] for c in CASES])
def test_footprint(case_id, arch, keys, settings, expected, why):
    fp = compute_footprint(geometry_from_metadata(model(arch, **keys)), settings)
    actual = {
        "kv_bytes_per_token": fp.kv_bytes_per_token,
        "full_gqa_kv_bytes_per_token": fp.full_gqa_kv_bytes_per_token,
        "reduction": fp.reduction,
        "kv_bytes": fp.kv_bytes,
        "swa_kv_bytes": fp.swa_kv_bytes,
        "recurrent_state_bytes": fp.recurrent_state_bytes,
    }
    for key, value in expected.items():
        assert actual[key] == value, f"{case_id} {key}: {why}"


# (requested n_ctx, n_seq, unified, expected n_ctx, n_ctx_seq, why)
SHAPES = [
    (132107, 1, False, 132352, 132352, "n_ctx is padded up to a multiple of 256"),
    (131072, 4, False, 131072, 32768, "one stream per sequence of n_ctx / n_seq cells"),
    (5000, 4, False, 5120, 1280, "5000 -> 5120, / 4 = 1280 per stream"),
    (5000, 3, False, 5376, 1792, "pad256(5120 / 3 = 1706) = 1792 cells x 3 streams"),
    (5000, 4, True, 5120, 5120, "unified: one stream holds all cells"),
]


@pytest.mark.parametrize("n_ctx, n_seq, unified, want_ctx, want_seq, why", SHAPES)
def test_context_shape(n_ctx, n_seq, unified, want_ctx, want_seq, why):
    geometry = geometry_from_metadata(model("qwen3moe", **QWEN3MOE))
    shape = context_shape(geometry, Params(n_ctx=n_ctx, n_seq=n_seq, kv_unified=unified))
    assert (shape.n_ctx, shape.n_ctx_seq) == (want_ctx, want_seq), why


def test_qwen35_layer_indices():
    geometry = geometry_from_metadata(model("qwen35moe", **QWEN35MOE))
    full = [layer.index for layer in geometry.layers if layer.kind is LayerKind.FULL]
    assert full == list(range(3, 40, 4))


def test_qwen35_recurrent_layers_array_wins_over_interval():
    flags = tuple(i % 2 == 0 for i in range(40))  # even layers recurrent, odd layers attention
    geometry = geometry_from_metadata(model("qwen35", **QWEN35MOE, attention__recurrent_layers=flags))
    assert [layer.index for layer in geometry.cached_layers] == list(range(1, 40, 2))


def test_qwen3next_interval_key():
    keys = dict(QWEN35MOE, block_count=48, full_attention_interval=6)
    geometry = geometry_from_metadata(model("qwen3next", **keys))
    assert [layer.index for layer in geometry.cached_layers] == list(range(5, 48, 6))


def test_gemma3_pattern_array_equals_scalar():
    scalar = geometry_from_metadata(model("gemma3", **GEMMA3_27B, attention__sliding_window_pattern=6))
    array = geometry_from_metadata(
        model("gemma3", **GEMMA3_27B, attention__sliding_window_pattern=tuple(i % 6 < 5 for i in range(62)))
    )
    assert scalar.layers == array.layers
    assert sum(not layer.is_swa for layer in scalar.layers) == 10


def test_gemma3_without_window_has_no_swa():
    keys = {k: v for k, v in GEMMA3_27B.items() if k != "attention__sliding_window"}
    geometry = geometry_from_metadata(model("gemma3", **keys))
    assert not geometry.has_swa


def test_fa_off_pads_v_to_widest_layer():
    # SWA layers with a smaller V head: transposed V rows are padded to the widest layer
    keys = dict(GEMMA3_27B, attention__value_length_swa=64, attention__key_length_swa=64)
    geometry = geometry_from_metadata(model("gemma3", **keys))
    on = compute_footprint(geometry, Params(n_ctx=4096))
    off = compute_footprint(geometry, Params(n_ctx=4096, flash_attn=False))
    assert on.swa_kv_bytes == 52 * 16 * (64 + 64) * 2 * 1536
    assert off.swa_kv_bytes == 52 * 16 * (64 + 128) * 2 * 1536


def test_gpt_oss_pattern_array_form():
    # an explicit bool array overrides the default period 2 (here: every 3rd layer full)
    flags = tuple(i % 3 != 2 for i in range(24))
    geometry = geometry_from_metadata(model("gpt-oss", **GPT_OSS_20B, attention__sliding_window_pattern=flags))
    assert [layer.index for layer in geometry.layers if not layer.is_swa] == list(range(2, 24, 3))
    default = geometry_from_metadata(model("gpt-oss", **GPT_OSS_20B))
    assert [layer.index for layer in default.layers if not layer.is_swa] == list(range(1, 24, 2))
