"""At the door, round 2: what a new user met, each held here. GPU defaults, readable advice where llama.cpp dies,
small facts (-c 0 in fit, a context past the trained one, a misspelt card), and -hf without a network."""

from __future__ import annotations

import signal
import time
from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from llamabench.cli import main
from llamabench.jobs.bench import plan
from llamabench.jobs.bench.runner import _failure
from llamabench.llama import serving
from llamabench.settings.params import Params
from llamabench.settings.sweep import parse_value
from llamabench.settings.values import ALL_LAYERS


def test_bench_puts_every_layer_on_the_gpu_where_there_is_one(monkeypatch):
    """llama-bench's default is every layer on the GPU: a plain bench on a CUDA build times the GPU, not the CPU."""
    monkeypatch.setattr(plan.ggml_devices, "supports_gpu_offload", lambda: True)
    assert plan.default_gpu_layers(rpc=False) == ALL_LAYERS
    monkeypatch.setattr(plan.ggml_devices, "supports_gpu_offload", lambda: False)
    assert plan.default_gpu_layers(rpc=False) == 0 and plan.default_gpu_layers(rpc=True) == ALL_LAYERS


def test_ngl_takes_all_and_auto_as_llama_cpp_does():
    assert parse_value("n_gpu_layers", "all", listed=True) == (ALL_LAYERS,)
    assert parse_value("n_gpu_layers", "12,all", listed=True) == (12, ALL_LAYERS)
    assert parse_value("n_gpu_layers", "auto", listed=False) == ALL_LAYERS


