"""Consumer cards and unified-memory machines by name: their memory, bandwidth and FP32 throughput, as published.
Pure data.

`fit --vram rtx-4090` and `roofline --card rtx-4090` name a card the same way: fit takes its memory, roofline
its bandwidth and compute. A unified machine (a Mac, a Ryzen AI Max, a DGX Spark) is one pool of RAM shared by
its GPU and CPU: `vram_gib` is then the machine's RAM, and `ceiling_mib` the GPU's own limit within it, as
llama.cpp's logs print it (Metal's recommendedMaxWorkingSetSize).
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
    unified: bool = False  # the GPU shares the system RAM: vram_gib is the machine's RAM
    ceiling_mib: float | None = None  # unified: the device's own ceiling within the RAM; None: the RAM itself
    ceiling_source: str = ""  # where the ceiling comes from


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
)) + tuple(Card(*row[:7], unified=True, ceiling_mib=row[7], ceiling_source=row[8]) for row in (
    # Metal's ceiling is the device's recommendedMaxWorkingSetSize, as llama.cpp's Metal log prints it in MB
    # (ggml-metal-device.m: "recommendedMaxWorkingSetSize = %8.2f MB", bytes / 1e6); iogpu.wired_limit_mb moves it
    ("apple-m3-16gb", "Apple M3 (16 GB)", 100.0, 3.6, 16, "Apple M3 specifications", "metal",
     12713.12e6 / 2**20, "recommendedMaxWorkingSetSize = 12713.12 MB (llama.cpp's Metal log, 16 GB M3/M4)"),
    ("apple-m4-16gb", "Apple M4 (16 GB)", 120.0, 4.3, 16, "Apple M4 specifications", "metal",
     12713.12e6 / 2**20, "recommendedMaxWorkingSetSize = 12713.12 MB (llama.cpp's Metal log, 16 GB M3/M4)"),
    ("apple-m4-pro-24gb", "Apple M4 Pro (24 GB)", 273.0, 9.2, 24, "Apple M4 Pro specifications", "metal",
     17179.89e6 / 2**20, "recommendedMaxWorkingSetSize = 17179.89 MB (llama.cpp's Metal log, 24 GB M4 Pro)"),
    ("apple-m1-max-64gb", "Apple M1 Max (64 GB)", 400.0, 10.4, 64, "Apple M1 Max specifications", "metal",
     49152.0, "recommendedMaxWorkingSetSize = 49152 MiB (llama.cpp's Metal log, 64 GB M1 Max)"),
    # Vulkan on an integrated GPU (uma: 1) sums its memory heaps under the driver's budget, and CUDA on GB10 reports
    # the host's MemAvailable: at most the RAM, so the RAM less the OS's share binds
    ("ryzen-ai-max-395-128gb", "AMD Ryzen AI Max+ 395 (Radeon 8060S, 128 GB)", 256.0, 29.7,
     128, "AMD Ryzen AI Max+ 395 specifications", "vulkan", None,
     "the Vulkan device's memory heaps under the driver's budget (uma: 1): at most the RAM"),
    ("dgx-spark", "NVIDIA DGX Spark (GB10, 128 GB)", 273.0, 31.0, 128, "NVIDIA DGX Spark specifications", "cuda",
     None, "CUDA on GB10 reports the host's MemAvailable: at most the RAM"),
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




# Prefill (prompt processing) as published: llama-bench pp512 of Llama 3 8B Q4_K_M, every layer on the card. A card's
# matrix products in a batch run on its tensor or matrix units, which its FP32 figure does not describe; roofline
# takes the rate these runs reached (memory.speed.prefill_rate). A card without its own run takes the lowest ratio
# to the FP32 figure of a measured card of its backend (of every measured card where its backend has none).
PREFILL_SOURCE = "llama-bench, Llama 3 8B Q4_K_M; XiongjieDai/GPU-Benchmarks-on-LLM-Inference, May 2024"
PREFILL_PP512 = {"rtx-3090": 4030.40, "rtx-4080": 5389.74, "rtx-4090": 7138.99, "apple-m1-max-64gb": 408.23}
