"""The compute part of a fit: llama.cpp's own compute (+ output) buffer from no_alloc dry runs, memoised."""

from __future__ import annotations

from ..errors import LlamabenchError
from ..params import Params
from ..llama.worker import DryRunChild


class ComputeProbe:
    """Callable settings -> bytes, as `search.Fitter` takes it; one no_alloc model load (in a child), many contexts."""

    def __init__(self, path: str):
        self.path = path
        self._model: DryRunChild | None = None
        self._memo: dict[tuple, int] = {}
        self.backends: set[str] = set()
        self.calls = 0

    def __call__(self, settings: Params) -> int:
        key = settings
        if key not in self._memo:
            if self._model is None:
                self._model = DryRunChild(self.path)
            try:
                alloc = self._model.context(settings).allocations
            except LlamabenchError:
                if self._model.proc.poll() is not None:  # the child died: the next call starts a new one
                    self._model = None
                raise
            self.calls += 1
            self.backends |= set(alloc.compute_buffers_mib)
            self._memo[key] = alloc.compute_and_output_bytes
        return self._memo[key]

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
