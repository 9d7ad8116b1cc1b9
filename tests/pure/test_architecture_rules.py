"""The architecture table against llama.cpp's source, its rules one case each, and the README's list.

1. Where llama.cpp's choices can be read from its source (the vendored llama.cpp of llama-cpp-python 0.3.36, in the
   sdist cached by the llama tools), they are: the table names exactly LLM_ARCH_NAMES; the recurrent / hybrid /
   diffusion / rs-rollback lists equal llm_arch_is_* and llm_arch_supports_rs_rollback; the no-cache rows equal
   create_memory's nullptr cases; and every row's SWA period, array-only pattern, fixed or default window, MLA
   keys, indexer, recurrent-state branch, KV sharing, extra layers and required keys match what its
   load_arch_hparams reads. Skipped, with the reason, where the source is not on this machine.
2. CASES: metadata -> the caches llama.cpp allocates, at least one row per exception of the table. Expected values
   are written as the formulas of /tmp/arch_research/rules.md (bytes = layers x cells x row width x 2 for f16;
   recurrent state f32 x rows); the same metadata through /tmp/arch_research/predict_reference.py (which matched
   llama.cpp's logged sizes on 141 architectures) gave the same numbers.
3. The README's "Supported architectures" section is generated from the table:
   `.venv/bin/python -m tests.pure.test_architecture_rules --write-readme` rewrites it; a test checks it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest

from llamabench.core import serial
from llamabench.core.errors import BadModelFile, UnsupportedArchitecture
from llamabench.memory.footprint import compute_footprint, per_layer_bytes
from llamabench.memory.inspection import Inspection, inspect
from llamabench.model import architectures as archs
from llamabench.model import gguf_keys as K
from llamabench.model.architectures import ARCHITECTURES, KvSharing, LayerCount, LayoutRule, RecurrentState, SwaRule
from llamabench.model.geometry import LayerKind
from llamabench.model.layout import geometry_from_metadata
from llamabench.settings.params import Params
from tests.support.metadata import model

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "architectures.md"
BEGIN, END = "<!-- architectures: begin (generated) -->", "<!-- architectures: end -->"
VENDOR = Path(os.environ.get("LLAMA_CPP_SRC", Path.home() / ".cache/llama-tools/0.3.36/llama_cpp_python-0.3.36/"
                                                            "vendor/llama.cpp"))


# 1. the table against llama.cpp's source ------------------------------------------------------------------------

def _source(path: str) -> str:
    file = VENDOR / path
    if not file.is_file():
        pytest.skip(f"llama.cpp's source is not on this machine ({file}); it comes with the cached sdist of "
                    "llama-cpp-python 0.3.36 (scripts/install_llama_cpp.sh), or set LLAMA_CPP_SRC")
    return file.read_text()


@lru_cache(maxsize=1)
def _enum_names() -> dict[str, str]:
    """LLM_ARCH_* -> name, from LLM_ARCH_NAMES (src/llama-arch.cpp)."""
    text = _source("src/llama-arch.cpp")
    block = text[text.index("LLM_ARCH_NAMES = {"):]
    block = block[: block.index("};")]
    return {e: n for e, n in re.findall(r'\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}', block) if e != "LLM_ARCH_UNKNOWN"}


def _switch_true(text: str, head: str) -> set[str]:
    """The `case LLM_ARCH_X:` labels before the first `return true;` of the function starting at `head`."""
    body = text[text.index(head):]
    body = body[: body.index("return true;")]
    return {_enum_names()[e] for e in re.findall(r"case (LLM_ARCH_\w+):", body)}


@lru_cache(maxsize=1)
def _hparams_bodies() -> dict[str, str]:
    """Architecture name -> the text of its load_arch_hparams (its class's, or the class it inherits from)."""
    mapping = dict(re.findall(r"case (LLM_ARCH_\w+):\s*return new (llama_model_\w+)\(",
                              _source("src/llama-model.cpp")))
    parents = dict(re.findall(r"struct (llama_model_\w+)\s*:\s*public (llama_model_\w+)",
                              _source("src/models/models.h")))
    bodies = {}
    for path in sorted((VENDOR / "src/models").glob("*.cpp")):
        for cls, body in re.findall(r"void (llama_model_\w+)::load_arch_hparams\(llama_model_loader & ml\) \{\n"
                                    r"(.*?)\n\}\n", path.read_text(), re.S):
            bodies[cls] = body
    out = {}
    for enum, cls in mapping.items():
        while cls not in bodies and cls in parents:
            cls = parents[cls]
        out[_enum_names()[enum]] = bodies.get(cls, "")
    return out


@lru_cache(maxsize=1)
def _kv_enums() -> dict[str, str]:
    """GGUF key suffix -> its LLM_KV_* name (LLM_KV_NAMES, src/llama-arch.cpp)."""
    text = _source("src/llama-arch.cpp")
    return {suffix: enum for enum, suffix in re.findall(r'\{\s*(LLM_KV_\w+),\s*"%s\.([^"]+)"\s*\}', text)}


def _required_in(body: str, suffix: str) -> bool:
    """Whether load_arch_hparams reads `{arch}.suffix` as required (get_key / get_arr without `false`)."""
    enum = _kv_enums()[suffix]
    calls = re.findall(rf"ml\.get_(?:key|arr|key_or_arr)\(\s*{enum}\s*,([^;]*)\)\s*;", body)
    return any(not re.search(r",\s*(false|/\*\s*required\s*\*/\s*false)\s*$", args.strip()) for args in calls)


def _reads(body: str, suffix: str) -> bool:
    return re.search(rf"\b{_kv_enums()[suffix]}\b", body) is not None


RULED = sorted(n for n, row in ARCHITECTURES.items() if row.has_rule and row.layout is not LayoutRule.NO_CACHE)
# keys that size or place a cache: a row must list each of them that its load_arch_hparams requires
CACHE_KEYS = (K.SLIDING_WINDOW, K.SLIDING_WINDOW_PATTERN, K.KEY_LENGTH_MLA, K.VALUE_LENGTH_MLA, K.KDA_HEAD_DIM,
              K.WKV_HEAD_SIZE, K.SHORTCONV_L_CACHE, K.SSM_CONV_KERNEL, K.SSM_INNER_SIZE, K.SSM_STATE_SIZE,
              K.SSM_GROUP_COUNT, K.INDEXER_KEY_LENGTH, K.KEY_LENGTH_SWA, K.VALUE_LENGTH_SWA)


def test_table_names_every_architecture_of_llama_cpp():
    assert set(ARCHITECTURES) == set(_enum_names().values())


def test_cited_lists_equal_llama_cpp():
    text = _source("src/llama-arch.cpp")
    assert archs.RECURRENT_ARCHS == _switch_true(text, "bool llm_arch_is_recurrent(")
    assert archs.HYBRID_ARCHS == _switch_true(text, "bool llm_arch_is_hybrid(")
    assert archs.DIFFUSION_ARCHS == _switch_true(text, "bool llm_arch_is_diffusion(")
    assert archs.RS_ROLLBACK_ARCHS == _switch_true(text, "bool llm_arch_supports_rs_rollback(")
    create = _source("src/llama-model.cpp")
    create = create[create.index("llama_model::create_memory("):]
    nullptr = create[: create.index("res = nullptr;")]
    assert archs.NO_CACHE_ARCHS == {_enum_names()[e] for e in re.findall(r"case (LLM_ARCH_\w+):", nullptr)}


def test_table_follows_the_cited_lists():
    rows = ARCHITECTURES.values()
    assert {r.name for r in rows if r.layout is LayoutRule.RECURRENT} == archs.RECURRENT_ARCHS
    hybrid = (LayoutRule.INTERVAL, LayoutRule.KV_ZERO, LayoutRule.NEMOTRON_H, LayoutRule.PARALLEL)
    assert {r.name for r in rows if r.layout in hybrid} == archs.HYBRID_ARCHS - set(archs.NO_RULE)
    assert {r.name for r in rows if r.layout is LayoutRule.NO_CACHE} == archs.NO_CACHE_ARCHS
    assert {r.name for r in rows if r.rs_rollback} == archs.RS_ROLLBACK_ARCHS


@pytest.mark.parametrize("arch", RULED)
def test_row_matches_its_load_arch_hparams(arch):
    body, row = _hparams_bodies()[arch], ARCHITECTURES[arch]
    period = re.search(r"load_swa_pattern\(ml, (\d+)(, (?:/\*[^*]*\*/)?\s*true)?\)", body)
    assert (int(period[1]) if period else None, bool(period and period[2])) == \
        (row.swa_pattern, row.swa_dense_first), "load_swa_pattern's default period"
    array_only = "get_arr(LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN" in body
    assert array_only == (row.swa in (SwaRule.ALWAYS,) and row.swa_pattern is None), "array-only pattern"
    sets_swa = re.search(r"swa_type\s*=\s*LLAMA_SWA_TYPE_(STANDARD|CHUNKED)", body) is not None
    assert sets_swa == (row.swa is not SwaRule.NONE), "sliding-window layers"
    assert _window(body) == (row.swa_window_default, row.swa_window_fixed), "n_swa set in load_arch_hparams"
    assert _reads(body, K.KEY_LENGTH_MLA) == row.mla, "reads the MLA keys"
    assert _reads(body, K.INDEXER_KEY_LENGTH) == (row.indexer is not None), "an indexer"
    state = {K.WKV_HEAD_SIZE: RecurrentState.RWKV, K.KDA_HEAD_DIM: RecurrentState.KDA,
             K.SHORTCONV_L_CACHE: RecurrentState.SHORTCONV}
    for suffix, kind in state.items():
        assert _reads(body, suffix) == (row.recurrent_state is kind), f"reads {suffix}"
    assert ("n_embd_head_la" in body) == (row.recurrent_state is RecurrentState.LIGHTNING)
    assert ("n_layer_kv_from_start" in body) == (row.kv_sharing is not KvSharing.NONE), "KV sharing"
    assert ("router_layer" in body) == (row.layer_count is LayerCount.ROUTER)
    assert _reads(body, K.NUM_LOOPS) == (row.layer_count is LayerCount.LOOPS)
    interval = re.search(r"full_attn_interval = (\d+);", body)
    assert (int(interval[1]) if interval else None) == \
        (row.recurrent_interval if row.layout is LayoutRule.INTERVAL else None), "default full_attention_interval"
    recurrent = {
        LayoutRule.KV_ZERO: r"is_recr_impl\[\w+\] = hparams\.n_head_kv\(\w+\) == 0;",
        LayoutRule.NEMOTRON_H: r"hparams\.n_head_kv\(\w+\) == 0 && hparams\.n_ff\(\w+\) == 0",
        LayoutRule.INTERVAL: r"get_key_or_arr\(LLM_KV_ATTENTION_RECURRENT_LAYERS",
        LayoutRule.PARALLEL: r"std::fill\(hparams\.is_recr_impl\.begin\(\), hparams\.is_recr_impl\.end\(\), true\)",
    }
    for layout, pattern in recurrent.items():
        assert (re.search(pattern, body) is not None) == (row.layout is layout), f"the {layout} rule"
    for suffix in row.required_keys:
        assert _required_in(body, suffix), f"{suffix} is required by llama.cpp"
    for suffix in CACHE_KEYS:
        if _required_in(body, suffix):
            assert suffix in row.required_keys, f"llama.cpp requires {suffix}"


def _window(body: str) -> tuple[int, int]:
    """(default, fixed) n_swa: an assignment before an optional get_key of sliding_window is a default, one after
    the key is read overrides it."""
    read = re.search(r"get_key\(LLM_KV_ATTENTION_SLIDING_WINDOW,\s*hparams\.n_swa(,\s*false)?\)", body)
    default = fixed = 0
    for m in re.finditer(r"hparams\.n_swa\s*=\s*(\d+);", body):
        if read and m.start() > read.start():
            fixed = int(m[1])
        elif not read or read[1]:
            default = int(m[1])
    return default, fixed


# 2. one case per exception ----------------------------------------------------------------------------------------

def _arr(n: int, f) -> tuple:
    return tuple(f(il) for il in range(n))


def _k(*parts: dict, **more) -> dict:
    """Metadata suffixes: the parts merged in order, then `more` (later ones win)."""
    out: dict = {}
    for part in parts:
        out |= part
    return out | more


# dense attention: n_embd 1024, 8 heads, 2 KV heads of 128 -> K = V = 256 elements per layer, 1024 B of f16 K+V
DENSE = dict(block_count=8, context_length=131072, embedding_length=1024, attention__head_count=8,
             attention__head_count_kv=2, attention__key_length=128, attention__value_length=128)
ROW = 1024  # f16 K+V bytes per cell of one DENSE layer
SSM = dict(ssm__conv_kernel=4, ssm__inner_size=2048, ssm__state_size=128, ssm__time_step_rank=16, ssm__group_count=2)
SSM_STATE = 3 * (2048 + 2 * 2 * 128) * 4 + 128 * 2048 * 4  # (R + S) bytes of one SSM layer, one sequence
MLA = dict(attention__head_count_kv=1, attention__key_length=576, attention__value_length=512,
           attention__key_length_mla=192, attention__value_length_mla=128, attention__kv_lora_rank=512)
KDA = dict(ssm__conv_kernel=4, kda__head_dim=128)
KDA_STATE = (3 * 3 * 8 * 128 + 128 * 128 * 8) * 4  # R = 3 x (4 - 1) x n_head 8 x 128, S = 128^2 x 8; f32
P4K = Params(n_ctx=4096)  # 4096 cells; SWA cells pad256(min(4096, window + n_ubatch 512))
P8K = Params(n_ctx=8192)
P16K = Params(n_ctx=16384)

# (id, arch, keys, params, expected, why). Expected: kv = non-SWA K+V bytes, swa = SWA K+V bytes, index = indexer
# K+V bytes, state = recurrent bytes (R + S + P, f32), layers = (non-SWA, SWA, indexer, recurrent) layer counts.
CASES = [
    ("plain", "llama", DENSE, P4K,
     dict(kv=8 * 4096 * ROW, swa=0, layers=(8, 0, 0, 0)), "the generic rule: every layer's K and V, standard keys"),
    ("period-dense-first", "cohere2moe", _k(DENSE, attention__sliding_window=1024), P4K,
     dict(kv=2 * 4096 * ROW, swa=6 * 1536 * ROW, layers=(2, 6, 0, 0), swa_cells=1536),
     "load_swa_pattern(4, dense_first): layers 0 and 4 full; SWA cells pad256(1024 + 512)"),
    ("scalar-period-replaces-default", "cohere2", _k(DENSE, attention__sliding_window=1024,
                                                       attention__sliding_window_pattern=2), P4K,
     dict(kv=4 * 4096 * ROW, swa=4 * 1536 * ROW), "a scalar sliding_window_pattern replaces the row's period 4"),
    ("window-default", "gemma2", DENSE, P8K,
     dict(kv=4 * 8192 * ROW, swa=4 * 4608 * ROW, swa_cells=4608),
     "gemma2: no sliding_window key means 4096 (even layers SWA); cells pad256(4096 + 512)"),
    ("array-only", "step35", _k(DENSE, attention__sliding_window=1024,
                                  attention__sliding_window_pattern=_arr(8, lambda il: il % 3 != 2)), P4K,
     dict(kv=2 * 4096 * ROW, swa=6 * 1536 * ROW), "the bool array alone decides (layers 2 and 5 full)"),
    ("if-window-off", "gemma3", DENSE, P4K, dict(kv=8 * 4096 * ROW, swa=0),
     "gemma3 without sliding_window: one plain cache"),
    ("llama4-fixed-window", "llama4", _k(DENSE, attention__sliding_window=1000), P16K,
     dict(kv=2 * 16384 * ROW, swa=6 * 8704 * ROW, swa_cells=8704),
     "llama4: n_swa 8192 whatever the key says (cells pad256(8192 + 512)); 3 chunked, 1 full"),
    ("llama4-window-zero", "llama4", _k(DENSE, attention__sliding_window=0), P16K,
     dict(kv=8 * 16384 * ROW, swa=0), "llama4: sliding_window present and 0 turns chunking off"),
    ("smallthinker-fixed-window", "smallthinker", _k(DENSE, attention__sliding_window=100), P8K,
     dict(kv=2 * 8192 * ROW, swa=6 * 4608 * ROW), "smallthinker: any window > 0 becomes 4096, dense-first period 4"),
    ("exaone4-64-layers", "exaone4", _k(DENSE, block_count=64), P8K,
     dict(kv=16 * 8192 * ROW, swa=48 * 4608 * ROW), "exaone4: SWA (4096, period 4) only with 64 layers"),
    ("exaone4-32-layers", "exaone4", _k(DENSE, block_count=32, attention__sliding_window=512), P8K,
     dict(kv=32 * 8192 * ROW, swa=0), "exaone4: any other layer count has no SWA, whatever the key"),
    ("phi3-never-swa", "phi3", _k(DENSE, attention__sliding_window=2047), P4K,
     dict(kv=8 * 4096 * ROW, swa=0), "phi3 reads sliding_window and drops it"),
    ("gemma3n-first-20", "gemma3n", _k(DENSE, block_count=25, attention__sliding_window=512), P4K,
     dict(kv=4 * 4096 * ROW, swa=16 * 1024 * ROW, layers=(4, 16, 0, 0)),
     "gemma3n: layers 20-24 own no cache (read 18 / 19); of 0-19, 4 full (4, 9, 14, 19) and 16 SWA"),
    ("gemma4-shared-kv-fa-off", "gemma4",
     _k(DENSE, block_count=6, attention__sliding_window=512, attention__shared_kv_layers=2,
          attention__key_length=256, attention__value_length=256, attention__key_length_swa=128,
          attention__value_length_swa=128, attention__sliding_window_pattern=(True, True, False, True, True, False)),
     Params(n_ctx=4096, flash_attn=False),
     dict(kv=4096 * (512 + 512) * 2, swa=3 * 1024 * (256 + 512) * 2, layers=(1, 3, 0, 0)),
     "gemma4: layers 4-5 shared; SWA layers' own head sizes; FA off pads every V row to the widest (512)"),
    ("mla-keys", "mistral4", _k(DENSE, MLA), P4K,
     dict(kv=8 * 4096 * 576 * 2, swa=0), "mistral4 reads the MLA keys: one K-only row of key_length x 1 head"),
    ("mla-keys-ignored", "minicpm3", _k(DENSE, MLA, attention__head_count_kv=8), P4K,
     dict(kv=8 * 4096 * 8 * (576 + 512) * 2), "minicpm3 never reads the MLA keys: full per-head K and V"),
    ("rwkv", "rwkv6", _k(block_count=4, context_length=4096, embedding_length=512, wkv__head_size=64), P4K,
     dict(kv=0, state=4 * (2 * 512 + 512 * 64) * 4, layers=(0, 0, 0, 4)),
     "RWKV: R = token_shift_count (2) x n_embd, S = n_embd x wkv.head_size"),
    ("rwkv-token-shift", "arwkv7", _k(block_count=4, context_length=4096, embedding_length=512, wkv__head_size=64,
                                        token_shift_count=1), P4K,
     dict(state=4 * (512 + 512 * 64) * 4), "token_shift_count 1 halves R"),
    ("mamba1-no-groups", "mamba", _k(SSM, block_count=2, context_length=4096, embedding_length=1024), P4K,
     dict(state=2 * (3 * 2048 + 128 * 2048) * 4), "mamba reads no ssm.group_count: R = (d_conv - 1) x d_inner"),
    ("kda-mla", "kimi-linear", _k(DENSE, MLA, KDA, block_count=4,
                                    attention__head_count_kv=(1, 0, 0, 1)), P4K,
     dict(kv=2 * 4096 * 576 * 2, state=2 * KDA_STATE, layers=(2, 0, 0, 2)),
     "KDA layers where head_count_kv is 0: R 3 x (d_conv - 1) x n_head x kda.head_dim, S kda.head_dim^2 x n_head"),
    ("kda-conv-zero", "bailingmoe3", _k(DENSE, MLA, block_count=2, ssm__conv_kernel=0, kda__head_dim=128,
                                          attention__head_count_kv=(1, 0)), P4K,
     dict(state=KDA_STATE), "ssm.conv_kernel 0 counts as 4 (3 conv rows) in the KDA width"),
    ("lightning", "minimax-01", _k(DENSE, block_count=16, attention__head_count=64, attention__head_count_kv=8),
     P4K, dict(kv=2 * 4096 * 8 * 128 * 2 * 2, state=14 * 128 * 128 * 64 * 4, layers=(2, 0, 0, 14)),
     "MiniMax-01: every 8th layer attends (default interval 8); lightning S = key_length^2 x n_head, no R"),
    ("shortconv-swa", "lfm2", _k(DENSE, block_count=4, attention__head_count_kv=(0, 2, 0, 2),
                                   attention__sliding_window=512, shortconv__l_cache=3), P4K,
     dict(kv=0, swa=2 * 1024 * ROW, state=2 * 1024 * 2 * 4, layers=(0, 2, 0, 2)),
     "lfm2 with sliding_window > 0: every attention layer is SWA; short conv R = n_embd x (l_cache - 1)"),
    ("hybrid-nextn-cached", "granitehybrid",
     _k(DENSE, SSM, block_count=4, nextn_predict_layers=1, attention__head_count_kv=(0, 2, 0, 2)), P4K,
     dict(kv=2 * 4096 * ROW, state=2 * SSM_STATE, layers=(2, 0, 0, 2)),
     "the default hybrid filter is !is_recr over all layers: the NextN layer 3 is in the main cache"),
    ("hybrid-nextn-filtered", "qwen35", _k(DENSE, SSM, block_count=5, nextn_predict_layers=1), P4K,
     dict(kv=1 * 4096 * ROW, state=3 * SSM_STATE, layers=(1, 0, 0, 3)),
     "qwen35's filters stop at n_layer(): only layer 3 attends, the NextN layer 4 is left to the MTP context"),
    ("generic-nextn-filtered", "llama", _k(DENSE, nextn_predict_layers=2), P4K,
     dict(kv=6 * 4096 * ROW), "the generic path caches n_layer() layers only"),
    ("nemotron-nextn", "nemotron_h", _k(DENSE, SSM, block_count=4, nextn_predict_layers=1,
                                          attention__head_count_kv=(0, 2, 0, 2), feed_forward_length=(0, 0, 64, 0)),
     P4K, dict(kv=2 * 4096 * ROW, state=1 * SSM_STATE, layers=(2, 0, 0, 1)),
     "nemotron_h: attention iff ff 0 with no il < n_layer() check, so the NextN layer 3 is cached; layer 2 FFN-only"),
    ("interval-array", "qwen3next", _k(DENSE, SSM, block_count=4,
                                         attention__recurrent_layers=(True, False, True, False)), P4K,
     dict(kv=2 * 4096 * ROW, state=2 * SSM_STATE), "recurrent_layers wins over full_attention_interval"),
    ("dsa-indexer", "deepseek32", _k(DENSE, MLA, block_count=4, attention__indexer__key_length=128), P4K,
     dict(kv=4 * 4096 * 576 * 2, index=4 * 4096 * 128 * 2, layers=(4, 0, 4, 0)),
     "DSA: a K-only indexer row of indexer.key_length on every trunk layer"),
    ("dsa-indexer-not-mla", "deepseek32", _k(DENSE, block_count=4, attention__indexer__key_length=128), P4K,
     dict(kv=4 * 4096 * ROW, index=4 * 4096 * (128 + 128) * 2),
     "without the MLA keys the indexer cache keeps a V of value_length x 1 head too"),
    ("glm-dsa-long-context", "glm-dsa", _k(DENSE, MLA, block_count=10, context_length=1048576,
                                             attention__indexer__key_length=128), P4K,
     dict(index=4 * 4096 * 128 * 2, layers=(10, 0, 4, 0)),
     "glm-dsa at context_length >= 1048576: GLM 5.2's default types, indexers on layers 0, 1, 2, 6"),
    ("glm-dsa-types", "glm-dsa", _k(DENSE, MLA, block_count=4, attention__indexer__key_length=128,
                                      attention__indexer__types=(1, 0, 0, 1)), P4K,
     dict(index=2 * 4096 * 128 * 2), "attention.indexer.types marks the indexer layers"),
    ("kpool-indexer", "glm5-next", _k(DENSE, MLA, KDA, block_count=4, attention__head_count_kv=(1, 0, 1, 1),
                                        attention__indexer__key_length=128, attention__indexer__kpool=4,
                                        attention__indexer__types=(1, 1, 0, 1)), P4K,
     dict(kv=3 * 4096 * 576 * 2, index=2 * 4096 * 3 * 128 * 2, state=KDA_STATE, layers=(3, 0, 2, 1)),
     "glm5-next: indexer on attention layers of indexer.types, key, gate and pool (x 3) with indexer.kpool"),
    ("qsa-ple", "qwen4exp", _k(DENSE, SSM, block_count=4, full_attention_interval=2,
                                 attention__indexer__key_length=128, hyper_connection__count=4, ple__layers=(0,),
                                 ple__ngram_size=3, ple__conv_kernel=4), P4K,
     dict(kv=2 * 4096 * ROW, index=2 * 4096 * 128 * 2, state=2 * SSM_STATE + 3 * 3 * 4 * 1024 * 4),
     "qwen4exp: K-only indexer on attention layers; a PLE row (conv - 1) x ngram x hc x n_embd on layer 0"),
    ("top-k-indexer", "hy_v4", _k(DENSE, MLA, block_count=4, nextn_predict_layers=1,
                                    attention__indexer__key_length=128, attention__indexer__top_k=64,
                                    attention__indexer__types=(1, 0, 1)), P4K,
     dict(kv=4 * 4096 * 576 * 2, index=2 * 4096 * 128 * 2, layers=(4, 0, 2, 0)),
     "hy_v4: no NextN filter (4 layers cached); indexer only with top_k > 0, on the layers of indexer.types"),
    ("top-k-zero", "hy_v4", _k(DENSE, MLA, block_count=4, attention__indexer__key_length=128,
                                 attention__indexer__top_k=0), P4K,
     dict(index=0, layers=(4, 0, 0, 0)), "hy_v4 with top_k 0: a plain cache, no indexer"),
    ("msa-indexer-fa-off", "minimax-m3", _k(DENSE, block_count=4, leading_dense_block_count=1,
                                              attention__indexer__key_length=64), Params(n_ctx=4096, flash_attn=False),
     dict(kv=4 * 4096 * ROW, index=3 * 4096 * (64 + 128) * 2, layers=(4, 0, 3, 0)),
     "MSA: indexer from leading_dense_block_count on, K of key_length and (not MLA) V of value_length x 1"),
    ("router-layer", "graniteswitch", DENSE, Params(n_ctx=4096, flash_attn=False),
     dict(kv=8 * 4096 * ROW + 4096 * (128 + 256) * 2, layers=(9, 0, 0, 0)),
     "graniteswitch caches a 1-head router layer; FA off pads its V to the widest (256)"),
    ("loops", "nanbeige", _k(DENSE, block_count=4, num_loops=3), P4K,
     dict(kv=12 * 4096 * ROW, layers=(12, 0, 0, 0)), "nanbeige: block_count x num_loops logical layers, each cached"),
    ("no-cache", "bert", DENSE, P4K, dict(kv=0, swa=0, state=0, layers=(0, 0, 0, 0)),
     "encoders: create_memory returns nullptr"),
    ("no-cache-diffusion", "llada", DENSE, P4K, dict(kv=0, layers=(0, 0, 0, 0)), "diffusion LMs: no cache"),
]


def _caches(fp) -> dict:
    return dict(kv=fp.k_bytes + fp.v_bytes, swa=fp.swa_kv_bytes, index=fp.index_kv_bytes,
                state=fp.recurrent_state_bytes, swa_cells=fp.shape.swa_cells,
                layers=(fp.n_kv_layers, fp.n_swa_layers, fp.n_index_layers, fp.n_recurrent_layers))


@pytest.mark.parametrize("case_id, arch, keys, params, expected, why", CASES, ids=[c[0] for c in CASES])
def test_rule(case_id, arch, keys, params, expected, why):
    fp = compute_footprint(geometry_from_metadata(model(arch, **keys)), params)
    got = _caches(fp)
    assert {k: got[k] for k in expected} == expected, f"{case_id}: {why}"
    assert fp.kv_bytes == got["kv"] + got["swa"] + got["index"]


def test_every_exception_has_a_case():
    """Each field a row can set apart from the generic rule is exercised by at least one case."""
    covered = {field for _, arch, *_ in CASES for field in ARCHITECTURES[arch].exceptions}
    exceptions = {field for row in ARCHITECTURES.values() if row.has_rule for field in row.exceptions}
    assert exceptions <= covered, exceptions - covered


def test_per_layer_bytes_sum_to_the_footprint():
    for case_id, arch, keys, params, _, _ in CASES:
        geometry = geometry_from_metadata(model(arch, **keys))
        fp, table = compute_footprint(geometry, params), per_layer_bytes(geometry, params)
        assert sum(kv for kv, _ in table.values()) == fp.kv_bytes, case_id
        assert sum(rec for _, rec in table.values()) == fp.recurrent_state_bytes, case_id


def test_shared_layers_read_the_last_owned_ones():
    keys = _k(DENSE, block_count=25, attention__sliding_window=512)
    layers = geometry_from_metadata(model("gemma3n", **keys)).layers
    assert [(layer.index, layer.kv_from) for layer in layers if layer.kind is LayerKind.SHARED] == \
        [(20, 18), (21, 18), (22, 18), (23, 18), (24, 19)]


@pytest.mark.parametrize("arch, keys, needle", [
    ("step35", _k(DENSE, attention__sliding_window=512, attention__sliding_window_pattern=2),
     "must be a per-layer array"),
    ("gpt-oss", DENSE, "missing required key gpt-oss.attention.sliding_window"),
    ("kimi-linear", _k(DENSE, KDA), "missing required key kimi-linear.attention.key_length_mla"),
    ("rwkv7", _k(block_count=2, context_length=4096, embedding_length=64), "missing required key rwkv7.wkv.head_size"),
    ("qwen4exp", _k(DENSE, SSM, attention__indexer__key_length=64, hyper_connection__count=4, ple__layers=(0, 1)),
     "exactly one layer"),
    ("hy_v4", _k(DENSE, MLA, attention__indexer__key_length=128, attention__indexer__top_k=8,
                   attention__indexer__types=(0,) * 8), "must mark layer 0"),
    ("gemma4", _k(DENSE, attention__sliding_window=512, attention__shared_kv_layers=7,
                    attention__key_length_swa=128, attention__value_length_swa=128,
                    attention__sliding_window_pattern=(True,) * 8), "at least 2 layers own a cache"),
])
def test_refusals_name_the_key(arch, keys, needle):
    """What llama.cpp refuses (or asserts on), refused in one line naming why."""
    with pytest.raises(BadModelFile, match=re.escape(needle)):
        geometry_from_metadata(model(arch, **keys))


@pytest.mark.parametrize("arch", ["deepseek4", "dots3note", "gemma4-assistant", "dflash", "clip", "gptj",
                                  "an-architecture-from-2027"])
def test_no_layout_rule_is_one_line(arch):
    assert archs.lookup(arch) is None
    with pytest.raises(UnsupportedArchitecture) as exc:
        inspect(model(arch, **DENSE), Params())
    line = str(exc.value)
    assert "\n" not in line and exc.value.hint is None
    assert line.startswith(f"test:{arch}: architecture '{arch}': no layout rule in llamabench (")
    assert line.endswith("); " + archs.NO_LAYOUT_TAIL)


def test_old_records_still_load():
    """Records written before the new fields (KV sharing, indexer, PLE) read back with their defaults."""
    ins = inspect(model("qwen3", **DENSE), P4K)
    data = serial.to_dict(ins)
    for layer in data["geometry"]["layers"]:
        for new in ("kv_from", "index_k_width", "index_v_width", "p_width"):
            del layer[new]
    del data["geometry"]["index_v_width_max"]
    for new in ("index_k_bytes", "index_v_bytes", "n_index_layers", "recurrent_p_bytes"):
        del data["footprint"][new]
    assert serial.from_dict(Inspection, data) == ins
    assert replace(ins.footprint, index_k_bytes=0) == ins.footprint


# 3. the README's list -------------------------------------------------------------------------------------------

def docs_section() -> str:
    """docs/architectures.md's table, from the table: every architecture and its rule."""
    ruled = [row for row in ARCHITECTURES.values() if row.has_rule]
    lines = [BEGIN, "",
             f"{len(ruled)} of the {len(ARCHITECTURES)} architectures of the vendored llama.cpp (`LLM_ARCH_NAMES`) "
             "have a layout rule: `inspect` computes their caches from the GGUF's metadata. The rule of each is its "
             "row in `llamabench/model/architectures.py`; \"attention\" alone is the generic rule (every layer caches "
             "K and V from the standard keys, NextN layers left to the MTP context).", "",
             "| architecture | rule |", "|---|---|"]
    lines += [f"| `{row.name}` | {archs.describe(row)} |" for row in sorted(ruled, key=lambda r: r.name)]
    lines += ["", "No layout rule (`inspect` says so in one line; `bench`, `verify`, `fit`, `roofline` and `twin` "
              "answer with llama.cpp's own numbers, measured by its dry runs; so for any architecture the table "
              "does not name):", "",
              "| architecture | why |", "|---|---|"]
    lines += [f"| `{name}` | {ARCHITECTURES[name].no_rule} |" for name in archs.NO_RULE]
    return "\n".join([*lines, "", END])


def readme_section() -> str:
    """The README's architecture list, from the table: the names, wrapped; the rules are in docs/architectures.md."""
    ruled = sorted(row.name for row in ARCHITECTURES.values() if row.has_rule)
    words = [f"`{name}`," for name in ruled]
    words[-1] = words[-1].rstrip(",") + "."
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > 118:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    head = (f"{len(ruled)} of the {len(ARCHITECTURES)} architectures of the vendored llama.cpp have a layout rule "
            "(each one's rule: [docs/architectures.md](docs/architectures.md)):")
    tail = (f"No rule yet ({', '.join(archs.NO_RULE)}), or one the table does not name: `inspect` says so in one "
            "line, and `bench`, `verify`, `fit`, `roofline` and `twin` answer with llama.cpp's own numbers, measured.")
    return "\n".join([BEGIN, "", head, "", *lines, "", tail, "", END])


def _readme_part(text: str) -> str:
    if BEGIN not in text or END not in text:
        return ""
    return text[text.index(BEGIN): text.index(END) + len(END)]


def test_readme_lists_the_table():
    assert _readme_part(README.read_text()) == readme_section(), \
        "regenerate: .venv/bin/python -m tests.pure.test_architecture_rules --write-readme"
    assert _readme_part(DOCS.read_text()) == docs_section(), \
        "regenerate: .venv/bin/python -m tests.pure.test_architecture_rules --write-readme"


if __name__ == "__main__" and sys.argv[1:] == ["--write-readme"]:
    text = README.read_text()
    README.write_text(text.replace(_readme_part(text), readme_section()))
    DOCS.write_text("# Supported architectures\n\n" + docs_section() + "\n")
