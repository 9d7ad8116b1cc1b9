"""The pure fit search with a fake compute buffer: totals, the max-context search, placements, recommend.

No llama.cpp here: `Fitter` takes the compute buffer as a callable, so each expectation below is
checked against a brute-force scan of the same arithmetic.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from llamabench.core import serial
from llamabench.core.errors import ContextRefused, EngineError
from llamabench.jobs.fit.search import ComputeSplit, Fitter
from llamabench.memory.footprint import compute_footprint
from llamabench.memory.placement import FitRow, Parts, Placement, PlacementKind, recommend
from llamabench.model.layout import geometry_from_metadata
from llamabench.model.metadata import TensorInfo
from llamabench.model.weights import breakdown
from llamabench.settings.budget import Budget
from llamabench.settings.params import Params
from tests.support.metadata import model

MIB, GIB = 2**20, 2**30
N_LAYER = 8
# a small MoE: 8 layers, 4 KV heads x 128 -> 8 x 4 x 128 x 2 x 2 = 16,384 B/token at f16
GEOMETRY = geometry_from_metadata(model("qwen3moe", block_count=N_LAYER, context_length=32768, embedding_length=1024,
                                        attention__head_count=8, attention__head_count_kv=4,
                                        attention__key_length=128, attention__value_length=128))


def tensors(tied: bool) -> tuple[TensorInfo, ...]:
    out = [TensorInfo("token_embd.weight", (1024, 1000), 8, 100 * MIB),
           TensorInfo("output_norm.weight", (1024,), 0, 4096)]
    if not tied:
        out.append(TensorInfo("output.weight", (1024, 1000), 8, 100 * MIB))
    for il in range(N_LAYER):
        out += [TensorInfo(f"blk.{il}.attn_q.weight", (1024, 1024), 8, 10 * MIB),
                TensorInfo(f"blk.{il}.ffn_up_exps.weight", (1024, 512, 8), 8, 200 * MIB)]
    return tuple(out)


def fake_compute(settings: Params) -> int:
    return 50 * MIB + settings.n_ctx * 1000  # grows with n_ctx, as llama.cpp's does


def fitter(tied: bool = False, reserve: int = 0, **options) -> Fitter:
    weights = breakdown(tensors(tied), N_LAYER, set(), basis="test")
    return Fitter(GEOMETRY, weights, fake_compute, reserve=reserve, **options)


def test_all_on_card_is_the_sum_of_the_parts():
    f = fitter(reserve=512 * MIB)
    s = Params(n_ctx=8192)
    parts = f.parts(s, Placement(PlacementKind.ALL))
    # every layer and the output matrix and norm; the input embeddings stay in system RAM
    assert parts.weights == N_LAYER * 210 * MIB + 100 * MIB + 4096
    assert parts.kv == 16384 * 8192 == compute_footprint(GEOMETRY, s).kv_bytes
    assert parts.compute == fake_compute(s) and parts.reserve == 512 * MIB
    assert parts.total == parts.weights + parts.kv + parts.compute + parts.reserve


def test_tied_embeddings_put_token_embd_on_the_card_as_the_output():
    # llama.cpp loads token_embd a second time (TENSOR_DUPLICATED) on the output layer's device
    untied, tied = fitter(tied=False), fitter(tied=True)
    s = Params(n_ctx=4096)
    assert tied.parts(s, Placement(PlacementKind.ALL)).weights == untied.parts(s, Placement(PlacementKind.ALL)).weights
    # -ngl 1 is the output layer alone: the duplicated embeddings and the norm
    assert tied.parts(s, Placement(PlacementKind.NGL, 1)).weights == 100 * MIB + 4096
    assert tied.weights.total_bytes == untied.weights.total_bytes - 100 * MIB  # the file holds it once


@pytest.mark.parametrize("budget_gib", [1.85, 2.0, 2.2])  # room for about 4k, 13k and 25k tokens
def test_max_n_ctx_is_the_largest_step_that_fits(budget_gib):
    f = fitter()
    budget = int(budget_gib * GIB)
    s = Params(n_ctx=4096)
    for placement in (Placement(PlacementKind.ALL), Placement(PlacementKind.NGL, 4)):
        found = f.max_n_ctx(budget, s, placement)
        brute = max((n for n in range(256, GEOMETRY.n_ctx_train + 1, 256)  # the search stops at the trained length
                     if f.parts(replace(s, n_ctx=n), placement).total <= budget), default=0)
        assert found == brute, placement


def test_max_n_ctx_reaches_past_the_trained_length_when_asked():
    # asked for 65536 on a model trained to 32768: the answer can agree with the asked -c
    f = fitter()
    found = f.max_n_ctx(64 * GIB, Params(n_ctx=65536), Placement(PlacementKind.ALL))
    assert found >= 65536


def test_max_n_ctx_is_zero_when_even_256_does_not_fit():
    assert fitter().max_n_ctx(GIB, Params(n_ctx=4096), Placement(PlacementKind.ALL)) == 0


def test_rows_search_experts_and_layers():
    f = fitter()
    s = Params(n_ctx=8192)
    budget = int(1.2 * GIB)
    rows = f.rows(Budget("test", budget), s)
    kinds = [r.placement.kind for r in rows]
    assert kinds == [PlacementKind.ALL, PlacementKind.N_CPU_MOE, PlacementKind.NGL]
    assert not rows[0].fits
    k_moe = rows[1].placement.value
    assert f.parts(s, Placement(PlacementKind.N_CPU_MOE, k_moe)).total <= budget
    assert f.parts(s, Placement(PlacementKind.N_CPU_MOE, k_moe - 1)).total > budget  # the fewest experts in RAM
    k_ngl = rows[2].placement.value
    assert f.parts(s, Placement(PlacementKind.NGL, k_ngl)).total <= budget
    assert f.parts(s, Placement(PlacementKind.NGL, k_ngl + 1)).total > budget  # the most layers on the card


def _row(type_kv: str, kind: PlacementKind, value: int = 0, fits: bool = True) -> FitRow:
    total = 1 if fits else 10
    return FitRow(Budget("card", 5), Params(type_k=type_kv, type_v=type_kv), Placement(kind, value),
                  Parts(total, 0, 0, 0, 0), 0)


def test_recommend_gives_up_the_least():
    rows = [_row("f16", PlacementKind.ALL, fits=False), _row("f16", PlacementKind.NGL, 20),
            _row("f16", PlacementKind.N_CPU_MOE, 4), _row("q8_0", PlacementKind.ALL)]
    # better KV type first (f16 with experts in RAM beats q8_0 all on the card), then experts before layers
    assert recommend(rows).placement == Placement(PlacementKind.N_CPU_MOE, 4)
    assert recommend(rows[:2]).placement == Placement(PlacementKind.NGL, 20)
    assert recommend([rows[0]]) is None


def test_fit_rows_round_trip():
    row = fitter().rows(Budget("16GiB", 16 * GIB), Params(n_ctx=4096))[0]
    assert serial.from_dict(FitRow, serial.to_dict(row)) == row


def test_a_backend_that_refuses_a_tensor_keeps_it_on_the_host():
    """Where the dry run read what the backend took (a GPU build), the card holds that and the host maps the refused
    tensor too: llama.cpp keeps a tensor whose type or size the device refuses on the CPU (buft_supported), and its
    mapped span then reaches from the first to the last host tensor in the file."""
    laid = []
    offset = 0
    for t in tensors(tied=False):  # file order: token_embd, output_norm, output, then the layers
        laid.append(TensorInfo(t.name, t.shape, t.ggml_type, t.n_bytes, offset=offset + 32))
        offset += t.n_bytes + 32
    weights = breakdown(tuple(laid), N_LAYER, set(), basis="test")
    s, placement = Params(n_ctx=4096), Placement(PlacementKind.ALL)
    theory = Fitter(GEOMETRY, weights, fake_compute, reserve=0)
    by_theory, host_by_theory = theory.evaluate(s, placement)
    assert host_by_theory.weights == 100 * MIB  # token_embd alone
    refused = by_theory.weights - 100 * MIB  # the output matrix stays on the CPU

    def backend(settings: Params) -> ComputeSplit:
        return ComputeSplit(card=fake_compute(settings), weights=(refused,), host_weights=200 * MIB,
                            host_tensors=frozenset({"token_embd.weight", "output.weight"}))

    parts, host = Fitter(GEOMETRY, weights, backend, reserve=0).evaluate(s, placement)
    assert parts.weights == refused and parts.kv == by_theory.kv  # KV still with its layers
    # the span from token_embd to the end of output.weight: output_norm (4096 B) and the padding in between
    assert host.weights == 200 * MIB + 4096 + 2 * 32
    assert theory.theory_weights(placement) == (by_theory.weights,)


def test_a_context_llama_cpp_cannot_create_counts_as_not_fitting():
    """A device may refuse a long context outright (lavapipe's Vulkan0 takes no tensor past 128 MiB, and llama.cpp
    aborts): the max-n_ctx search stops below it and keeps the reason, where other failures still raise."""
    limit = 12288

    def refusing(settings: Params) -> int:
        if settings.n_ctx > limit:
            raise ContextRefused("Vulkan0 does not take the tensor cache_k_l3 at this size")
        return fake_compute(settings)

    f = Fitter(GEOMETRY, breakdown(tensors(False), N_LAYER, set(), basis="test"), refusing, reserve=0)
    s, placement = Params(n_ctx=4096), Placement(PlacementKind.ALL)
    assert f.max_n_ctx(64 * GIB, s, placement) == limit  # room for far more: the device is the limit
    assert "cache_k_l3" in f.refused[min(f.refused)]

    def broken(settings: Params) -> int:
        raise EngineError("the RPC host went away")

    with pytest.raises(EngineError, match="went away"):
        Fitter(GEOMETRY, breakdown(tensors(False), N_LAYER, set(), basis="test"), broken,
               reserve=0).max_n_ctx(64 * GIB, s, placement)
