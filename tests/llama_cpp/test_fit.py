"""`llamabench fit` on twins: margins, the max-context search against real allocations, bad budgets."""

from __future__ import annotations

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.jobs.twin.build import write_twin
from llamabench.llama import ggml_devices
from llamabench.llama.ggml_devices import NO_DEVICE
from llamabench.llama.worker import run_child
from llamabench.memory.allocations import Allocations
from llamabench.memory.placement import PlacementKind
from llamabench.runtimes.llama_server import llama_server_command
from llamabench.settings.params import Params
from llamabench.world import catalog
from tests.support.eagle3 import write_eagle3

pytestmark = pytest.mark.slow  # llama.cpp dry runs and real contexts

MIB = 2**20


@pytest.fixture(scope="module")
def twin_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("fit") / "qwen3-30b-a3b-twin.gguf"
    write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, path)
    return path


def test_fits_by_a_margin_and_misses_by_a_margin(twin_path):
    # KV alone at 32768 f16 is 3 GiB for this geometry (98,304 B/token)
    record = lb.fit(str(twin_path), vram="8GiB,2GiB", n_ctx=32768, type_k="f16", type_v="f16", n_gpu_layers=None)
    result = record.fit  # n_gpu_layers=None: the default, a search
    big = result.rows_for("8GiB", 32768)[0]
    assert big.fits and big.parts.total < 8 * 2**30 - 3 * 2**30  # fits with more than 3 GiB to spare
    assert big.parts.kv == 98304 * 32768
    small = result.rows_for("2GiB", 32768)[0]
    assert small.placement.kind is PlacementKind.ALL
    assert not small.fits and small.short_by > 2**30  # misses: KV alone is over the budget
    best = result.recommended("8GiB", 32768)
    assert best.placement.kind is PlacementKind.ALL and "-c 32768" in llama_server_command(result, best)
    assert result.recommended("2GiB", 32768).placement.kind is not PlacementKind.ALL  # only fewer layers fit
    summary = record.to_dict()["summary"]["recommendations"]  # what `fit --json` gives a script
    assert summary[0]["budget"] == "8GiB" and summary[0]["command"] == llama_server_command(result, best)
    assert result.rows[summary[1]["row"]] == result.recommended("2GiB", 32768)


def _allocated_bytes(path, settings: Params, rpc=None) -> int:
    """What a real context allocates, all buffers, created in a child as every context is."""
    events = []
    run_child({"job": "create", "path": str(path), "params": settings.replace(repack=False, n_threads=1).to_dict(),
               "rpc": rpc}, events.append)
    alloc = Allocations.from_dict(next(e for e in events if e["event"] == "alloc")["allocations"])
    return alloc.weights_bytes + alloc.kv_bytes + alloc.recurrent_bytes + alloc.compute_and_output_bytes


