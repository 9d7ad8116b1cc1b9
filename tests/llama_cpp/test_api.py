"""The library as a user calls it: `import llamabench as lb`, MODEL and llama.cpp's parameter names."""

from __future__ import annotations

import pytest

import llamabench as lb
from llamabench.core.errors import UsageError
from llamabench.memory.placement import PlacementKind

MIB = 2**20


def test_inspect_a_catalog_id():
    assert lb.inspect("qwen3-5-35b-a3b", n_ctx=32768).kv_bytes_per_token == 20480
    assert lb.inspect("qwen3-5-35b-a3b", n_ctx="128k").kv_bytes == 2560 * MIB  # 2.50 GiB of growing KV at 128k
    assert lb.inspect("qwen3-30b-a3b", n_ctx=131072).kv_bytes == 12 * 1024 * MIB  # 98,304 B/token: 12.0 GiB


def test_values_are_parsed_by_the_one_schema():
    a = lb.inspect("qwen3-5-35b-a3b", n_ctx="32k", type_k="Q8_0", flash_attn="on")
    b = lb.inspect("qwen3-5-35b-a3b", n_ctx=32768, type_k="q8_0", flash_attn=True)
    assert a.footprint == b.footprint and a.footprint.params.type_k == "q8_0"


@pytest.mark.parametrize("kwargs, needle", [
    ({"n_ctxx": 4096}, "unknown parameter: n_ctxx"),
    ({"n_ctx": "lots"}, "n_ctx: 'lots' is not a token count"),
    ({"n_ctx": [4096, 8192]}, "n_ctx: takes one value here"),
    ({"type_k": "q3_k"}, "unknown cache type"),
    ({"n_ctx": 2**32}, "uint32"),
])
def test_bad_parameters_are_usage_errors(kwargs, needle):
    with pytest.raises(UsageError, match=needle):
        lb.inspect("qwen3-5-35b-a3b", **kwargs)


def test_a_bench_plan_expands_lists_and_ranges():
    plan = lb.bench("qwen3-30b-a3b", n_ctx="4k,8k", type_k=["f16", "q8_0"], type_v="q8_0", n_depth="0-2048+1024",
                    n_prompt=16, n_gen=2, dry_run=True)
    assert [(p.n_ctx, p.type_k) for p in plan.configurations] == [(4096, "f16"), (4096, "q8_0"), (8192, "f16"),
                                                                  (8192, "q8_0")]
    assert [t.name for t in plan.tests] == ["pp16", "tg2", "pp16 @ d1024", "tg2 @ d1024", "pp16 @ d2048",
                                            "tg2 @ d2048"]
    assert plan.records == () and lb.BenchRun.from_dict(plan.to_dict()) == plan


@pytest.mark.slow
def test_the_plain_usage_on_a_real_gguf(gemma):
    assert lb.inspect(str(gemma), n_ctx=32768).kv_bytes_per_token == 3 * 1 * 256 * 2 * 2  # 3 full layers; SWA is capped
    weights = lb.fit(str(gemma), n_ctx=8192, vram=["4GiB"], n_gpu_layers=[99], emulate=True).rows[0].parts.weights
    assert round(weights / MIB, 2) == 235.16  # llama.cpp's model buffer for -ngl 99 (token_embd again as output)
    assert lb.verify(str(gemma), n_ctx=4096).ok


@pytest.mark.slow
def test_the_plain_usage_on_a_catalog_id():
    record = lb.fit("qwen3-5-35b-a3b", n_ctx=8192, vram=["4GiB"], n_gpu_layers=[99])
    row = record.rows[0]
    assert row.placement.kind is PlacementKind.NGL and row.placement.value == 99
    # the published Q4_K_M (19.74 GiB) less the input embeddings and the MTP layer, loaded only with draft-mtp
    assert 18 * 2**30 < row.parts.weights < 19 * 2**30
    mtp = record.fit.recommended("4GiB", 8192, "draft-mtp") or next(r for r in record.rows
                                                                   if r.settings.spec_type == "draft-mtp")
    # one MoE layer of 256 experts and its attention (0.50 GiB, as the main model's 40 share 19.74 GiB); no
    # embed_tokens or shared_head_head of its own, which Qwen3.5's converter does not write
    assert 0.4 * 2**30 < mtp.parts.weights - row.parts.weights < 0.6 * 2**30
    assert not row.fits and row.parts.kv == 20480 * 8192
    assert lb.verify("qwen3-5-35b-a3b", n_ctx=4096).ok