def test_the_plan_says_where_the_layers_go(gemma, capsys):
    assert main(["bench", str(gemma), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "layers: all on the CPU (-ngl 0): this build has no GPU backend" in out


@pytest.mark.parametrize("repack, says", [(True, "llama.cpp killed by SIGILL: rerun with --repack 0"),
                                          (False, "killed by SIGILL")])
def test_a_child_killed_by_a_fault_says_the_remedy_first_on_one_line(repack, says):
    child = SimpleNamespace(failure="killed by SIGILL", returncode=-signal.SIGILL, stalled=False)
    reason = _failure(child, Params(repack=repack), None)
    assert reason.startswith(says) and "\n" not in reason


def test_llama_server_killed_before_it_listened_is_one_readable_line():
    assert serving.exit_words(-signal.SIGILL) == "was killed by SIGILL"
    assert "rerun with -nr" in serving.signal_advice(-signal.SIGILL) and not serving.signal_advice(-signal.SIGTERM)
    assert not serving.signal_advice(-signal.SIGSEGV, ("llama-server", "-nr"))  # already off: no such advice
    assert serving.last_lines("a\n\nb\nc\n") == "b | c"


def test_fit_c_0_is_the_trained_context(gemma, capsys):
    """fit --help says -c 0 is the trained length, as llama.cpp reads n_ctx 0: so it is."""
    assert main(["fit", str(gemma), "-c", "0", "--vram", "4GiB", "-ctk", "f16", "-ctv", "f16"]) == 0
    out = capsys.readouterr().out
    assert "fit at n_ctx 32768; trained context 32,768" in out and "32768 (trained)" in out


def test_a_context_past_the_trained_one_is_not_called_trained(gemma, capsys):
    """Gemma 3 270M is trained on 32,768: a fit asked 131072 that holds it says so, not "131072 (trained)"."""
    assert main(["fit", str(gemma), "-c", "131072", "--vram", "4GiB", "-ctk", "q8_0", "-ctv", "q8_0"]) == 0
    out = capsys.readouterr().out
    assert "131072 (trained)" not in out and "131072 (asked)" in out


def test_a_misspelt_card_gets_its_name_suggested(capsys):
    with pytest.raises(SystemExit) as exit_:  # argparse's own exit: 2
        main(["fit", "qwen3-5-35b-a3b", "--vram", "rtx4090"])
    assert exit_.value.code == 2 and "did you mean rtx-4090?" in capsys.readouterr().err


def test_an_unreachable_hub_fails_in_one_quiet_line_at_once(monkeypatch, capsys):
    """Offline (nothing listening), -hf names the host and its reason in one line, without the hub client's minute
    of "Retrying in 8s" lines."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    start = time.monotonic()
    assert main(["fit", "-hf", "unsloth/Qwen3-8B-GGUF:Q4_K_M"]) != 0
    err = capsys.readouterr().err
    assert time.monotonic() - start < 10 and "Retrying" not in err and len(err.strip().splitlines()) == 1
    assert "127.0.0.1:9 cannot be reached" in err


def test_a_report_of_two_runs_keeps_each_records_numbers_its_own(gemma, tmp_path):
    """report runA.jsonl runB.jsonl, one run with f16 KV and one with q8_0 at -c 36 (llama.cpp pads it to 256):
    the layout, the theory table and record.json all speak of the f16 base, and the record is measured."""
    import json

    import llamabench as lb
    from llamabench.records.bench import BenchRecord
    from llamabench.records.records import append
    from llamabench.settings.bench_tests import BenchTest, TestKind

    ref = lb.inspect(str(gemma), n_ctx=256).model
    files = []
    for kv in ("f16", "q8_0"):
        path = tmp_path / f"run-{kv}.jsonl"
        for test in (BenchTest(TestKind.PP, 32, 0), BenchTest(TestKind.TG, 4, 0)):
            append(path, BenchRecord(model=ref, params=Params(n_ctx=36, type_k=kv, type_v=kv, n_threads=2),
                                     test=test, repetitions=2, samples_ns=(500_000_000, 520_000_000)))
        files.append(path)
    report = lb.report(files, out_dir=tmp_path / "out")
    (model,) = report.models
    record = json.loads((tmp_path / "out" / "record.json").read_text())
    record = record[0] if isinstance(record, list) else record
    assert (record["type_k"], record["type_v"]) == ("f16", "f16") and record["kv_bytes_per_token"] == 3072
    assert "no timed run" not in json.dumps(record) and record["measured_decode_tok_s"] is not None
    assert "= 3,072 B/token" in (tmp_path / "out" / "report.md").read_text()


def test_a_noisy_series_is_marked_where_its_numbers_are_shown(gemma):
    """t/s that varied by more than 10% between repetitions: marked in the table, named in the one warning (the
    bench's and the demo's)."""
    import llamabench as lb
    from llamabench.records.bench import BenchRecord
    from llamabench.render.bench import speed_table, variance_warning
    from llamabench.settings.bench_tests import BenchTest, TestKind

    ref = lb.inspect(str(gemma), n_ctx=256).model
    steady, noisy = (BenchRecord(model=ref, params=Params(n_ctx=256), test=BenchTest(TestKind.TG, 4, depth),
                                 repetitions=2, samples_ns=samples)
                     for depth, samples in ((0, (500_000_000, 510_000_000)), (128, (500_000_000, 900_000_000))))
    table = speed_table([steady, noisy], "md")
    assert table.count("(noisy)") == 1 and "tg4 @ d128" in variance_warning([steady, noisy])
    assert variance_warning([steady]) is None
    # the report's speed model is fitted on the depths bench did not mark noisy: the noisy one is said to be noisy
    # there too, and left out
    from dataclasses import replace

    from llamabench.records.bench import Roofline
    from llamabench.reporting.build import _roofline_md, roofline_series

    roof = lambda kv: Roofline(200_000_000 + kv, 200_000_000, kv, 0, kv * 10, "test", 200_000_000 + 4 * kv, kv)  # noqa: E731
    md = _roofline_md(roofline_series([replace(steady, roofline=roof(1000)), replace(noisy, roofline=roof(9000))]))
    assert "(left out)" in md and "1 noisy left out" in md and md.count("(noisy)") == 1
    # on a geometry twin, the full-GQA counterfactual is left out (round 3: a tiny twin's weights made full attention
    # look 2.7x faster than the real layout)
    twin = [replace(r, roofline=roof(kv)) for r, kv in ((steady, 1000), (noisy, 9000))]
    assert all(p["full_gqa"] is None for p in roofline_series(twin, twin=True)[0]["points"])
    assert all(p["full_gqa"] for p in roofline_series(twin)[0]["points"])


def test_the_deadlines_and_their_defaults_are_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "LLAMABENCH_HTTP_TIMEOUT" in out and "(default 120)" in out and "LLAMABENCH_RPC_TIMEOUT" in out


def test_a_sweeps_layers_are_each_said_with_the_experts_in_ram(capsys):
    """-ngl 0,all read "-ngl 0, 999 on the GPU", and --n-cpu-moe went unsaid."""
    assert main(["bench", "qwen3-30b-a3b", "-ngl", "0,all", "-ncmoe", "2", "--dry-run"]) == 0
    layers = next(line for line in capsys.readouterr().out.splitlines() if "layers:" in line)
    assert "all on the CPU (-ngl 0); all on the GPU (-ngl all" in layers
    assert "the routed experts of layers 0-1 in system RAM (--n-cpu-moe 2)" in layers


def test_a_server_killed_with_repack_already_off_gets_no_repack_advice(gemma, tmp_path, capsys):
    """A llama-server that dies by SIGSEGV though -nr is on its line: what died and when, first, and no advice to
    turn off what is off."""
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'loading model'\necho 'ggml: something else broke'\nkill -SEGV $$\n")
    fake.chmod(0o755)
    results = tmp_path / "r.jsonl"
    assert main(["bench", str(gemma), "--runtime", "llama-server", "--server-bin", str(fake), "--repack", "0",
                 "-p", "8", "-n", "0", "-r", "1", "--results", str(results)]) in (0, 1)
    reason = next(r for r in lb_records(results)).reason
    assert reason.startswith("llama-server killed by SIGSEGV; before it listened") and "rerun with -nr" not in reason
    assert "something else broke" in reason and "\n" not in reason


def lb_records(path):
    from llamabench.records.records import read_records

    return read_records(path).records


def test_n_cpu_moe_0_in_a_sweep_is_every_layer_on_the_card():
    """-ncmoe 0-40+10 read "experts of layers 0--1 in RAM (--n-cpu-moe 0)"."""
    from llamabench.jobs.fit.advice import describe_one
    from llamabench.memory.placement import Placement, PlacementKind

    assert describe_one(Placement(PlacementKind.N_CPU_MOE, 0), 40) == "all layers on the card (--n-cpu-moe 0)"
    assert describe_one(Placement(PlacementKind.N_CPU_MOE, 1), 40) == "experts of layer 0 in RAM (--n-cpu-moe 1)"


def test_a_value_given_twice_in_a_list_is_one_configuration():
    assert parse_value("n_gpu_layers", "all,auto", listed=True) == (ALL_LAYERS,)
    assert parse_value("n_ctx", "4096,4k,8192", listed=True) == (4096, 8192)


def test_cpu_only_rows_say_what_ram_holds_and_what_would_fit(gemma, capsys):
    """--cpu-only --ram 4GiB: "RAM now" read 0.00 and "RAM grows to" left the model out; nothing fitting (llama-server's
    8 GiB prompt cache) came with no word of what would."""
    assert main(["fit", str(gemma), "-c", "4096", "--cpu-only", "--ram", "4GiB", "-ctk", "f16", "-ctv", "f16"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("f16/f16"))
    total, now, grows = row.split()[10:13]  # after K/V, the placement (4 words) and the five parts
    assert now == total and float(grows) > float(total)
    assert "nothing fits" in out and "would fit)" in out


def test_cli_errors_name_the_command_once_and_take_a_negative_size(capsys):
    """`report a.jsonl -o x` said "llamabench: error: llamabench: ..." and sent to the top help; `--vram -3GiB`
    said "expected one argument"; roofline spoke the API's words."""
    for argv, says in ((["report", "a.jsonl", "-o", "x"], "llamabench: error: unrecognized arguments: -o x "
                                                          "(see llamabench report --help)"),
                       (["fit", "gemma-3-27b", "--vram", "-3GiB"], "'-3GiB' must be positive"),
                       (["roofline", "gemma-3-27b", "--tflops", "10"], "--tflops goes with --bandwidth")):
        with pytest.raises(SystemExit) if argv[0] != "roofline" else nullcontext():
            main(argv)
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
