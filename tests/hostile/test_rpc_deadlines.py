"""Every RPC exchange has a deadline (issue 33): llama.cpp's RPC client waits for ever on a host that stops
answering, so the tool bounds each step it hands to llama.cpp over --rpc (LLAMABENCH_RPC_TIMEOUT) and stops
the child that waits. The hosts are hostile fakes on 127.0.0.1 (tests/support/fake_rpc.py)."""

from __future__ import annotations

import json
import time

import psutil
import pytest

from llamabench.cli import main
from llamabench.llama import rpc
from tests.support.fake_rpc import GRAPH_COMPUTE, SET_TENSOR, FakeRpcHost, device_count, device_memory

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not rpc.available(), reason="llama-cpp-python was built without the RPC backend")]


def error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("llamabench: error: ")]
    assert len(err) == 1, err
    return err[0]


def no_children_left() -> None:
    gone, alive = psutil.wait_procs(psutil.Process().children(recursive=True), timeout=10)
    assert alive == [], [p.cmdline() for p in alive]


def test_fit_on_a_host_that_stalls_after_its_memory_report_ends_in_one_line(gemma, capsys, monkeypatch):
    monkeypatch.setenv("LLAMABENCH_RPC_TIMEOUT", "4")
    with rpc.emulated_card() as card, FakeRpcHost(answered=3, upstream=card) as host:
        started = time.monotonic()
        assert main(["fit", str(gemma), "--rpc", host.endpoint, "--vram", "1GiB", "-c", "4096", "-ctk", "f16",
                     "-ctv", "f16", "--reserve", "0"]) == 1
        took = time.monotonic() - started
        assert host.connections >= 4  # the reach check and the memory query (2) answered, the dry run not
    line = error_line(capsys)
    assert "got no answer" in line and host.endpoint in line and "LLAMABENCH_RPC_TIMEOUT" in line, line
    assert took < 60  # one deadline, not one per context tried
    no_children_left()


def test_bench_on_a_host_that_accepts_and_never_answers_ends_in_one_line(gemma, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LLAMABENCH_RPC_TIMEOUT", "3")
    with FakeRpcHost() as host:
        started = time.monotonic()
        assert main(["bench", str(gemma), "--rpc", host.endpoint, "-ngl", "99", "-p", "16", "-n", "4", "-r", "1",
                     "--results", str(tmp_path / "r.jsonl")]) == 1
        assert time.monotonic() - started < 30
    line = error_line(capsys)
    assert "did not report its memory in 3 s" in line, line
    no_children_left()


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "1e9"])
def test_a_bad_rpc_timeout_is_one_line(gemma, capsys, monkeypatch, value):
    monkeypatch.setenv("LLAMABENCH_RPC_TIMEOUT", value)
    with FakeRpcHost() as host:
        assert main(["fit", str(gemma), "--rpc", host.endpoint, "--vram", "1GiB", "-c", "4096"]) == 2
    assert "LLAMABENCH_RPC_TIMEOUT" in error_line(capsys)


def test_bench_on_a_host_that_stalls_in_the_middle_ends_in_one_line_keeping_what_it_measured(gemma, capsys,
                                                                                              monkeypatch, tmp_path):
    """The host relays the model load and the first decodes to a real emulated card, then stops answering at a
    graph computation in the middle of the bench: the child showed progress (load beats, fill chunks, repetitions)
    until then, so the wait for the next one ends, and the bench ends in one line, the child stopped."""
    monkeypatch.setenv("LLAMABENCH_RPC_TIMEOUT", "20")  # the steps before the stall must not meet it, under load
    results = tmp_path / "r.jsonl"
    with rpc.emulated_card() as card, FakeRpcHost(answered=1000, upstream=card, stall_at=(GRAPH_COMPUTE, 12)) as host:
        started = time.monotonic()
        code = main(["bench", str(gemma), "--rpc", host.endpoint, "-ngl", "99", "-p", "16", "-n", "4", "-r", "3",
                     "-d", "0,64", "-c", "1024", "--results", str(results)])
        took = time.monotonic() - started
        assert host.requests >= 12
    line = error_line(capsys)
    assert code == 1 and "got no answer from the devices" in line and "measured before it are kept" in line, line
    assert took < 120
    no_children_left()
    assert [json.loads(line).get("reason") for line in results.read_text().splitlines()][0] is None  # pp16 kept


def test_fit_verify_on_a_host_that_stalls_loading_the_weights_ends_its_check_in_one_line(gemma, capsys, monkeypatch):
    """The dry runs go through (they upload no weights); the host stalls at the first tensor the real context
    uploads: --verify says so for that row and creates no other, the fit's answer stands, and no child is left."""
    monkeypatch.setenv("LLAMABENCH_RPC_TIMEOUT", "20")  # the steps before the stall must not meet it, under load
    with rpc.emulated_card() as card, FakeRpcHost(answered=1000, upstream=card, stall_at=(SET_TENSOR, 1)) as host:
        started = time.monotonic()
        code = main(["fit", str(gemma), "--rpc", host.endpoint, "--vram", "1GiB", "-c", "4096", "-ctk", "f16",
                     "-ctv", "f16", "--reserve", "0", "--verify"])
        took = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == 1 and "got no answer from the devices" in out and "-> fits" in out, out[-1500:]
    assert took < 120
    no_children_left()


@pytest.mark.parametrize("claims, said", [
    (device_count(2**32 - 1), "claims more devices|offers 4294967295 devices"),
    (device_count(0), "offers no device"),
    (device_memory(2**64 - 1, 2**64 - 1), "not a device's memory"),
    (device_memory(2 * 2**30, 2**30), "free above total"),
], ids=["2^32-devices", "no-device", "2^64-free", "free-above-total"])
def test_a_host_that_claims_absurd_devices_or_memory_is_refused_in_one_line(gemma, capsys, claims, said):
    """The host speaks llama.cpp's protocol (a real emulated card behind it) but lies in its answers to the device
    count or the memory query: refused in one line, the memory query's heap bounded, no child left."""
    import re

    with rpc.emulated_card() as card, FakeRpcHost(answered=1000, upstream=card, claims=claims) as host:
        started = time.monotonic()
        code = main(["fit", str(gemma), "--rpc", host.endpoint, "--vram", "1GiB", "-c", "4096", "-ctk", "f16",
                     "-ctv", "f16"])
        took = time.monotonic() - started
    line = error_line(capsys)
    assert code == 1 and re.search(said, line) and host.endpoint in line, line
    assert "GiB free" not in line and took < 120
    no_children_left()


def test_a_host_that_dies_in_the_middle_of_a_bench_is_named_not_the_repack(gemma, capsys, tmp_path):
    """llama.cpp's RPC client aborts when its host hangs up: the failed tests name the host, quote no backtrace,
    and do not send the user to --repack alone."""
    from llamabench.records.records import read_records

    results = tmp_path / "r.jsonl"
    with rpc.emulated_card() as card, FakeRpcHost(answered=1000, upstream=card, stall_at=(GRAPH_COMPUTE, 6),
                                                  hang_up=True) as host:
        main(["bench", str(gemma), "--rpc", host.endpoint, "-ngl", "99", "-p", "16", "-n", "4", "-r", "3",
              "-c", "1024", "--results", str(results)])
    failed = [r for r in read_records(results).records if r.reason]
    assert failed, "the host hung up: some test must have failed"
    for record in failed:
        assert host.endpoint in record.reason and "backtrace" not in record.reason.lower(), record.reason
        assert "#0 " not in record.reason and "gdb" not in record.reason.lower(), record.reason
    no_children_left()
