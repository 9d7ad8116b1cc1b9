"""llama.cpp's own programs as the judge: start a printed `llama-server` line for real and read what it allocated.

The tools come from `scripts/build_llama_tools.sh` (`make tools`, which `make test` runs first: llama-server,
ggml-rpc-server, llama-bench, llama-fit-params built from the vendored llama.cpp); their bin folder is
`$LLAMABENCH_LLAMA_TOOLS`, or `~/.cache/llama-tools/<llama-cpp-python version>/bin` where the script puts it.
llama-server prints its allocation lines at `-lv 4`; it is started as the tool starts it (`llama.serving.started`:
on 127.0.0.1), read once its /health answers (or it exits), and stopped by its process group.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from llamabench.core.errors import EngineError
from llamabench.llama.process import stop_group
from llamabench.llama.rpc import accepts, free_port
from llamabench.llama.serving import started
from llamabench.memory.allocations import Allocations, parse_allocations
from llamabench.world.versions import LLAMA_CPP_PYTHON_VERSION

TOOLS_ENV = "LLAMABENCH_LLAMA_TOOLS"
VULKAN_TOOLS_ENV = "LLAMABENCH_LLAMA_TOOLS_VULKAN"


def tools_dir() -> Path | None:
    """The bin folder holding llama-server and ggml-rpc-server, or None where they are not built."""
    candidates = [Path(os.environ[TOOLS_ENV])] if os.environ.get(TOOLS_ENV) else []
    candidates.append(Path.home() / ".cache" / "llama-tools" / LLAMA_CPP_PYTHON_VERSION / "bin")
    for folder in candidates:
        if (folder / "llama-server").is_file() and (folder / "ggml-rpc-server").is_file():
            return folder
    return None


def vulkan_tools_dir() -> Path | None:
    """The bin folder of a Vulkan build of the tools (`BACKEND=vulkan build_llama_tools.sh`), or None."""
    candidates = [Path(os.environ[VULKAN_TOOLS_ENV])] if os.environ.get(VULKAN_TOOLS_ENV) else []
    candidates.append(Path.home() / ".cache" / "llama-tools" / f"{LLAMA_CPP_PYTHON_VERSION}-vulkan" / "bin")
    for folder in candidates:
        if (folder / "llama-server").is_file() and (folder / "libggml-vulkan.so").is_file():
            return folder
    return None


@contextmanager
def rpc_server(bin_dir: Path, n_threads: int = 1, timeout_s: float = 30.0, ledger: Path | None = None):
    """llama.cpp's own ggml-rpc-server on a free port of 127.0.0.1 (an emulated card); yields "127.0.0.1:PORT".
    `ledger`: a file where the server writes each buffer it allocates and frees (`GGML_RPC_DEBUG`), the card's
    own account of its memory (`card_peak`)."""
    port = free_port()
    argv = [str(bin_dir / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port), "-t", str(n_threads)]
    env = {**os.environ, "GGML_RPC_DEBUG": "1"} if ledger else None
    err = ledger.open("w") if ledger else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, env=env)
    finally:
        if ledger:
            err.close()
    try:
        deadline = time.monotonic() + timeout_s
        while not accepts(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise EngineError(f"ggml-rpc-server did not listen on 127.0.0.1:{port}")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        stop_group(proc, grace_s=1.0)


# ggml-rpc.cpp's rpc_server::alloc_buffer and ::free_buffer, logged with GGML_RPC_DEBUG set (ggml-rpc.cpp:1259, 1293)
_ALLOC = re.compile(r"\[alloc_buffer\] device: (\d+), size: \d+ -> remote_ptr: ([0-9a-f]+), remote_size: (\d+)")
_FREE = re.compile(r"\[free_buffer\] remote_ptr: ([0-9a-f]+)")


def card_peak(ledger: Path) -> int:
    """The most bytes the emulated card held at once, from its server's ledger: what a real card of that size
    must hold, whatever the client's log says (a buffer reserved twice is one buffer)."""
    live: dict[str, int] = {}
    peak = 0
    for line in ledger.read_text(errors="replace").splitlines():
        if m := _ALLOC.search(line):
            live[m[2]] = int(m[3])
            peak = max(peak, sum(live.values()))
        elif m := _FREE.search(line):
            live.pop(m[1], None)
    return peak


@dataclass(frozen=True)
class ServerRun:
    """What one llama-server start allocated, from its own log."""

    argv: tuple[str, ...]
    allocations: Allocations
    log: str
    ready: bool  # its /health answered "ok"


def run_printed_command(command: str, bin_dir: Path, *, rpc: list[str] | None = None, extra: tuple[str, ...] = (),
                        timeout_s: float = 180.0) -> ServerRun:
    """Start `command` (a line `fit` printed, beginning with llama-server) with the allocation log on, on the
    given RPC devices, until its /health answers; stop it and parse what it allocated."""
    argv = shlex.split(command)
    if not argv or argv[0] != "llama-server":
        raise EngineError(f"not a llama-server command: {command!r}")
    # the RPC devices first: llama.cpp registers them as it reads --rpc, and -devd names them
    devices = ["--rpc", ",".join(rpc)] if rpc else []
    argv = [str(bin_dir / "llama-server"), *devices, *argv[1:], *extra]
    # the tool's own start (`llama.serving.started`: -lv 4, a free port, its log through a handle of its own, read
    # once /health answers, its group stopped after); a copy of it here once read its log through the handle the
    # server wrote through, and a seek(0) made the server write over the log's start
    try:
        with started(argv, timeout_s=timeout_s) as server:
            log = server.log()
    except EngineError as exc:  # it died or never answered: what it said, in the error
        return ServerRun(tuple(argv), parse_allocations(str(exc)), str(exc), False)
    return ServerRun(server.argv or tuple(argv), parse_allocations(log), log, True)
