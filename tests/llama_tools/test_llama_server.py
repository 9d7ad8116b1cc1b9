"""The printed command, started for real: llama.cpp's own llama-server on an emulated card is the judge.

`fit` sizes the context llama-server creates (slots, unified KV, the slots' outputs). Each case takes
the llama-server line `fit` printed, starts it with `--rpc` on llama.cpp's ggml-rpc-server (a card on
127.0.0.1), reads its allocation log (`-lv 4`) and sets it against the fit, device by device: weights,
KV and recurrent state to llama.cpp's printed 0.01 MiB, compute to 3% or 5 MiB.
The tools come from scripts/build_llama_tools.sh, which `make test` runs first (once, into the cache).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import llamabench as lb
from llamabench.jobs.source import resolve
from llamabench.memory.allocations import HOST, PRINTED_TOLERANCE_BYTES, compute_tolerance, parse_allocations
from llamabench.runtimes.llama_cpp_python import python_call
from llamabench.runtimes.llama_server import llama_server_command
from tests.support.eagle3 import write_eagle3
from tests.support.llama_server import card_peak, rpc_server, run_printed_command, tools_dir

MIB = 2**20
TOOLS = tools_dir()
pytestmark = pytest.mark.slow
needs_tools = pytest.mark.skipif(
    TOOLS is None, reason="llama.cpp's llama-server and ggml-rpc-server are not built: run "
    "make tools (scripts/build_llama_tools.sh; or set LLAMABENCH_LLAMA_TOOLS to their bin folder)")


def compute_close(predicted: int, allocated: int) -> bool:
    return abs(allocated - predicted) <= compute_tolerance(predicted)


def started(path: str, n_ctx: int, *, spec: str = "none", **fit_options):
    """Fit one placement, start its printed llama-server line on an emulated card; (row, card, host, run).
    `spec`: the row of that --spec-type (fit sizes draft-mtp beside none where the model has an MTP layer)."""
    # sized on an emulated card even on a GPU build, answering as it is (no op offload): the judge below is
    # llama-server on one (ggml-rpc-server's device offloads nothing)
    record = lb.fit(path, n_ctx=n_ctx, vram="64GiB", type_k="f16", type_v="f16", emulate=True, backend="cpu",
                    **fit_options)
    row = next(r for r in record.fit.rows if r.settings.spec_type == spec)
    command = llama_server_command(record.fit, row)
    with tempfile.TemporaryDirectory() as folder:
        ledger = Path(folder) / "card-ledger.log"
        with rpc_server(TOOLS, ledger=ledger) as endpoint:
            run = run_printed_command(command, TOOLS, rpc=[endpoint], extra=("-nr",))  # -nr: this CPU's AMX faults
        peak = card_peak(ledger)
    assert run.ready, f"llama-server did not start: {run.log[-2000:]}"
    alloc = run.allocations
    assert len(alloc.card_names) == 1, alloc.card_names
    # the card's own ledger: the most it held at once is what the fit put on it, every context summed
    predicted = row.parts.buffers.total
    assert abs(peak - predicted) <= compute_tolerance(row.parts.compute), \
        f"the card held {peak / MIB:.2f} MiB at most, the fit said {predicted / MIB:.2f} MiB"
    # and the log says the same: each context's last reservation, every context summed (the MTP context
    # reserves twice, one buffer)
    card = alloc.device(alloc.card_names[0])
    assert abs(peak - card.total) <= compute_tolerance(card.compute), \
        f"the card held {peak / MIB:.2f} MiB at most, its log says {card.total / MIB:.2f} MiB"
    return row, card, alloc.device(HOST), run


def assert_matches(row, card, host, lines: int = 1) -> None:
    """Weights, KV and state to llama.cpp's printed 0.01 MiB (one rounding per printed line: `lines` models or
    contexts), compute to 3% or 5 MiB."""
    for name, predicted, allocated in (("weights", row.parts.weights, card.weights), ("KV", row.parts.kv, card.kv),
                                       ("recurrent", row.parts.recurrent, card.recurrent),
                                       ("host weights", row.host.weights, host.weights),
                                       ("host KV", row.host.kv, host.kv),
                                       ("host recurrent", row.host.recurrent, host.recurrent)):
        assert abs(allocated - predicted) <= PRINTED_TOLERANCE_BYTES * lines, \
            f"{name}: fit {predicted / MIB:.2f} MiB, llama-server {allocated / MIB:.2f} MiB"
    assert compute_close(row.parts.compute, card.compute), (row.parts.compute / MIB, card.compute / MIB)
    assert compute_close(row.host.compute, host.compute), (row.host.compute / MIB, host.compute / MIB)


@needs_tools
@pytest.mark.parametrize("n_ctx, ngl", [(32768, None), (8192, 5)])
def test_gemma_as_llama_server_allocates_it(gemma, n_ctx, ngl):
    row, card, host, run = started(str(gemma), n_ctx, **({"n_gpu_layers": [ngl]} if ngl else {}))
    assert "n_slots = 4" in run.log and "kv_unified = 'true'" in run.log  # -np 4 -kvu: its auto default
    assert_matches(row, card, host)
    if ngl is None:  # the numbers of the issue: 133.50 MiB KV (SWA 2,560 cells), 51.02 MiB compute
        assert round((card.kv + host.kv) / MIB, 2) == 133.50 and "2560 cells" in run.log
        assert round(card.compute / MIB, 2) == pytest.approx(51.02, abs=0.01)


@needs_tools
@pytest.mark.parametrize("n_seq", [1, 4])
def test_slots_given_with_np(gemma, n_seq):
    row, card, host, run = started(str(gemma), 8192, n_seq=n_seq)
    assert f"n_slots = {n_seq}" in run.log and "kv_unified = 'false'" in run.log
    assert row.settings.n_seq == n_seq and not row.settings.kv_unified
    assert_matches(row, card, host)


@needs_tools
def test_qwen35_twin_at_128k_holds_four_sequences_of_recurrent_state():
    path = str(resolve("qwen3-5-35b-a3b").gguf_for_llama())
    row, card, host, _ = started(path, 131072)
    assert round(row.parts.kv / MIB, 2) == 2560.00 and round(row.parts.recurrent / MIB, 2) == 251.25
    assert_matches(row, card, host)
    assert row.host.checkpoints > 0  # recurrent: llama-server checkpoints each slot's state in RAM


@needs_tools
@pytest.mark.parametrize("n_ctx, n_seq", [(131072, None), (8192, 1)])
def test_qwen35_twin_with_its_mtp_layer(n_ctx, n_seq):
    """--spec-type draft-mtp on Qwen3.5-35B-A3B's twin: the MTP layer's weights, the MTP draft context (its KV and
    compute, reserved again by llama-server for backend sampling: the last reservation stays) and the target's
    rollback planes, every context's buffers summed, as llama-server allocates them."""
    path = str(resolve("qwen3-5-35b-a3b").gguf_for_llama())
    row, card, host, run = started(path, n_ctx, spec="draft-mtp", **({"n_seq": n_seq} if n_seq else {}))
    assert "--spec-type draft-mtp" in " ".join(run.argv) and "creating MTP draft context" in run.log
    # 1 + 3 rollback planes a sequence; the MTP layer's KV beside the 10 full-attention layers' (llama-server's log)
    assert round(row.parts.recurrent / MIB, 2) == (1005.00 if n_seq is None else 251.25)
    assert round(row.parts.kv / MIB, 2) == (2816.00 if n_ctx == 131072 else 176.00)
    assert_matches(row, card, host)


