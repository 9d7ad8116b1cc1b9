"""The compute part of a fit: llama.cpp's own compute (+ output) buffers from no_alloc dry runs of the same
placement over the same devices, card and host apart, memoised.

The devices: on a GPU build the GPU; without one an emulated card (llama.cpp's RPC backend serving
this machine's CPU on 127.0.0.1), where llama.cpp sizes the card's compute buffer and the host's as
it does for a GPU; with --cpu-only the CPU alone. One no_alloc model per placement, in one child.
"""

from __future__ import annotations

import os
import re
from contextlib import ExitStack
from typing import Callable

from ...core.errors import ContextRefused, LlamabenchError
from ...llama.devices import buffer_name
from ...llama.ggml_devices import NO_DEVICE
from ...llama.rpc import emulated_card
from ...llama.worker import DryRunChild
from ...memory.allocations import HOST, Allocations
from ...memory.backends import emulates, rules_for
from ...memory.speculative import MTP
from ...settings.params import Params
from ...settings.tensor_overrides import overrides_of, target
from .dry_run_cache import DryRunCache, devices_kind, file_identity
from .search import ComputeSplit

_UNTAKEN_TENSOR = re.compile(r"pre-allocated tensor \((\S+)\) in a buffer \((\S+)\) that cannot run")


def plain_refusal(reason: str) -> str:
    """llama.cpp's abort when a device's buffer holds a tensor the device cannot use, in words."""
    m = _UNTAKEN_TENSOR.search(reason)
    if not m:
        return reason
    return (f"{m[2]} does not take the tensor {m[1]} at this size (on Vulkan: larger than the device's "
            f"maxStorageBufferRange), and llama.cpp aborts creating the context (ggml_backend_sched)")


def _caches(alloc: Allocations, devices: tuple[str, ...], offloaded: bool) -> dict:
    """The KV and recurrent state llama.cpp allocated, (KV, recurrent) per device in device order and on the
    host: what fit sizes a model without a layout rule with.

    A no_alloc dry run prints each cache's size (`llama_kv_cache: size`, `llama_memory_recurrent: size`) but 0.00
    for its buffers; llama.cpp's memory breakdown holds each device's context bytes (KV and state together). Each
    device's bytes are split between KV and state in the proportion of the printed totals: exact wherever a device
    holds one kind only, or all of them."""
    kv, rec = alloc.kv_bytes, alloc.recurrent_bytes
    names = [buffer_name(d) for d in devices] or list(alloc.card_names[:1])

    def split(context: int) -> tuple[int, int]:
        share = round(context * kv / (kv + rec)) if kv + rec else 0
        return share, context - share

    if not alloc.breakdown:  # no breakdown read: every cache where the layers went (all on the card, or none)
        on_card = (kv, rec) if offloaded else (0, 0)
        host = (0, 0) if offloaded else (kv, rec)
        return dict(caches=(on_card,) + ((0, 0),) * (len(names) - 1), host_caches=host)
    if offloaded and not names:  # no card in this build: the CPU's caches stand for the card's
        return dict(caches=((kv, rec),))
    return dict(caches=tuple(split(alloc.breakdown_of(n).context) for n in names) or ((0, 0),),
                host_caches=split(alloc.breakdown_of(HOST).context))


def _split(settings: Params, alloc: Allocations, devices: tuple[str, ...], weights: dict) -> ComputeSplit:
    """A dry run's compute, card and host apart (each card's where there are several), with its caches and the
    weights each device took."""
    total, host = alloc.compute_and_output_bytes, alloc.device(HOST).compute
    caches = _caches(alloc, devices, settings.n_gpu_layers > 0)
    if settings.n_gpu_layers and not alloc.card_names:
        # no card in this build (no GPU, no RPC backend): the CPU's figure stands for the card's
        return ComputeSplit(card=total, **caches)
    if len(devices) > 1:
        cards = tuple(alloc.device(buffer_name(d)).compute for d in devices)
        return ComputeSplit(card=sum(cards), host=host, cards=cards, **weights, **caches)
    return ComputeSplit(card=total - host, host=host, **weights, **caches)


