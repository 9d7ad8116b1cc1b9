"""No process outlives the tool, whatever signal ends it (issue 33): SIGTERM, SIGHUP and even SIGKILL of `fit
--verify` just after its emulated card (llama.cpp's RPC server, unauthenticated, on 127.0.0.1) starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from llamabench.core.errors import EngineError
from llamabench.llama.rpc import distinct_servers

pytestmark = pytest.mark.slow


def rpc_children(pid: int) -> list[psutil.Process]:
    try:
        return [c for c in psutil.Process(pid).children(recursive=True)
                if "llamabench.llama.rpc" in " ".join(c.cmdline())]
    except psutil.Error:
        return []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_the_emulated_card_dies_with_the_tool(gemma, tmp_path, signum):
    argv = [sys.executable, "-m", "llamabench.cli", "fit", str(gemma), "-c", "2048", "--vram", "2GiB", "--verify",
            "--emulate", "--results", str(tmp_path / "r.jsonl")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        seen: list[psutil.Process] = []
        while not seen and proc.poll() is None and time.monotonic() < deadline:
            seen = rpc_children(proc.pid)
            time.sleep(0.02)
        if not seen:
            pytest.skip("the fit ended before its emulated card was seen (nothing left to end)")
        os.kill(proc.pid, signum)  # at once: the card's child may still be importing llama.cpp
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs(seen, timeout=10)
        assert alive == [], [p.pid for p in alive]
        if signum != signal.SIGKILL:
            assert proc.returncode == 128 + signum and b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_one_server_named_twice_is_refused_before_llama_cpp_waits_on_itself():
    for twice in (("localhost:50052", "127.0.0.1:50052"), ("127.0.0.1:50052", "0.0.0.0:50052"),
                  ("127.0.0.1:50052", "127.0.1.1:50052"), ("[::1]:50052", "127.0.0.1:50052")):
        with pytest.raises(EngineError, match="name one server"):
            distinct_servers(twice)  # a server bound to 0.0.0.0 answers on every address of this machine
    distinct_servers(("127.0.0.1:50052", "127.0.0.1:50053"))  # two servers: fine


def test_ctrl_c_in_the_demo_stops_it_there_with_130_and_no_report(gemma, tmp_path):
    """Ctrl-C during the demo's bench keeps what was measured and ends the demo at once: exit 130, no report step,
    no report written (round 3 saw it go on to the report and exit 1)."""
    from llamabench.records.bench import BenchRecord
    from llamabench.records.records import read_records

    out = tmp_path / "demo"
    argv = [sys.executable, "-m", "llamabench.cli", "demo", str(gemma), "-c", "4096",
            "-d", "0,256,512,768,1024,1280,1536,1792,2048", "-p", "16", "-n", "2", "-r", "1", "-t", "1",
            "--out-dir", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a terminal's Ctrl-C
    try:
        deadline = time.monotonic() + 600  # however loaded the machine; only a hung run meets it
        results = out / "results.jsonl"
        while proc.poll() is None and time.monotonic() < deadline:
            if results.exists() and any(isinstance(r, BenchRecord) for r in read_records(results).records):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the demo ended before its bench measured anything"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "step 5/5" not in err and not (out / "report.md").exists() and "Traceback" not in err
    assert any(isinstance(r, BenchRecord) for r in read_records(out / "results.jsonl").records)  # kept