def test_max_context_search_agrees_with_real_allocations(twin_path):
    # the twin's weights (zero, at the real hidden size) and 300 MiB beside them for KV and compute, once --ram has
    # given the OS its quarter (under 16 GiB)
    ram_mib = (twin_path.stat().st_size // MIB + 300) * 4 // 3
    # Llama() on a CPU build; on a GPU build llama-server -dev none (Llama() cannot leave the GPU out, and llama.cpp
    # then keeps compute buffers for offloaded ops), one slot, nothing growing
    gpu = bool(ggml_devices.gpu_devices())
    runtime = dict(runtime="llama-server", n_seq=1, cache_ram=0, ctx_checkpoints=0) if gpu else dict(
        runtime="llama-cpp-python")
    record = lb.fit(str(twin_path), verify=True, cpu_only=True, ram=f"{ram_mib}MiB", n_ctx=2048, type_k="f16",
                    type_v="f16", **runtime)
    assert record.verify.ok, record.verify
    row = record.rows[0]
    budget = row.budget.bytes
    assert budget == ram_mib * MIB - ram_mib * MIB // 4, row.budget.label
    found = row.max_n_ctx
    assert found > 2048
    rpc = [NO_DEVICE] if gpu else None
    assert _allocated_bytes(twin_path, row.settings.replace(n_ctx=found), rpc) <= budget  # llama.cpp's own buffers
    assert _allocated_bytes(twin_path, row.settings.replace(n_ctx=found + 256), rpc) > budget  # one step above is over


def test_llama_server_prompt_cache_counts_in_a_cpu_only_budget(twin_path):
    # --cpu-only: the card is system RAM, and llama-server's prompt cache (8 GiB by default) grows there too
    server = lb.fit(str(twin_path), cpu_only=True, ram="2GiB", n_ctx=2048, type_k="f16", type_v="f16").rows[0]
    assert not server.fits and server.host.prompt_cache == 8192 * MIB
    small = lb.fit(str(twin_path), cpu_only=True, ram="2GiB", n_ctx=2048, type_k="f16", type_v="f16",
                   cache_ram=0).rows[0]
    assert small.fits and small.host.prompt_cache == 0


def test_builtin_default_verdict_for_16_and_24_gb(capsys):
    assert main(["fit", "qwen3-5-35b-a3b", "--emulate"]) == 0  # --emulate: 16/24 GiB even on a GPU build
    out = capsys.readouterr().out
    assert "16GiB (budget 16.00 GiB) at n_ctx 131072" in out and "24GiB (budget 24.00 GiB) at n_ctx 131072" in out
    for label in ("weights", "KV", "recurrent", "compute", "reserve"):
        assert f"  {label}" in out
    assert "published Q4_K_M" in out and "dry run" in out and "512 MiB" in out
    assert "--n-cpu-moe" in out  # 16 GB needs experts in RAM for 21 GB of weights


def test_refused_cache_types_are_notes_not_a_crash(twin_path, capsys):
    # q8_0 / q4_0 V need flash attention: said once each, and the f16 rows stand
    assert main(["fit", str(twin_path), "--ctx", "4096", "-fa", "off", "--vram", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "note: q8_0/q8_0: a quantized V cache (q8_0) needs flash attention" in out and "f16/f16" in out


def test_fit_verify_creates_the_mtp_context_beside():
    """fit --verify of a model with an MTP layer creates both answers for real, the second with llama-server's MTP
    draft context beside the target (load_mtp, ctx_type MTP), and each agrees with its row, part by part."""
    record = lb.fit("qwen3-5-35b-a3b", n_ctx=8192, vram="4GiB", type_k="f16", type_v="f16", n_seq=1, emulate=True,
                    verify=True)
    assert record.fit.spec_types == ("none", "draft-mtp")
    assert len(record.verify.placements) == 2 and record.verify.ok
    plain, mtp = (record.fit.recommended("4GiB", 8192, s) for s in record.fit.spec_types)
    assert mtp.parts.kv - plain.parts.kv == 16 * 2**20  # the MTP context's layer at 8192 cells
    assert mtp.parts.weights > plain.parts.weights  # the NextN layer loads only with draft-mtp


def test_fit_with_a_draft_model_sizes_it_beside_and_verify_creates_it(qwen):
    """-md: a real GGUF drafting for itself, -ngld 10 of its 25 layers on the card: the draft's weights and cache
    split as its own placement says, its context re-sized at each n_ctx of the search; --verify loads the draft and
    creates its context beside the target's, and each device agrees."""
    record = lb.fit(str(qwen), n_ctx=8192, vram="2GiB", type_k="f16", type_v="f16", n_seq=1, emulate=True,
                    model_draft=str(qwen), n_gpu_layers_draft=10, verify=True)
    plain, draft = (record.fit.recommended("2GiB", 8192, s) for s in ("none", "draft-simple"))
    assert draft.parts.weights > plain.parts.weights and draft.host.weights > plain.host.weights
    assert draft.parts.kv - plain.parts.kv == 9 * 4 * 2**20 and draft.host.kv == 15 * 4 * 2**20  # 4 MiB a layer
    assert draft.parts.total > plain.parts.total and draft.parts.compute > plain.parts.compute
    assert "-md " in llama_server_command(record.fit, draft) and "-ngld 10" in llama_server_command(record.fit, draft)
    assert record.verify.ok and len(record.verify.placements) == 2


@pytest.mark.parametrize("options, says", [
    ({"spec_type": "draft-simple"}, "needs the draft model"),
    ({"model_draft": "x.gguf", "runtime": "llama-cpp-python"}, "-md is llama-server's"),
    ({"spec_type": "draft-eagle3"}, "needs the draft model: -md HEAD.gguf"),
    ({"spec_type": "draft-dflash"}, "block diffusion"),
    ({"device_draft": "RPC1"}, "-devd places the draft model: give it with -md"),
    ({"model_draft": "x.gguf", "device_draft": "CUDA3"}, "-devd CUDA3: the fit has 1 card"),
    ({"model_draft": "x.gguf", "device_draft": "GPU"}, "'GPU' is not a device name"),
    ({"model_draft": "x.gguf", "device_draft": "CUDA0,CUDA0"}, "a device named twice"),
])
def test_a_draft_that_cannot_be_sized_is_one_line(qwen, options, says):
    options = {"vram": "2GiB", **options}
    with pytest.raises(lb.LlamabenchError, match=says):
        lb.fit(str(qwen), n_ctx=8192, **options)


def test_fit_sizes_an_eagle3_head_against_its_target_and_verify_creates_it(qwen, tmp_path):
    """-md HEAD --spec-type draft-eagle3: the head's weights and its context (made against the target's, with
    llama-server's sampler chains) beside the target; --verify creates both for real on an emulated card."""
    head = write_eagle3(qwen, tmp_path / "eagle3-head.gguf")
    record = lb.fit(str(qwen), vram="2GiB", n_ctx=8192, type_k="f16", type_v="f16", model_draft=str(head),
                    spec_type="draft-eagle3", verify=True)
    plain, eagle = (record.fit.recommended("2GiB", 8192, s) for s in ("none", "draft-eagle3"))
    assert eagle.parts.kv - plain.parts.kv == 4 * 2**20  # the head's one layer at 8192 cells (2 KV heads x 64)
    assert eagle.parts.compute > plain.parts.compute + 256 * 2**20  # n_batch outputs and the sampler chains
    command = llama_server_command(record.fit, eagle)
    assert f"-md {head}" in command and "--spec-type draft-eagle3" in command
    assert record.verify.ok and len(record.verify.placements) == 2
    with pytest.raises(lb.LlamabenchError, match="is an EAGLE3 head"):  # the head run as a plain draft model
        lb.fit(str(qwen), vram="2GiB", n_ctx=8192, model_draft=str(head))
    with pytest.raises(lb.LlamabenchError, match="not an EAGLE3 head"):  # a plain model run as a head
        lb.fit(str(qwen), vram="2GiB", n_ctx=8192, model_draft=str(qwen), spec_type="draft-eagle3")
