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
    with pytest.raises(EngineError, match="name one server"):
        distinct_servers(("localhost:50052", "127.0.0.1:50052"))
    distinct_servers(("127.0.0.1:50052", "127.0.0.1:50053"))  # two servers: fine
