"""The processes llamabench starts for llama.cpp (children, the emulated card): ended by their group, and
ending themselves when their parent dies. One copy of each rule."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys


def die_with_parent() -> None:
    """Linux: end this process when its parent dies (it runs in a session of its own)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except OSError:
            pass


def stop_group(proc: subprocess.Popen, grace_s: float = 0.0) -> None:
    """End a process started with start_new_session and all it started: SIGTERM and `grace_s` to go
    (an RPC server may ignore it), then SIGKILL."""
    if proc.poll() is not None:
        return
    try:
        if grace_s > 0:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
                return
            except subprocess.TimeoutExpired:
                pass
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
