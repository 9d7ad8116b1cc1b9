"""What a token reads and computes, the speed model's terms, and the fit of its coefficients. Pure: hand-computed
values, one case a row, each with why it matters."""

from __future__ import annotations

import pytest

from llamabench.memory import speed, speed_fit
from llamabench.memory.speed_model import Machine, Rates, SpeedModel, Term
from llamabench.model.layout import geometry_from_metadata
from llamabench.model.metadata import ModelMetadata, TensorInfo
from llamabench.model.weights import breakdown
from llamabench.settings.params import Params
from tests.support.metadata import model

# Gemma 3 270M's cache geometry: 18 layers, 1 KV head x 256, SWA window 512 on 15 layers (5:1), 4 query heads
GEMMA_META = model("gemma3", block_count=18, context_length=32768, embedding_length=640, attention__head_count=4,
                   attention__head_count_kv=1, attention__key_length=256, attention__value_length=256,
                   attention__sliding_window=512)
GEMMA = geometry_from_metadata(GEMMA_META)


def _work(tensors=(), meta=GEMMA_META, geometry=GEMMA, **keys) -> speed.ModelWork:
    keys = {f"{meta.architecture}.{k}": v for k, v in keys.items()}
    meta = ModelMetadata(meta.source, meta.architecture, {**meta.keys, **keys}, tuple(tensors), name=meta.name)
    weights = breakdown(meta.tensors, geometry.n_layer, set(), basis="test")
    return speed.model_work(meta, geometry, weights)


@pytest.mark.parametrize("depth", [
    0,  # nothing cached: weights alone
    100,  # below the window: every layer reads every cell
    512,  # the window itself
    8192,  # past it: the SWA layers stop growing
])
def test_kv_read_per_decoded_token(depth):
    cost = speed.decode_cost(_work(), Params(), depth)
    # 3 full layers read d cells, 15 SWA layers min(d, 512); 1 x 256 x 2 (K, V) x 2 bytes = 1,024 B per cell
    assert cost.kv_bytes == 3 * 1024 * depth + 15 * 1024 * min(depth, 512)
    # Q.K and P.V: 2 x n_head x (256 + 256) FLOPs per cell and layer
    assert cost.attention_flops == 2 * 4 * 512 * (3 * depth + 15 * min(depth, 512))
    assert cost.layers == 18 and cost.recurrent_bytes == 0


def test_full_gqa_counterfactual_reads_every_layer_at_depth():
    gqa = speed.full_gqa_cost(GEMMA, Params(), _work(), 8192)
    assert gqa.kv_bytes == 18 * 1024 * 8192


def test_recurrent_state_is_read_and_written():
    meta = model("qwen35moe", block_count=4, context_length=4096, embedding_length=64, attention__head_count=2,
                 attention__head_count_kv=1, attention__key_length=64, attention__value_length=64,
                 full_attention_interval=4, ssm__conv_kernel=4, ssm__state_size=16, ssm__group_count=1,
                 ssm__time_step_rank=2, ssm__inner_size=32)
    geometry = geometry_from_metadata(meta)
    cost = speed.decode_cost(_work((), meta, geometry), Params(), 0)
    state = ((4 - 1) * (32 + 2 * 16) + 16 * 32) * 4  # (R + S) x f32 per layer
    assert cost.recurrent_bytes == 2 * 3 * state


TENSORS = (TensorInfo("token_embd.weight", (8, 100), 0, 999), TensorInfo("output.weight", (8, 100), 0, 100),
           TensorInfo("blk.0.attn_q.weight", (8, 8), 0, 50), TensorInfo("blk.0.ffn_up_exps.weight", (8, 8, 8), 0, 800),
           TensorInfo("blk.0.ffn_up_shexp.weight", (8, 8), 0, 30), TensorInfo("blk.0.attn_norm.weight", (8,), 0, 32))


def test_routed_experts_count_by_their_used_share():
    weights = breakdown(TENSORS, 1, set(), basis="test")
    # the embedding lookup is left out; 2 of 8 experts: a quarter of the routed bytes
    assert speed.active_weight_bytes(weights, 2, 8) == 100 + 50 + 800 // 4 + 30 + 32


def test_model_work_splits_bytes_and_flops_by_class():
    work = _work(TENSORS, expert_used_count=2, expert_count=8)
    assert (work.dense_bytes, work.expert_bytes, work.output_bytes) == (50 + 30 + 32, 800, 100)
    # 2 FLOPs a weight: attn_q 64 and the shared expert 64 (a norm is a vector); the experts 512; the output 800
    assert (work.dense_flops, work.expert_flops, work.output_flops) == (256, 1024, 1600)
    assert work.decode_weight_bytes == 112 + 200 + 100


@pytest.mark.parametrize("n, hit", [
    (1, 0.25),  # one token picks 2 of 8
    (2, 1 - 0.75 ** 2),  # two tokens: independent picks
    (512, 1.0),  # a ubatch touches every expert
])
def test_a_ubatch_reads_the_experts_its_tokens_pick(n, hit):
    assert speed.expert_hit_share(_work(TENSORS, expert_used_count=2, expert_count=8), n) == pytest.approx(hit)


