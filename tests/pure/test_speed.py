"""Bytes and FLOPs per decoded token, and the two-ceiling speed model. Pure: hand-computed values."""

from __future__ import annotations

import pytest

from llamabench.memory.speed import TokenCost, active_weight_bytes, calibrate, card, model_for_card, token_cost
from llamabench.model.layout import geometry_from_metadata
from llamabench.model.metadata import TensorInfo
from llamabench.model.weights import breakdown
from llamabench.settings.params import Params
from tests.support.metadata import model

# Gemma 3 270M's cache geometry: 18 layers, 1 KV head x 256, SWA window 512 on 15 layers (5:1)
GEMMA = geometry_from_metadata(model("gemma3", block_count=18, context_length=32768, embedding_length=640,
                                     attention__head_count=4, attention__head_count_kv=1, attention__key_length=256,
                                     attention__value_length=256, attention__sliding_window=512))


@pytest.mark.parametrize("depth", [0, 100, 512, 8192])
def test_kv_read_per_token(depth):
    cost = token_cost(GEMMA, Params(), 1000, depth)
    # 3 full layers read d cells, 15 SWA layers min(d, 512); 1 x 256 x 2 (K, V) x 2 bytes = 1,024 B per cell
    assert cost.kv_bytes == 3 * 1024 * depth + 15 * 1024 * min(depth, 512)
    assert cost.weights_bytes == 1000 and cost.recurrent_bytes == 0
    assert cost.attention_flops == 4 * 4 * 256 * (3 * depth + 15 * min(depth, 512))  # 4 x n_head x head_dim per cell


def test_full_gqa_counterfactual_reads_every_layer_at_depth():
    gqa = token_cost(GEMMA, Params(), 1000, 8192, as_full_gqa=True)
    assert gqa.kv_bytes == 18 * 1024 * 8192


def test_recurrent_state_is_read_and_written():
    hybrid = geometry_from_metadata(model("qwen35moe", block_count=4, context_length=4096, embedding_length=64,
                                          attention__head_count=2, attention__head_count_kv=1,
                                          attention__key_length=64, attention__value_length=64,
                                          full_attention_interval=4, ssm__conv_kernel=4, ssm__state_size=16,
                                          ssm__group_count=1, ssm__time_step_rank=2, ssm__inner_size=32))
    cost = token_cost(hybrid, Params(), 0, 0)
    state = ((4 - 1) * (32 + 2 * 16) + 16 * 32) * 4  # (R + S) x f32 per layer
    assert cost.recurrent_bytes == 2 * 3 * state


def test_routed_experts_count_by_their_used_share():
    tensors = (TensorInfo("token_embd.weight", (8, 8), 0, 999), TensorInfo("output.weight", (8, 8), 0, 100),
               TensorInfo("blk.0.attn_q.weight", (8, 8), 0, 50),
               TensorInfo("blk.0.ffn_up_exps.weight", (8, 8, 8), 0, 800),
               TensorInfo("blk.0.ffn_up_shexp.weight", (8, 8), 0, 30))
    weights = breakdown(tensors, 1, set(), basis="test")
    # the embedding lookup is left out; 2 of 8 experts: a quarter of the routed bytes
    assert active_weight_bytes(weights, 2, 8) == 100 + 50 + 800 // 4 + 30


def test_calibration_reproduces_both_depths_and_predicts_between():
    a, b = TokenCost(0, 200_000_000, 0, 0, 0), TokenCost(16384, 200_000_000, 50_000_000, 0, 2_000_000_000)
    m = calibrate(a, 50.0, b, 30.0)
    assert m.tokens_per_second(a) == pytest.approx(50.0) and m.tokens_per_second(b) == pytest.approx(30.0)
    assert m.bandwidth == pytest.approx(200_000_000 * 50.0)
    mid = TokenCost(8192, 200_000_000, 25_000_000, 0, 1_000_000_000)
    assert 30.0 < m.tokens_per_second(mid) < 50.0


