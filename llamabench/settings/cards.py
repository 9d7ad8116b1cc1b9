"""Consumer cards by name: their memory, bandwidth and FP32 throughput, as published. Pure data.

`fit --vram rtx-4090` and `roofline --card rtx-4090` name a card the same way: fit takes its memory, roofline
its bandwidth and compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.suggest import closest


@dataclass(frozen=True)
class Card:
    id: str
    name: str
    bandwidth_gbps: float  # memory bandwidth, GB/s
    fp32_tflops: float  # FP32 shader throughput (a conservative ceiling for attention)
    vram_gib: float
    source: str
    backend: str = "cuda"  # the llama.cpp backend such a card runs by default (--backend's default for it)


# Published figures (vendor specification pages / whitepapers).
CARDS = tuple(Card(*row) for row in (
    ("rtx-3060-12gb", "GeForce RTX 3060 12GB", 360.0, 12.7, 12, "NVIDIA RTX 3060 family specifications"),
    ("rtx-4060-ti-16gb", "GeForce RTX 4060 Ti 16GB", 288.0, 22.1, 16, "NVIDIA RTX 4060 Ti specifications"),
    ("rtx-4070-ti-super", "GeForce RTX 4070 Ti SUPER", 672.0, 44.1, 16, "NVIDIA RTX 4070 family specifications"),
    ("rtx-4080", "GeForce RTX 4080", 716.8, 48.7, 16, "NVIDIA RTX 4080 specifications"),
    ("rtx-4080-super", "GeForce RTX 4080 SUPER", 736.0, 52.2, 16, "NVIDIA RTX 4080 SUPER specifications"),
    ("rtx-5070-ti", "GeForce RTX 5070 Ti", 896.0, 43.9, 16, "NVIDIA RTX 5070 family specifications"),
    ("rtx-5080", "GeForce RTX 5080", 960.0, 56.3, 16, "NVIDIA RTX 5080 specifications"),
    ("rtx-3090", "GeForce RTX 3090", 936.0, 35.6, 24, "NVIDIA RTX 3090 specifications"),
    ("rtx-4090", "GeForce RTX 4090", 1008.0, 82.6, 24, "NVIDIA Ada Lovelace architecture whitepaper"),
    ("rtx-5090", "GeForce RTX 5090", 1792.0, 104.8, 32, "NVIDIA RTX 5090 specifications"),
    ("rx-7900-xtx", "Radeon RX 7900 XTX", 960.0, 61.4, 24, "AMD Radeon RX 7900 XTX specifications", "vulkan"),
))


def find_card(card_id: str) -> Card | None:
    for c in CARDS:
        if c.id == str(card_id).strip().lower():
            return c
    return None


def card(card_id: str) -> Card:
    for c in CARDS:
        if c.id == card_id:
            return c
    close = closest(card_id, [c.id for c in CARDS])
    raise UsageError(f"unknown card '{card_id}'" + (f"; did you mean {close}?" if close else ""),
                     hint="cards: " + ", ".join(c.id for c in CARDS))


