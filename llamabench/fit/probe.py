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


def buffer_name(device: str) -> str:
    """The name llama.cpp prints a device's buffers under: RPC0[HOST:PORT] for an RPC server's first device
    (ggml-rpc.cpp), the device's own name (CUDA0, Vulkan0) otherwise."""
    return f"RPC0[{device}]" if ":" in device else device


class ComputeProbe:
    """Callable settings (placement included) -> ComputeSplit, as `search.Fitter` takes it.

    Devices, in llama.cpp's order: the remote hosts (`--rpc`) first, then this machine's cards: emulated
    cards (one RPC server each) on a CPU build, the build's own devices on a GPU build. A placement over
    N devices (a -ts of N entries) is dry-run over the first N of them.
    """

    def __init__(self, path: str, *, emulate_card: bool = False, remote: tuple[str, ...] = (),
                 local_devices: tuple[str, ...] = ()):
        self.path = path
        self.emulate_card = emulate_card
        self.remote = tuple(remote)
        self.local_devices = tuple(local_devices)  # a GPU build's device names, in order
        self._stack = ExitStack()
        self._emulated: list[str] = []
        self._model: DryRunChild | None = None
        self._memo: dict[Params, ComputeSplit] = {}
        self.backends: set[str] = set()
        self.calls = 0

    @staticmethod
    def placement_of(settings: Params) -> Params:
        """The model parameters of a dry run: the placement alone (the context varies per call)."""
        return Params(n_gpu_layers=settings.n_gpu_layers, n_cpu_moe=settings.n_cpu_moe, repack=False,
                      tensor_split=settings.tensor_split, split_mode=settings.split_mode, main_gpu=settings.main_gpu)

    def devices(self, n_devices: int) -> tuple[str, ...]:
        """The first n_devices devices (endpoints or device names); () : the build's default selection."""
        n_local = max(0, n_devices - len(self.remote))
        if self.emulate_card:
            while len(self._emulated) < n_local:
                self._emulated.append(self._stack.enter_context(emulated_card()))
            local = tuple(self._emulated[:n_local])
        elif self.local_devices:  # a GPU build: its devices named, so each card is the one planned
            local = self.local_devices[:n_local]
        elif not self.remote:
            return ()
        else:
            local = ()
        return self.remote[:n_devices] + local

    def _child(self, placement: Params, devices: tuple[str, ...]) -> DryRunChild:
        rpc = list(devices) or None
        if self._model is None:
            self._model = DryRunChild(self.path, placement, rpc=rpc)
        elif self._model.placement != placement or self._model.rpc != rpc:
            self._model.load(placement, rpc)
        return self._model

    def __call__(self, settings: Params) -> ComputeSplit:
        key = settings.replace(n_threads=0, repack=False)
        if key not in self._memo:
            devices = self.devices(max(1, len(settings.tensor_split)))
            try:
                alloc = self._child(self.placement_of(settings), devices).context(settings).allocations
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
            elif len(devices) > 1:
                cards = tuple(alloc.device(buffer_name(d)).compute for d in devices)
                self._memo[key] = ComputeSplit(card=sum(cards), host=host, cards=cards)
            else:
                self._memo[key] = ComputeSplit(card=total - host, host=host)
        return self._memo[key]

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
        self._stack.close()
        self._emulated = []
