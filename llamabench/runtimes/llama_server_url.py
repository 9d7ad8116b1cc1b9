"""A llama-server already running at a URL (`bench --url`): timed over its HTTP API, never started or stopped.

It created its context itself: what it allocated is its own log's, and the fit's line is the one that would
start such a server (llama_server.py). Its records name the program, llama-server.
"""

from __future__ import annotations

from ..settings.values import Runtime
from .llama_server import llama_server_command
from .runtime import BenchDriver, ProgramRuntime

LLAMA_SERVER_URL = ProgramRuntime(Runtime.LLAMA_SERVER, "a llama-server running at a URL", BenchDriver.ATTACHED,
                                  llama_server_command)
