"""The processes llamabench starts for llama.cpp (children, the emulated card): ended by their group, and
ending themselves when their parent dies. One copy of each rule."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys


def die_with_parent(parent: int | None = None) -> None:
    """Linux: end this process when its parent dies (it runs in a session of its own); with `parent`, end it now
    if that parent is gone already (it died before the signal was armed)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if parent is not None and os.getppid() != parent:
        os._exit(1)


# The first thing a child does, before any heavy import: arm die-with-parent (so that a parent killed while the
# child still imports llama_cpp leaves nothing behind), then run the module as `python -m` would.
_GUARD = ("import runpy, sys\n"
          "from llamabench.llama.process import die_with_parent\n"
          "die_with_parent(int(sys.argv[1]))\n"
          "sys.argv = sys.argv[2:]\n"
          "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")


def child_argv(module: str, *args: str) -> list[str]:
    """The command line of a child running `module` (as `python -m module args`), its die-with-parent armed
    before anything else is imported."""
    return [sys.executable, "-c", _GUARD, str(os.getpid()), module, *args]


def child_env() -> dict[str, str]:
    """A child's environment: unbuffered output; an abort prints its assert line, not a gdb session."""
    return dict(os.environ, PYTHONUNBUFFERED="1", GGML_NO_BACKTRACE="1")


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
