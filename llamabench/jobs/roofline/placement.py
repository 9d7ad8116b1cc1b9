"""Decode on one card with part of the model in system RAM (`roofline --card X -ngl N` or `--n-cpu-moe N`): what
fit recommends, priced. The card reads its layers at its bandwidth, system RAM the rest at its own, one after
the other, and each crossing moves the token's activations over the link. The arithmetic is `memory.speed`'s."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ...core.errors import UsageError
from ...memory import speed
from ...memory.backends import OP_OFFLOAD_MIN_BATCH
from ...memory.layer_split import layer_devices
from ...settings.params import Params
from ...world import bandwidth


@dataclass(frozen=True)
class PlacementSpeed:
    seconds: Callable[[int], float]  # per decoded token at a depth
    basis: str

    def tokens_per_second(self, depth: int) -> float:
        return 1.0 / self.seconds(depth)


def host_model(ram_bandwidth, bw_eff: float | None) -> speed.SpeedModel:
    """System RAM's speed: --ram-bandwidth GB/s, else this machine's measured copy bandwidth (cached a day),
    times the bandwidth efficiency; bytes only (the CPU's attention compute is not modelled)."""
    eff = speed.BANDWIDTH_EFFICIENCY if bw_eff is None else float(bw_eff)
    if ram_bandwidth:
        gbps, source = float(ram_bandwidth), "--ram-bandwidth"
    else:
        probe = bandwidth.cached_measure()
        gbps, source = max(probe.copy_gbps, probe.triad_gbps), f"this machine's, measured: {probe.method}"
    return speed.SpeedModel(gbps * 1e9 * eff, float("inf"), f"system RAM {gbps:g} GB/s x {eff:g} ({source})")


def placement_speed(meta, geometry, p: Params, card_model: speed.SpeedModel, host: speed.SpeedModel, scale,
                    n_gpu_layers: int | None, n_cpu_moe: int | None) -> PlacementSpeed:
    """-ngl N: the last N layers (the output layer counted, as llama.cpp does) on the card, the rest in RAM;
    --n-cpu-moe N: every layer on the card but the routed experts of layers 0..N-1, read from RAM."""
    weights, _ = speed.weights_per_token(meta, geometry, scale_to_bytes=scale.bytes, by_bytes=scale.by_bytes)
    n_layer = weights.n_layer
    ngl = n_layer + 1 if n_gpu_layers is None else min(int(n_gpu_layers), n_layer + 1)
    ncmoe = min(int(n_cpu_moe or 0), n_layer)
    if ncmoe and not meta.arch_count("expert_count"):
        raise UsageError("--n-cpu-moe moves routed experts to RAM: this model has none")
    on_card = layer_devices(n_layer, ngl, (1.0,))
    used, count = meta.arch_count("expert_used_count"), meta.arch_count("expert_count")
    share = used / count if count else 1.0
    link = speed.Link(speed.PCIE_LINK_GBPS * 1e9)

    def costs(depth: int) -> dict:
        return speed.layer_token_costs(geometry, p, weights, used, count, depth)

    def seconds(depth: int) -> float:
        card_s = host_s = 0.0
        crossings = 0
        for il, cost in costs(depth).items():
            experts = round(weights.per_layer.get(il, {}).get("routed_experts", 0) * share) if il < ncmoe else 0
            if on_card[il] is None:
                host_s += host.seconds(cost)
                continue
            card_s += card_model.seconds(replace(cost, weights_bytes=cost.weights_bytes - experts))
            if experts:
                host_s += host.seconds(speed.TokenCost(depth, experts, 0, 0, 0))
                crossings += 2  # to the experts in RAM and back
        crossings += 1 if ngl <= n_layer else 0  # the host layers' output to the card
        return card_s + host_s + crossings * geometry.n_embd * speed.ACTIVATION_BYTES / link.bandwidth

    on_host = sum(1 for d in on_card[:n_layer] if d is None)
    where = (f"experts of layers 0-{ncmoe - 1} in RAM (--n-cpu-moe {ncmoe})" if ncmoe else "")
    where += (", " if where and on_host else "") + (f"{on_host} of {n_layer} layers in RAM (-ngl {ngl})"
                                                     if on_host else "")
    basis = (f"{where}: the card reads its part at its bandwidth, then {host.basis} the rest; each crossing moves "
             f"{geometry.n_embd * speed.ACTIVATION_BYTES:,} B of activations over PCIe ({speed.PCIE_LINK_GBPS:g} GB/s)"
             "; "
             f"a decoded token is a batch of 1, below the {OP_OFFLOAD_MIN_BATCH} tokens at which CUDA, Vulkan and "
             "Metal copy host weights to the card (op offload, a prefill's cost): the part in RAM runs on the CPU")
    return PlacementSpeed(seconds, basis)
