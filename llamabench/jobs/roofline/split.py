"""Decode over several cards (`roofline --card A+B`): llama.cpp's layer split, each card at its own bandwidth,
the activations over the link between them. The arithmetic is `memory.speed`'s; this reads the options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...core.errors import UsageError
from ...memory import speed
from ...memory.layer_split import layer_counts, layer_devices
from ...settings.params import Params
from ...settings.sweep import parse_value


@dataclass(frozen=True)
class SplitSpeed:
    costs: Callable[[int], dict]
    devices: tuple
    models: tuple
    link: speed.Link
    n_embd: int
    basis: str

    def tokens_per_second(self, depth: int) -> float:
        return 1.0 / speed.split_seconds(self.costs(depth), self.devices, self.models, self.link, self.n_embd)[0]


def split_speed(meta, geometry, p: Params, cards, eff: dict, scale, tensor_split, link, link_ms) -> SplitSpeed:
    """Decode over several cards: llama.cpp's layer split (-ts, else by each card's memory as llama.cpp splits
    by free memory), each card at its own bandwidth, the activations over the link between them."""
    props = parse_value("tensor_split", tensor_split, listed=False) if tensor_split else tuple(
        float(c.vram_gib) for c in cards)
    if len(props) != len(cards):
        raise UsageError(f"-ts gives {len(props)} proportions for {len(cards)} cards")
    weights, _ = speed.weights_per_token(meta, geometry, scale_to_bytes=scale.bytes, by_bytes=scale.by_bytes)
    devices = layer_devices(weights.n_layer, weights.n_layer + 1, props)
    gbps = parse_value("link", link, listed=False) if link else speed.PCIE_LINK_GBPS
    ms = parse_value("link_ms", link_ms, listed=False) if link_ms else 0.0
    models = tuple(speed.model_for_card(c, **eff) for c in cards)
    used, count = meta.arch_count("expert_used_count"), meta.arch_count("expert_count")
    counts = layer_counts(devices, len(cards))
    basis = (f"split over {' + '.join(c.name for c in cards)}, layers {' / '.join(map(str, counts))} (-ts "
             f"{','.join(f'{x:g}' for x in props)}); each card reads its layers' bytes at its own bandwidth, one after "
             f"another; each hop moves {geometry.n_embd * speed.ACTIVATION_BYTES:,} B of activations over a "
             f"{gbps:g} GB/s link" + (f" + {ms:g} ms" if ms else "") + (" (--link; default PCIe 4.0 x16 at half "
                                                                         "its peak)" if not link else " (--link)"))
    return SplitSpeed(lambda d: speed.layer_token_costs(geometry, p, weights, used, count, d), devices, models,
                      speed.Link(gbps * 1e9, ms / 1e3, basis), geometry.n_embd, basis)