def positional_overrides(settings: Params, remote: tuple[str, ...]) -> tuple[str, ...]:
    """-ot and --cpu-moe as a load of ours takes them (llama.llama_params): `REGEX=CPU` for system RAM, `REGEX=@N`
    for the N-th device of the load (the --rpc hosts first), whatever the device is called where the user runs it."""
    out = []
    for override in overrides_of(settings.tensor_overrides, settings.cpu_moe):
        where = target(override, remote)
        out.append(f"{override.pattern}=" + ("CPU" if where is None else f"@{where}"))
    return tuple(out)


class ComputeProbe:
    """Callable settings (placement included) -> ComputeSplit, as `search.Fitter` takes it.

    Devices, in llama.cpp's order: the remote hosts (`--rpc`) first, then this machine's cards: emulated
    cards (one RPC server each) on a CPU build, the build's own devices on a GPU build. A placement over
    N devices (a -ts of N entries) is dry-run over the first N of them.
    """

    def __init__(self, path: str, *, emulate_card: bool = False, remote: tuple[str, ...] = (),
                 local_devices: tuple[str, ...] = (), cpu_alone: bool = False, read_weights: bool = True,
                 target_path: str | None = None, backend: str | None = None):
        self.path = path
        self.target_path = target_path  # an EAGLE3 head's target, loaded beside it in each dry run (ctx_other)
        self.emulate_card = emulate_card
        self.remote = tuple(remote)
        self.local_devices = tuple(local_devices)  # a GPU build's device names, in order
        self.cpu_alone = cpu_alone  # --cpu-only on a GPU build: no device at all (no op offload to the GPU)
        # the GPU backend the emulated cards answer as (memory.backends): op offload, allocation sizes, and the
        # tensors it refuses (then the weights each card takes are read from the dry runs, as on a real device)
        self.backend = backend if emulate_card else None
        self.rules = rules_for(self.backend, os.environ)
        self.read_weights = read_weights  # False: the weights are an estimate (a published size), not this file's
        self._stack = ExitStack()
        self._emulated: list[str] = []
        self._model: DryRunChild | None = None
        self._memo: dict[Params, ComputeSplit] = {}
        self._refused: dict[Params, str] = {}  # contexts llama.cpp could not create, and why: not asked again
        self.backends: set[str] = set()
        self.calls = 0
        self._disk: DryRunCache | None = None
        if not self.weights_from_backend and (self.emulate_card or not self.local_devices) and not self.remote:
            kind = devices_kind(emulated=emulate_card, cpu_alone=cpu_alone, backend=self.rules and self.rules.key)
            if target_path is not None:  # a head's dry runs depend on its target too
                kind += f"|target={file_identity(target_path)}"
            self._disk = DryRunCache(path, kind)

    def placement_of(self, settings: Params) -> Params:
        """The model parameters of a dry run: the placement alone (the context varies per call), its tensor
        overrides with each device named by its place among this probe's devices."""
        return Params(n_gpu_layers=settings.n_gpu_layers, n_cpu_moe=settings.n_cpu_moe, repack=False,
                      tensor_split=settings.tensor_split, split_mode=settings.split_mode, main_gpu=settings.main_gpu,
                      spec_type=settings.spec_type if settings.spec_type == MTP else "none",  # load_mtp
                      tensor_overrides=positional_overrides(settings, self.remote))

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

    @property
    def _backend_devices(self) -> tuple[str, ...]:
        """The emulated cards given the backend's rules (all of them; remote hosts answer as they are)."""
        return tuple(self._emulated) if emulates(self.backend) else ()

    def _child(self, placement: Params, devices: tuple[str, ...]) -> DryRunChild:
        rpc = [NO_DEVICE] if self.cpu_alone else list(devices) or None
        if self._model is None:
            self._model = DryRunChild(self.path, placement, rpc=rpc, target_path=self.target_path,
                                      backend=self.backend, backend_devices=self._backend_devices)
        elif self._model.backend_devices != self._backend_devices:  # more emulated cards: a child that knows them
            self._model.close()
            self._model = None
            return self._child(placement, devices)
        elif self._model.placement != placement or self._model.rpc != rpc:
            self._model.load(placement, rpc)
        return self._model

    def __call__(self, settings: Params) -> ComputeSplit:
        key = settings.replace(n_threads=0, repack=False)
        self._recall(key)
        if key in self._refused:
            raise ContextRefused(self._refused[key])
        if key not in self._memo:
            devices = self.devices(max(1, len(settings.tensor_split)))
            alloc = self._allocations(settings, key, devices)
            self.calls += 1
            if self.on_dry_run is not None:
                self.on_dry_run(settings, self.calls)
            self.backends |= set(alloc.compute_buffers_mib)
            weights = self._weights(alloc, devices)
            self._memo[key] = _split(settings, alloc, devices, weights)
            if self._disk is not None and not weights:
                self._disk.put(key, self._memo[key])
        return self._memo[key]

    def _recall(self, key: Params) -> None:
        """Where this dry run is on disk and not yet in memory: its answer (a split, or why llama.cpp refused the
        context) into the memo."""
        if key in self._memo or key in self._refused or self._disk is None:
            return
        stored = self._disk.get(key)
        if isinstance(stored, str):
            self._refused[key] = stored
        elif stored is not None:
            self._memo[key] = stored

    def _allocations(self, settings: Params, key: Params, devices: tuple[str, ...]) -> Allocations:
        """What llama.cpp allocates for settings over devices, from a dry run; a context it refuses is remembered
        (and stored) as refused, and raised in plain words."""
        try:
            return self._child(self.placement_of(settings), devices).context(settings).allocations
        except LlamabenchError as exc:
            if self._model is not None and self._model.proc.poll() is not None:  # died: start anew next call
                self._model = None
            if isinstance(exc, ContextRefused):
                self._refused[key] = plain_refusal(str(exc))
                if self._disk is not None:
                    self._disk.put(key, self._refused[key])
                raise ContextRefused(self._refused[key]) from None
            raise

    def _weights(self, alloc: Allocations, devices: tuple[str, ...]) -> dict:
        """The weights each device took in the dry run, as ComputeSplit's keywords, where they are read from the
        backend; {} otherwise, or where the dry run had no breakdown (then weights_unread says why)."""
        if not (self.weights_from_backend and devices):
            return {}
        if not alloc.breakdown:
            self.weights_unread = self._model.breakdown_unavailable or "no breakdown read"
            return {}
        # which tensors each device took: llama.cpp's choice (select_weight_buft)
        return dict(weights=tuple(alloc.breakdown_of(buffer_name(d)).model for d in devices),
                    host_weights=alloc.breakdown_of(HOST).model,
                    host_tensors=self._model.host_tensors)

    weights_unread: str | None = None  # why a dry run on real devices had no breakdown (no shim), where it had none
    on_dry_run: "Callable[[Params, int], None] | None" = None  # progress: each dry run llama.cpp answered

    @property
    def weights_from_backend(self) -> bool:
        """Real devices (a GPU build's, remote hosts), or emulated cards answering as a backend that refuses tensors
        past a size (Vulkan): the weights each takes are read from llama.cpp's dry run. An emulated card otherwise
        takes every tensor type: the file's tensors place exactly there."""
        refuses = self.rules is not None and self.rules.max_tensor_bytes > 0  # an emulated Vulkan card
        return self.read_weights and (bool(self.remote) or (bool(self.local_devices) and not self.emulate_card)
                                      or refuses)

    def close(self) -> None:
        if self._disk is not None:
            self._disk.save()
        if self._model is not None:
            self._model.close()
            self._model = None
        self._stack.close()
        self._emulated = []
