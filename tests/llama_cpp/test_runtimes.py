"""The runtimes' contexts, as llama-server and Llama() create them (pure): slots, outputs, host RAM bounds."""

from __future__ import annotations

import pytest

from llamabench.cli import main
from llamabench.core import serial
from llamabench.core.errors import UsageError
from llamabench.core.units import MIB
from llamabench.memory.fit_result import FitResult
from llamabench.memory.footprint import compute_footprint
from llamabench.memory.runtimes import Runtime, RuntimeConfig, checkpoint_bytes, server_ram
from llamabench.model.layout import geometry_from_metadata
from llamabench.settings.params import Params
from tests.pure.test_render import fit_result
from tests.support.metadata import model

# Gemma 3 270M's layout: 18 layers, 5 of 6 SWA (window 512), 1 KV head x 256
GEMMA = geometry_from_metadata(model("gemma3", block_count=18, context_length=32768, embedding_length=640,
                                     attention__head_count=4, attention__head_count_kv=1, attention__key_length=256,
                                     attention__value_length=256, attention__sliding_window=512))
SERVER, PYTHON = RuntimeConfig(), RuntimeConfig(Runtime.LLAMA_CPP_PYTHON)


def test_llama_server_default_is_four_unified_slots_with_their_outputs():
    s = SERVER.context(Params(n_ctx=32768))
    assert (s.n_seq, s.kv_unified, s.n_outputs_max, s.n_outputs_max_per_seq, s.swa_full) == (4, True, 4, 1, False)
    assert (s.n_batch, s.n_ubatch) == (2048, 512)
    np1 = RuntimeConfig(n_parallel=1).context(Params(n_ctx=32768))
    assert (np1.n_seq, np1.kv_unified, np1.n_outputs_max) == (1, False, 1)
    np4 = RuntimeConfig(n_parallel=4).context(Params(n_ctx=32768))
    assert (np4.n_seq, np4.kv_unified) == (4, False)  # -np given: unified only with -kvu
    assert RuntimeConfig(n_parallel=4, kv_unified=True).context(Params()).kv_unified


def test_llama_cpp_python_is_one_sequence_outputs_for_a_batch():
    s = PYTHON.context(Params(n_ctx=32768, n_ubatch=512))
    assert (s.n_seq, s.kv_unified, s.n_batch, s.n_ubatch, s.n_outputs_max) == (1, False, 512, 512, 0)
    assert PYTHON.context(Params(n_ctx=256)).n_batch == 256  # Llama(): n_batch = min(n_ctx, 512)


def test_the_one_line_difference_in_kv_for_the_same_model():
    # the numbers: llama-server 133.50 MiB (SWA 2,560 cells), Llama() 111.00 MiB (1,024 cells)
    server = compute_footprint(GEMMA, SERVER.context(Params(n_ctx=32768)))
    python = compute_footprint(GEMMA, PYTHON.context(Params(n_ctx=32768)))
    assert server.shape.swa_cells == 2560 and python.shape.swa_cells == 1024
    assert server.kv_bytes / MIB == 133.5 and python.kv_bytes / MIB == 111.0


def test_checkpoints_are_bounded_by_their_count():
    s = compute_footprint(GEMMA, SERVER.context(Params(n_ctx=32768)))
    one = checkpoint_bytes(GEMMA, s)
    assert one == 512 * 15 * 2 * 256 * 2  # the unmasked window of one sequence, 15 SWA layers, K and V
    ram = server_ram(GEMMA, s, SERVER)
    # a chat of many turns checkpoints at each last user message: the spacing rule thins them only when full
    assert ram.checkpoints_per_slot == 32 and ram.checkpoints == 4 * 32 * one
    assert ram.prompt_cache == 8192 * MIB and ram.total == ram.prompt_cache + ram.checkpoints
    unlimited = server_ram(GEMMA, s, RuntimeConfig(cache_ram_mib=-1))  # only its n_ctx token limit holds it
    assert unlimited.prompt_cache_unlimited and unlimited.prompt_cache == 32768 * 3 * 256 * 2 * 2
    few = server_ram(GEMMA, s, RuntimeConfig(ctx_checkpoints=2, cache_ram_mib=0))
    assert few.checkpoints_per_slot == 2 and few.prompt_cache == 0
    assert server_ram(GEMMA, compute_footprint(GEMMA, PYTHON.context(Params(n_ctx=32768))), PYTHON).total == 0
    plain = geometry_from_metadata(model("llama", block_count=4, context_length=8192, embedding_length=256,
                                         attention__head_count=4, attention__head_count_kv=4))
    # it can roll back
    assert server_ram(plain, compute_footprint(plain, SERVER.context(Params(n_ctx=8192))), SERVER).checkpoints == 0


def test_the_command_spells_out_the_defaults_that_surprise():
    assert SERVER.server_flags(GEMMA) == ("-np", "4", "-kvu", "--cache-ram", "8192", "--ctx-checkpoints", "32")
    assert RuntimeConfig(n_parallel=1, cache_ram_mib=0).server_flags(GEMMA)[:4] == ("-np", "1", "--cache-ram", "0")
    assert PYTHON.server_flags(GEMMA) == ()


def test_a_fit_record_from_before_runtimes_reads_as_one_llama_context():
    data = serial.to_dict(fit_result(2**30))
    del data["runtime"]
    assert serial.from_dict(FitResult, data).runtime.runtime is Runtime.LLAMA_CPP_PYTHON


def test_llama_takes_no_slots():
    with pytest.raises(UsageError, match="one sequence"):
        RuntimeConfig(Runtime.LLAMA_CPP_PYTHON, n_parallel=4)


@pytest.mark.parametrize("argv, message", [
    (["--runtime", "ollama"], "is not a runtime"),
    (["--cpu-only"], "give its size with --ram"),
    (["--runtime", "llama-cpp-python", "-np", "4"], "one sequence"),
    (["--cache-ram", "-5"], "cannot be negative"),
    (["--runtime", "llama-cpp-python", "--n-cpu-moe", "4"], "cannot keep experts in RAM"),
    (["--runtime", "llama-cpp-python", "--cache-ram", "0"], "are llama-server's"),
])
def test_bad_runtime_options_are_one_line(capsys, argv, message):
    try:
        code = main(["fit", "qwen3-30b-a3b", "--ctx", "4096", *argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    assert code != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
