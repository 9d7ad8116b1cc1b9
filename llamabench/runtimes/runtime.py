"""A runtime: the program that creates the context a model runs in, and everything llamabench knows of it in one place.

Each runtime is one module of this package with one `ProgramRuntime`: its name (as `--runtime` takes it and the
records store it), the line a fit prints for it, and how `bench` drives it (a Llama() in a child, a llama-server it
starts, or one running at a URL). The context each creates for given parameters is pure arithmetic, kept in
`memory.runtimes.RuntimeConfig.context` (llama-server's slots and outputs, Llama()'s one sequence). Adding a runtime
is adding a module and naming it in `registry.RUNTIMES`; its name is spelled once, in `settings.values.Runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Callable

from ..memory.fit_result import FitResult
from ..memory.placement import FitRow
from ..settings.values import Runtime


class BenchDriver(StrEnum):
    """How `bench` times a runtime."""

    CHILD = "a Llama() context in a child process of its own, per configuration"
    SPAWNED = "a llama-server started per configuration, timed over its HTTP API, then stopped"
    ATTACHED = "a running llama-server at a URL, timed over its HTTP API (not started, not stopped)"


@dataclass(frozen=True)
class ProgramRuntime:
    name: Runtime  # the one spelling: --runtime, the records' `runtime`, the fit's answer
    program: str  # what the user runs, in words
    bench_driver: BenchDriver
    command: Callable[[FitResult, FitRow], str]  # the line a fit row prints for it

    @property
    def record_name(self) -> str:
        """What its bench records store as `runtime`."""
        return self.name.value