@pytest.mark.parametrize("depth, n, window, pairs", [
    (0, 4, 0, 1 + 2 + 3 + 4),  # causal: token i attends to i + 1 cells
    (10, 4, 0, 11 + 12 + 13 + 14),  # after 10 cached
    (10, 4, 12, 11 + 12 + 12 + 12),  # a window of 12 caps them
    (100, 3, 12, 36),  # deep: every token at the window
])
def test_causal_attention_pairs(depth, n, window, pairs):
    assert speed._attended(depth, n, window) == pairs


def test_ubatches_follow_llama_cpp_split():
    p = Params(n_ubatch=512, n_batch=2048)
    assert speed.ubatches(p, 1200, 4096) == [(4096, 512), (4608, 512), (5120, 176)]
    assert speed.ubatches(p.replace(n_batch=256), 600, 0) == [(0, 256), (256, 256), (512, 88)]  # ubatch <= batch


def test_ubatch_matmul_leaves_the_output_out_and_counts_expert_batches():
    work = _work(TENSORS, expert_used_count=2, expert_count=8)
    cost = speed.ubatch_cost(work, Params(), 0, 16)
    assert cost.matmul_flops == 16 * (256 + 1024 // 4)  # no output matrix: llama-bench asks for the last logits only
    # dense matrices multiply 16 tokens at once, each expert 16 x 2 / 8 = 4
    assert cost.matmul_small_flops == pytest.approx(16 * 256 / 16 + 16 * 1024 / 4 / 4)


# the speed model --------------------------------------------------------------------------------------------
MACHINE = Machine("test", bandwidth=100e9, fp32=10e12, fp16_matrix=40e12, int8_matrix=80e12)


def test_decode_terms_are_units_over_figures_times_coefficients():
    rates = Rates("cuda", {"weights": 2.0, "kv": 4.0, "attention": 10.0, "layer": 5.0})
    m = SpeedModel(MACHINE, rates)
    cost = speed.TokenCost(0, 1_000_000_000, 500_000_000, 0, 4_000_000_000, layers=10)
    terms = m.decode_terms(cost)
    # the weights and the KV at half the bandwidth (30 ms), and the KV's cost beyond it (4 x 0.5 GB: 20 ms)
    assert terms[Term.WEIGHTS] == pytest.approx(2.0 * 1.5e9 / 100e9)
    assert terms[Term.KV] == pytest.approx(4.0 * 0.5e9 / 100e9)
    assert terms[Term.ATTENTION] == pytest.approx(10.0 * 4e9 / 40e12)  # CUDA's attention on the FP16 units
    assert terms[Term.LAYER] == pytest.approx(5.0 * 10 * 1e-6)  # 5 us a layer
    assert m.tokens_per_second(cost) == pytest.approx(1 / sum(terms.values()))


@pytest.mark.parametrize("backend, matmul", [
    ("cuda", 80e12),  # MMQ: INT8 on the tensor cores
    ("vulkan", 40e12),  # coopmat: FP16
    ("metal", 40e12),  # the FP16 units where the machine has them (M5), else FP32
    ("cpu", 10e12),  # vector units
])
def test_each_backend_multiplies_on_its_own_units(backend, matmul):
    m = SpeedModel(MACHINE, Rates(backend, {"matmul": 1.0}))
    cost = speed.UbatchCost(512, 0, 0, 0, 1_000_000_000_000, 0.0, 0)  # a ubatch of 10^12 matrix FLOPs
    assert m.ubatch_terms(cost)[Term.MATMUL] == pytest.approx(1e12 / matmul)


def test_a_machine_without_matrix_units_falls_back_to_fp32():
    m = SpeedModel(Machine("m1", 400e9, 10e12), Rates("cuda", {"matmul": 1.0}))
    assert m.ubatch_terms(speed.UbatchCost(1, 0, 0, 0, 10**12, 0.0, 0))[Term.MATMUL] == pytest.approx(0.1)


# the fit ------------------------------------------------------------------------------------------------------
def test_nnls_recovers_known_coefficients_and_keeps_them_non_negative():
    import numpy as np

    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert speed_fit.nnls(a, np.array([2.0, 3.0, 5.0])) == pytest.approx([2.0, 3.0])
    assert speed_fit.nnls(a, np.array([-1.0, 3.0, 2.0]))[0] == 0.0  # the best negative value is held at 0


def _obs(machine: str, weights: float, kv: float) -> speed_fit.Observation:
    # true coefficients 1.25 and 2.0: seconds = 1.25 x weights + 2 x kv
    return speed_fit.Observation({"weights": weights, "kv": kv}, 1 / (1.25 * weights + 2.0 * kv), machine, "m", "")


def test_the_fit_and_leave_one_out_on_exact_data():
    obs = [_obs("a", 0.01, 0.0), _obs("a", 0.01, 0.004), _obs("b", 0.02, 0.0), _obs("b", 0.02, 0.01)]
    coefficients = speed_fit.fit(obs, ("weights", "kv"))
    assert coefficients == pytest.approx({"weights": 1.25, "kv": 2.0})
    held = speed_fit.leave_one_out(obs, ("weights", "kv"), lambda o: o.machine)
    assert len(held) == 4 and all(abs(r) < 1e-9 for _, r in held)  # exact data holds out exactly
    assert speed_fit.spread([-0.2, 0.0, 0.1, 0.3], 1.0) == pytest.approx((-0.2, 0.3))