@needs_tools
@pytest.mark.parametrize("ngl", [None, 2])
def test_glm45_twin_with_its_nextn_layer(ngl):
    """A GLM-4.5-Air-shaped twin (46 layers + 1 NextN): -ngl 2 puts the NextN layer (weights and the MTP
    context's KV) and the output layer on the card, every trunk layer on the host."""
    path = str(resolve("glm-4-5-air").gguf_for_llama())
    row, card, host, _ = started(path, 8192, spec="draft-mtp", n_seq=1,
                                 **({"n_gpu_layers": [ngl]} if ngl else {}))
    assert_matches(row, card, host)
    if ngl == 2:
        assert round(card.kv / MIB, 2) == 32.00 and round(host.kv / MIB, 2) == 1472.00


@needs_tools
@pytest.mark.parametrize("n_seq", [1, None])
def test_a_real_draft_pair(qwen, n_seq):
    """-md: a real Qwen2.5-Coder-0.5B Q4_K_M drafting for itself (--spec-type draft-simple): the draft's weights,
    its context at the target's cells and slots and its compute, beside the target's, as llama-server allocates."""
    row, card, host, run = started(str(qwen), 8192, spec="draft-simple", model_draft=str(qwen),
                                   **({"n_seq": n_seq} if n_seq else {}))
    assert f"-md {qwen}" in " ".join(run.argv) and "--spec-type draft-simple" in " ".join(run.argv)
    assert round(card.kv / MIB, 2) == 192.00  # 96.00 MiB each, target and draft (llama-server's log)
    assert_matches(row, card, host, lines=2)