def test_card_figures_scale_by_their_efficiencies():
    m = model_for_card(card("rtx-4090"), bandwidth_efficiency=0.5, compute_efficiency=1.0)
    assert m.bandwidth == 504e9 and m.compute == 82.6e12
    with pytest.raises(Exception, match="unknown card"):
        card("rtx-9999")


# prefill (TTFT) -------------------------------------------------------------------------------------------------
def test_ttft_reproduces_the_published_pp512_it_is_calibrated_on_and_holds_out_the_deeper_runs():
    """roofline -d on the catalog's Llama 3.1 8B: a 4090's TTFT at 512 is its published pp512 (7138.99 t/s); the
    same source's deeper prompts, not used, within 12% (pp4096 5265.68, pp8192 4039.68; the 3090's 3169.91 and
    2527.40 on its own pp512)."""
    import llamabench as lb

    published = {"rtx-4090": {512: 7138.99, 4096: 5265.68, 8192: 4039.68},
                 "rtx-3090": {512: 4030.40, 4096: 3169.91, 8192: 2527.40}}
    for name, runs in published.items():
        rows = {r.depth: r for r in lb.roofline("llama-3-1-8b", card=name, n_depth=list(runs), n_ctx=8192).rows}
        assert sorted(rows) == sorted(runs)  # -d: those depths alone
        for depth, ts in runs.items():
            predicted = depth / rows[depth].ttft_s
            assert predicted == pytest.approx(ts, rel=0.01 if depth == 512 else 0.12), (name, depth, predicted)


def test_prefill_calibration_reproduces_both_measured_pp_tests():
    from llamabench.memory.speed import SpeedModel, calibrate_prefill

    decode = SpeedModel(100e9, 1e12, "test")
    lo, hi = TokenCost(0, 2_000_000, 1000, 0, 1_000_000), TokenCost(4096, 2_000_000, 9000, 0, 90_000_000)
    matmul = 500_000_000
    ts = lambda c: 1 / (c.total_bytes / 100e9 + matmul / 2e12 + c.attention_flops / 0.5e12)  # noqa: E731
    m = calibrate_prefill(decode, matmul, (lo, ts(lo), 512), (hi, ts(hi), 512))
    assert m.prefill == pytest.approx(2e12) and m.prefill_attention == pytest.approx(0.5e12)
    assert 1 / m.prefill_seconds(hi, matmul) == pytest.approx(ts(hi))
    one = calibrate_prefill(decode, matmul, (lo, ts(lo), 512), (lo, ts(lo), 512))  # one depth: the decode's attention
    assert one.prefill_attention is None and 1 / one.prefill_seconds(lo, matmul) == pytest.approx(ts(lo))


def test_roofline_depths_beyond_the_context_are_refused():
    import llamabench as lb
    from llamabench.core.errors import LlamabenchError

    with pytest.raises(LlamabenchError, match="beyond n_ctx"):
        lb.roofline("llama-3-1-8b", card="rtx-4090", n_depth=[50000], n_ctx=32768)
    assert all(r.ttft_s is None for r in lb.roofline("llama-3-1-8b", bandwidth=900, n_ctx=4096).rows)  # no FLOPs


def test_roofline_says_the_state_per_token_and_a_context_past_the_trained_one():
    """A hybrid's MiB/token left ~198 MiB of recurrent state unexplained, and -c past the trained context went
    unsaid (inspect and fit say it)."""
    import llamabench as lb
    from llamabench.render.speed import render_roofline

    record = lb.roofline("nemotron-h-8b", card="rtx-4090", n_depth=[4096], n_ctx=32768)
    text = render_roofline(record)
    assert "of it state" in text and record.rows[0].recurrent_bytes > 0
    assert "beyond the trained context 8,192" in text
    prefill = next(line for line in text.splitlines() if line.strip().startswith("prefill"))
    assert "((" not in prefill and "))" not in prefill  # one level of parentheses
