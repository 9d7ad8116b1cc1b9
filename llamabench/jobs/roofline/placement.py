"""One card with part of the model in system RAM (`roofline --card X -ngl N` or `--n-cpu-moe N`): what fit
recommends, priced. A decoded token: the card reads its layers at its bandwidth, the CPU the rest from system RAM
at its own, one after the other, and each crossing moves the token's activations over PCIe. A prompt: a ubatch of
32 tokens or more runs on the card even where its weights are in RAM (llama.cpp's op offload), which first copies
those weights over PCIe, once a ubatch. The arithmetic is `memory.speed`'s and `memory.speed_model`'s."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ...core.errors import UsageError
from ...memory import speed
from ...memory.backends import OP_OFFLOAD_MIN_BATCH
from ...memory.layer_split import layer_devices
from ...memory.speed_model import SpeedModel
from ...settings.params import Params


@dataclass(frozen=True)
class PlacementSpeed:
    seconds: Callable[[int], float]  # per decoded token at a depth
    prefill_seconds: Callable[[int, int], float]  # a prompt of n tokens after `depth` cached ones
    basis: str

    def tokens_per_second(self, depth: int) -> float:
        return 1.0 / self.seconds(depth)


def placement_speed(geometry, p: Params, weights, work: speed.ModelWork, card: SpeedModel, host: SpeedModel,
                    n_gpu_layers: int | None, n_cpu_moe: int | None,
                    ram_of_layer: "dict[int | None, int] | None" = None) -> PlacementSpeed:
    """-ngl N: the last N layers (the output layer counted, as llama.cpp does) on the card, the rest in RAM;
    --n-cpu-moe N: every layer on the card but the routed experts of layers 0..N-1, read from RAM. `ram_of_layer`:
    the bytes a token reads from RAM of each card layer, where tensor overrides (-ot) placed them (None: the output
    layer's; WeightsBreakdown.placed_host_read)."""
    n_layer = weights.n_layer
    ngl = n_layer + 1 if n_gpu_layers is None else min(int(n_gpu_layers), n_layer + 1)
    ncmoe = min(int(n_cpu_moe or 0), n_layer)
    if ncmoe and not work.expert_count:
        raise UsageError("--n-cpu-moe moves routed experts to RAM: this model has none")
    on_card = layer_devices(n_layer, ngl, (1.0,))
    share = work.expert_share
    link = speed.Link(speed.PCIE_LINK_GBPS * 1e9)
    in_ram = weights.host_read_per_token(n_gpu_layers=ngl, n_cpu_moe=ncmoe)  # every matrix in RAM, all experts
    if ram_of_layer is not None:
        ram_of_layer = {n_layer if il is None else il: n for il, n in ram_of_layer.items()}
        in_ram = round(sum(ram_of_layer.values()) / share) if share else in_ram

    def seconds(depth: int) -> float:
        card_s = host_s = 0.0
        crossings = 0
        for il, cost in speed.layer_token_costs(geometry, p, weights, work, depth).items():
            if ram_of_layer is not None:
                experts = ram_of_layer.get(il, 0) if on_card[il] is not None else 0
            else:
                experts = round(weights.per_layer.get(il, {}).get("routed_experts", 0) * share) if il < ncmoe else 0
            if on_card[il] is None:
                host_s += host.seconds(cost)
                continue
            card_s += card.seconds(replace(cost, weights_bytes=cost.weights_bytes - experts))
            if experts:
                host_s += host.seconds(speed.TokenCost(depth, experts, 0, 0, 0))
                crossings += 2  # to the experts in RAM and back
        crossings += 1 if ngl <= n_layer else 0  # the host layers' output to the card
        return card_s + host_s + crossings * geometry.n_embd * speed.ACTIVATION_BYTES / link.bandwidth

    def prefill_seconds(n_tokens: int, depth: int) -> float:
        whole = card.prefill_seconds(work, p, n_tokens, depth)
        copies = sum(1 for _, n in speed.ubatches(p, n_tokens, depth) if n >= OP_OFFLOAD_MIN_BATCH)
        return whole + copies * in_ram / link.bandwidth

    on_host = sum(1 for d in on_card[:n_layer] if d is None)
    where = (f"experts of layers 0-{ncmoe - 1} in RAM (--n-cpu-moe {ncmoe})" if ncmoe else "")
    if ram_of_layer is not None:
        where += (", " if where else "") + "the tensors the overrides (-ot) keep in RAM read from it"
    where += (", " if where and on_host else "") + (f"{on_host} of {n_layer} layers in RAM (-ngl {ngl})"
                                                     if on_host else "")
    basis = (f"{where or 'every layer on the card'}: a decoded token is read by the card at its bandwidth, then the "
             f"rest by the CPU from {host.basis}; each crossing moves "
             f"{geometry.n_embd * speed.ACTIVATION_BYTES:,} B of "
             f"activations over PCIe ({speed.PCIE_LINK_GBPS:g} GB/s); a prompt's ubatch of {OP_OFFLOAD_MIN_BATCH} "
             f"tokens or more runs on the card, the {in_ram / 2**30:.2f} GiB in RAM copied over PCIe once a ubatch "
             "(op offload)")
    return PlacementSpeed(seconds, prefill_seconds, basis)
