"""The compute part of a fit: llama.cpp's own compute (+ output) buffers from no_alloc dry runs of the same
placement over the same devices, card and host apart, memoised.

The devices: on a GPU build the GPU; without one an emulated card (llama.cpp's RPC backend serving
this machine's CPU on 127.0.0.1), where llama.cpp sizes the card's compute buffer and the host's as
it does for a GPU; with --cpu-only the CPU alone. One no_alloc model per placement, in one child.
"""

from __future__ import annotations

from contextlib import ExitStack

from ..allocations import HOST
from ..errors import LlamabenchError
from ..llama.rpc import emulated_card
from ..llama.worker import DryRunChild
from ..params import Params
from .search import ComputeSplit


class ComputeProbe:
    """Callable settings (placement included) -> ComputeSplit, as `search.Fitter` takes it."""

    def __init__(self, path: str, *, emulate_card: bool = False):
        self.path = path
        self.emulate_card = emulate_card
        self._stack = ExitStack()
        self._endpoint: str | None = None
        self._model: DryRunChild | None = None
        self._memo: dict[Params, ComputeSplit] = {}
        self.backends: set[str] = set()
        self.calls = 0

    @staticmethod
    def placement_of(settings: Params) -> Params:
        """The model parameters of a dry run: the placement alone (the context varies per call)."""
        return Params(n_gpu_layers=settings.n_gpu_layers, n_cpu_moe=settings.n_cpu_moe, repack=False)

    def _child(self, placement: Params) -> DryRunChild:
        if self.emulate_card and self._endpoint is None:
            self._endpoint = self._stack.enter_context(emulated_card())
        if self._model is None:
            self._model = DryRunChild(self.path, placement, rpc=self._endpoint)
        elif self._model.placement != placement:
            self._model.load(placement)
        return self._model

    def __call__(self, settings: Params) -> ComputeSplit:
        key = settings.replace(n_threads=0, repack=False)
        if key not in self._memo:
            try:
                alloc = self._child(self.placement_of(settings)).context(settings).allocations
            except LlamabenchError:
                if self._model is not None and self._model.proc.poll() is not None:  # died: start anew next call
                    self._model = None
                raise
            self.calls += 1
            self.backends |= set(alloc.compute_buffers_mib)
            total, host = alloc.compute_and_output_bytes, alloc.device(HOST).compute
            if settings.n_gpu_layers and not alloc.card_names:
                # no card in this build (no GPU, no RPC backend): the CPU's figure stands for the card's
                self._memo[key] = ComputeSplit(card=total)
            else:
                self._memo[key] = ComputeSplit(card=total - host, host=host)
        return self._memo[key]

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
        self._stack.close()
        self._endpoint = None