@pytest.fixture(scope="module")
def eagle3_head(qwen, tmp_path_factory):
    """An EAGLE3 head for the real Qwen2.5-Coder-0.5B (tests/support/eagle3.py): its width and tokenizer, the
    target's token embeddings and output borrowed."""
    return write_eagle3(qwen, tmp_path_factory.mktemp("eagle3") / "eagle3-qwen2.5-coder-0.5b.gguf")


@needs_tools
@pytest.mark.parametrize("n_seq", [1, None])
def test_an_eagle3_head_beside_its_target(qwen, eagle3_head, n_seq):
    """-md HEAD --spec-type draft-eagle3: the head's weights, its one layer's KV at the target's cells, and its
    context's compute as llama-server reserves it last (n_batch outputs, the sampler chains on the device), made
    against the target's context, beside the target's own: every context's buffers summed."""
    row, card, host, run = started(str(qwen), 8192, spec="draft-eagle3", model_draft=str(eagle3_head),
                                   spec_type="draft-eagle3",
                                   **({"n_seq": n_seq} if n_seq else {}))
    assert "adding speculative implementation 'draft-eagle3'" in run.log
    assert round(card.kv / MIB, 2) == 100.00  # 96.00 MiB the target's, 4.00 the head's one layer (its log)
    assert_matches(row, card, host, lines=2)


@needs_tools
def test_gpt_oss_twin_swa_with_sinks_split_across_card_and_host():
    path = str(resolve("gpt-oss-20b").gguf_for_llama())
    row, card, host, _ = started(path, 32768, n_gpu_layers=[9], n_seq=1)
    assert row.host.kv > 0 and row.parts.kv > 0
    assert_matches(row, card, host)


def test_the_printed_llama_call_allocates_what_fit_sized(gemma):
    """--runtime llama-cpp-python: the printed Llama() call, run in a fresh interpreter, creates the context the
    fit sized (one sequence, n_batch 512, outputs for a whole batch): KV to the byte, compute to 3% or 5 MiB."""
    record = lb.fit(str(gemma), n_ctx=8192, ram="8GiB", cpu_only=True, runtime="llama-cpp-python",
                    type_k="f16", type_v="f16")
    row = record.fit.rows[0]
    call = python_call(record.fit, row)
    done = subprocess.run([sys.executable, "-c", f"import llama_cpp\nllm = {call}\n"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    alloc = parse_allocations(done.stderr)  # Llama(verbose=True) logs llama.cpp's lines to stderr
    assert alloc.kv_bytes == row.parts.kv and round(row.parts.kv / MIB, 2) == 39.00  # 1 sequence: SWA 1,024 cells
    assert compute_close(row.parts.compute, alloc.compute_and_output_bytes)
