"""Every runtime, and the one that answers for a fit's sizing or a bench's plan."""

from __future__ import annotations

from ..memory.fit_result import FitResult
from ..memory.placement import FitRow
from ..memory.runtimes import RuntimeConfig
from ..settings.values import Runtime
from .llama_cpp_python import LLAMA_CPP_PYTHON
from .llama_server import LLAMA_SERVER
from .llama_server_url import LLAMA_SERVER_URL
from .runtime import ProgramRuntime

RUNTIMES = (LLAMA_CPP_PYTHON, LLAMA_SERVER, LLAMA_SERVER_URL)
BY_NAME = {r.name: r for r in RUNTIMES if r is not LLAMA_SERVER_URL}  # --runtime NAME; --url attaches


def runtime_of(config: RuntimeConfig) -> ProgramRuntime:
    """The runtime a fit sized."""
    return BY_NAME[Runtime(config.runtime)]


def bench_runtime(serves: bool, url: str | None = None) -> ProgramRuntime:
    """The runtime a bench plan times: Llama(), a llama-server it starts, or the one at `url`."""
    if not serves:
        return LLAMA_CPP_PYTHON
    return LLAMA_SERVER_URL if url else LLAMA_SERVER


def run_line(result: FitResult, row: FitRow) -> str:
    """What to run for this row: the line of the runtime the fit was sized for."""
    return runtime_of(result.runtime).command(result, row)
