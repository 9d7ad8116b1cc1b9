"""The parent side of the child protocol: start `llama.child` with a job, stream its events back.

Every event is a JSON object with an "event" key. The child is started in its own session and
killed with its whole group on Ctrl-C, so no llama.cpp process outlives the command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

STDERR_TAIL = 1500


@dataclass(frozen=True)
class ChildExit:
    returncode: int
    failure: str | None  # the child's own "failed" reason, else how it died, else None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.failure is None


def signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def run_child(job: dict, on_event: Callable[[dict], None]) -> ChildExit:
    """Run one job in a child; `on_event` sees every event but "failed" (which ends up in ChildExit)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "llamabench.llama.child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    failure = None
    try:
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            if event.get("event") == "failed":
                failure = str(event.get("reason"))
            else:
                on_event(event)
        proc.wait()
    except BaseException:  # Ctrl-C, or an error in on_event: never leave the child behind
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    stderr = proc.stderr.read() if proc.stderr else ""
    if failure is None and proc.returncode != 0:
        tail = " ".join(stderr.strip().splitlines()[-3:])[-STDERR_TAIL:]
        failure = f"child process {signal_name(proc.returncode)}" + (f": {tail}" if tail else "")
    return ChildExit(proc.returncode, failure)
