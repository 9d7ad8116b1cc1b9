"""Several cards (`roofline --card A+B`): llama.cpp's layer split, each card at its own bandwidth and throughput,
the activations over the link between them. The arithmetic is `memory.speed`'s and `memory.speed_model`'s; this
reads the options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...core.errors import UsageError
from ...memory import speed
from ...memory.layer_split import layer_counts, layer_devices
from ...memory.speed_model import SpeedModel, split_seconds
from ...settings.params import Params
from ...settings.sweep import parse_value


@dataclass(frozen=True)
class SplitSpeed:
    seconds: Callable[[int], float]  # per decoded token at a depth
    prefill_seconds: Callable[[int, int], float]
    basis: str

    def tokens_per_second(self, depth: int) -> float:
        return 1.0 / self.seconds(depth)


def split_speed(geometry, p: Params, weights, work: speed.ModelWork, cards, models: tuple[SpeedModel, ...],
                tensor_split, link, link_ms) -> SplitSpeed:
    """Over several cards: llama.cpp's layer split (-ts, else by each card's memory as llama.cpp splits by free
    memory). A decoded token passes them one after another; a prompt's ubatches pipeline, each card busy with its
    share of the layers (the slowest sets the pace once the pipe is full)."""
    props = parse_value("tensor_split", tensor_split, listed=False) if tensor_split else tuple(
        float(c.vram_gib) for c in cards)
    if len(props) != len(cards):
        raise UsageError(f"-ts gives {len(props)} proportions for {len(cards)} cards")
    devices = layer_devices(weights.n_layer, weights.n_layer + 1, props)
    gbps = parse_value("link", link, listed=False) if link else speed.PCIE_LINK_GBPS
    ms = parse_value("link_ms", link_ms, listed=False) if link_ms else 0.0
    counts = layer_counts(devices, len(cards))
    total = max(1, sum(counts))
    hop = speed.Link(gbps * 1e9, ms / 1e3)

    def seconds(depth: int) -> float:
        costs = speed.layer_token_costs(geometry, p, weights, work, depth)
        return split_seconds(costs, devices, models, hop, geometry.n_embd)[0]

    def prefill_seconds(n_tokens: int, depth: int) -> float:
        shares = [m.prefill_seconds(work, p, n_tokens, depth) * c / total for m, c in zip(models, counts)]
        n_ub = max(1, len(speed.ubatches(p, n_tokens, depth)))
        # the pipe: the slowest card's share of every ubatch, and the others' share of one to fill it
        return max(shares) + (sum(shares) - max(shares)) / n_ub

    basis = (f"split over {' + '.join(c.name for c in cards)}, layers {' / '.join(map(str, counts))} (-ts "
             f"{','.join(f'{x:g}' for x in props)}); a decoded token passes each card's layers in turn, at that card's "
             f"speed; each hop moves {geometry.n_embd * speed.ACTIVATION_BYTES:,} B of activations over a "
             f"{gbps:g} GB/s link" + (f" + {ms:g} ms" if ms else "") + (" (--link; default PCIe 4.0 x16 at half "
                                                                         "its peak)" if not link else " (--link)")
             + "; a prompt's ubatches pipeline over the cards")
    return SplitSpeed(seconds, prefill_seconds, basis)
