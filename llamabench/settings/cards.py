"""Consumer cards and unified-memory machines by name: their memory, bandwidth and throughput, as published.
Pure data.

`fit --vram rtx-4090` and `roofline --card rtx-4090` name a card the same way: fit takes its memory, roofline
its bandwidth and throughput. A unified machine (a Mac, a Ryzen AI Max, a DGX Spark) is one pool of RAM shared by
its GPU and CPU: `vram_gib` is then the machine's RAM, and `ceiling_mib` the GPU's own limit within it, as
llama.cpp's logs print it (Metal's recommendedMaxWorkingSetSize).

Throughput is what the speed model (`memory.speed_model`) prices FLOPs against, dense (sparse figures are twice):
- `fp32_tflops`: the shader cores (AMD's figure counts dual issue);
- `fp16_matrix_tflops`: FP16 inputs with FP32 accumulate on the matrix units (NVIDIA tensor cores, AMD WMMA, Apple
  M5's neural accelerators); GeForce cards run it at half their FP16-accumulate rate. None: no matrix units (Apple
  M1-M4 multiply on the shader cores, simdgroup_matrix);
- `int8_matrix_tops`: INT8 on the matrix units, what llama.cpp's CUDA MMQ kernels multiply quantized weights with.
`host_ram_gbps` is the system RAM such a card typically sits beside, as a memory benchmark reads it (the part of a
model kept in RAM, -ngl or --n-cpu-moe, is read at it): a DDR4-3200 dual-channel desktop for the cards of the DDR4
years, DDR5-6000 for the rest; a unified machine's is its own pool. `--ram-bandwidth` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.suggest import closest

# host RAM as read by a memory benchmark (../shared research, host_ram.md): DDR4-3200 dual channel peaks at 51.2 GB/s
# and reads 43-46 (Guru3D, AIDA64 read); DDR5-6000 peaks at 96 and a Zen 4 desktop reads 60.8 (BlinkDL/benchmark.c)
DDR4_DESKTOP_GBPS = 45.0
DDR5_DESKTOP_GBPS = 61.0
DDR4_SOURCE = "a DDR4-3200 dual-channel desktop: 43-46 GB/s read (Guru3D AIDA64 reviews), 51.2 peak"
DDR5_SOURCE = "a DDR5-6000 dual-channel desktop: 60.8 GB/s read on a Zen 4 Ryzen 7 7700 (BlinkDL/benchmark.c), 96 peak"


@dataclass(frozen=True)
class Card:
    id: str
    name: str
    bandwidth_gbps: float  # memory bandwidth, GB/s
    fp32_tflops: float  # FP32 shader throughput
    vram_gib: float
    source: str
    backend: str = "cuda"  # the llama.cpp backend such a card runs by default (--backend's default for it)
    unified: bool = False  # the GPU shares the system RAM: vram_gib is the machine's RAM
    ceiling_mib: float | None = None  # unified: the device's own ceiling within the RAM; None: the RAM itself
    ceiling_source: str = ""  # where the ceiling comes from
    fp16_matrix_tflops: float | None = None  # dense FP16 x FP16 -> FP32 on matrix units; None: none
    int8_matrix_tops: float | None = None  # dense INT8 on matrix units; None: none
    host_ram_gbps: float = DDR5_DESKTOP_GBPS  # the system RAM beside it (unified: its own pool)
    host_ram_source: str = DDR5_SOURCE
    backends: tuple[str, ...] = ()  # every llama.cpp backend it runs, the default first
    vendor: str = ""  # nvidia, amd, apple

    @property
    def runs(self) -> tuple[str, ...]:
        return self.backends or (self.backend,)

    def rates_key(self, backend: str) -> str:
        """The speed model's coefficients a backend runs this card with: NVIDIA's Vulkan driver has NV_coopmat2
        (shaders of their own, memory.speed_model.Backend.VULKAN_COOPMAT2)."""
        return "vulkan-coopmat2" if backend == "vulkan" and self.vendor == "nvidia" else backend


def _nvidia(id_, name, bw, fp32, fp16, int8, gib, source, ddr4=False) -> Card:
    host = (DDR4_DESKTOP_GBPS, DDR4_SOURCE) if ddr4 else (DDR5_DESKTOP_GBPS, DDR5_SOURCE)
    return Card(id_, name, bw, fp32, gib, source, "cuda", fp16_matrix_tflops=fp16, int8_matrix_tops=int8,
                host_ram_gbps=host[0], host_ram_source=host[1], backends=("cuda", "vulkan"), vendor="nvidia")


def _amd(id_, name, bw, fp32, fp16, int8, gib, source) -> Card:
    return Card(id_, name, bw, fp32, gib, source, "vulkan", fp16_matrix_tflops=fp16, int8_matrix_tops=int8,
                backends=("vulkan", "rocm"), vendor="amd")


_AMPERE = "NVIDIA Ampere GA102 whitepaper (per SM and clock: 512 FP16 FLOPs FP32-accumulate, 2048 INT8) and spec page"
_ADA = "NVIDIA Ada Lovelace whitepaper v2.1 (per SM and clock: 512 FP16 FLOPs FP32-accumulate, 2048 INT8) and spec page"
_BLACKWELL = ("NVIDIA RTX Blackwell whitepaper v1.1 (per SM and clock: 512 FP16 FLOPs FP32-accumulate, 2048 INT8) and "
              "spec page")
_RDNA3 = "AMD GPUOpen matrix cores (RDNA3 WMMA: 512 FP16 or INT8 ops per CU and clock) and AMD's specifications"
_RDNA4 = "AMD GPUOpen matrix cores (RDNA4 WMMA: 1024 FP16, 2048 INT8 ops per CU and clock) and AMD's specifications"

CARDS_DISCRETE = (
    _nvidia("rtx-3060-12gb", "GeForce RTX 3060 12GB", 360.0, 12.74, 25.5, 101.9, 12, _AMPERE, ddr4=True),
    _nvidia("rtx-3060-ti", "GeForce RTX 3060 Ti", 448.0, 16.2, 32.4, 129.6, 8, _AMPERE, ddr4=True),
    _nvidia("rtx-3070", "GeForce RTX 3070", 448.0, 20.3, 40.6, 162.6, 8, _AMPERE + ", appendix A", ddr4=True),
    _nvidia("rtx-3070-ti", "GeForce RTX 3070 Ti", 608.0, 21.75, 43.5, 174.0, 8, _AMPERE, ddr4=True),
    _nvidia("rtx-3080", "GeForce RTX 3080 (10 GB)", 760.0, 29.8, 59.5, 238.0, 10, _AMPERE + ", table 1", ddr4=True),
    _nvidia("rtx-3080-12gb", "GeForce RTX 3080 12GB", 912.0, 30.64, 61.3, 245.1, 12, _AMPERE, ddr4=True),
    _nvidia("rtx-3080-ti", "GeForce RTX 3080 Ti", 912.0, 34.1, 68.2, 272.8, 12, _AMPERE, ddr4=True),
    _nvidia("rtx-3090", "GeForce RTX 3090", 936.0, 35.6, 71.0, 284.0, 24, _AMPERE + ", appendix A", ddr4=True),
    _nvidia("rtx-3090-ti", "GeForce RTX 3090 Ti", 1008.0, 40.0, 80.0, 320.0, 24, _AMPERE, ddr4=True),
    _nvidia("rtx-4060-ti-16gb", "GeForce RTX 4060 Ti 16GB", 288.0, 22.06, 44.1, 176.5, 16, _ADA),
    _nvidia("rtx-4070", "GeForce RTX 4070", 504.0, 29.15, 58.3, 233.2, 12, _ADA),
    _nvidia("rtx-4070-super", "GeForce RTX 4070 SUPER", 504.0, 35.48, 71.0, 283.9, 12, _ADA),
    _nvidia("rtx-4070-ti-super", "GeForce RTX 4070 Ti SUPER", 672.0, 44.1, 88.2, 352.8, 16, _ADA),
    _nvidia("rtx-4080", "GeForce RTX 4080", 716.8, 48.7, 97.5, 389.9, 16, _ADA + ", appendix A"),
    _nvidia("rtx-4080-super", "GeForce RTX 4080 SUPER", 736.3, 52.22, 104.4, 417.8, 16, _ADA),
    _nvidia("rtx-4090", "GeForce RTX 4090", 1008.0, 82.6, 165.2, 660.6, 24, _ADA + ", table 2"),
    _nvidia("rtx-5060-ti-16gb", "GeForce RTX 5060 Ti 16GB", 448.0, 23.7, 47.4, 189.6, 16, _BLACKWELL),
    _nvidia("rtx-5070", "GeForce RTX 5070", 672.0, 30.87, 61.7, 246.9, 12, _BLACKWELL + ", table 6"),
    _nvidia("rtx-5070-ti", "GeForce RTX 5070 Ti", 896.0, 43.94, 87.9, 351.5, 16, _BLACKWELL),
    _nvidia("rtx-5080", "GeForce RTX 5080", 960.0, 56.28, 112.6, 450.2, 16, _BLACKWELL),
    _nvidia("rtx-5090", "GeForce RTX 5090", 1792.0, 104.8, 209.5, 838.0, 32, _BLACKWELL + ", table 3"),
    _amd("rx-7900-xtx", "Radeon RX 7900 XTX", 960.0, 61.4, 122.9, 122.9, 24, _RDNA3),
    _amd("rx-7900-xt", "Radeon RX 7900 XT", 800.0, 51.6, 103.2, 103.2, 20, _RDNA3),
    _amd("radeon-pro-w7900", "Radeon PRO W7900", 864.0, 61.3, 122.6, 122.6, 48, _RDNA3),
    _amd("rx-9070-xt", "Radeon RX 9070 XT", 640.0, 48.7, 194.6, 389.3, 16, _RDNA4),
    _amd("rx-9060-xt", "Radeon RX 9060 XT 16GB", 322.3, 25.6, 102.6, 205.1, 16,
         _RDNA4 + " (32 CU, 3.13 GHz boost, 20 Gbps x 128-bit)"),
    _amd("radeon-ai-pro-r9700", "Radeon AI PRO R9700", 644.6, 47.8, 191.3, 382.7, 32, _RDNA4),
)

# Metal's ceiling is the device's recommendedMaxWorkingSetSize, as llama.cpp's Metal log prints it in MB
# (ggml-metal-device.m: "recommendedMaxWorkingSetSize = %8.2f MB", bytes / 1e6); iogpu.wired_limit_mb moves it.
# Where no log of that size is known: 2/3 of the RAM up to 36 GiB, 3/4 above (settings.budget.metal_working_set).
_LOGGED_WORKING_SET_MB = {  # (chip, GB) -> MB, each from a published llama.cpp / whisper.cpp log
    ("m1-pro", 16): 11453.25, ("m1-max", 64): 49152 * 2**20 / 1e6, ("m2-max", 64): 51539.61,
    ("m3", 16): 12713.12, ("m4", 16): 12713.12, ("m3-max", 64): 55662.79, ("m3-ultra", 512): 498216.21,
    ("m4-pro", 24): 17179.89, ("m4-pro", 48): 40200.90, ("m4-max", 36): 30150.67, ("m5", 32): 26800.60,
}
_APPLE_SOURCE = "Apple's newsroom and tech specs (bandwidth, GPU cores, TFLOPS)"
# chip, name, GB/s, FP32 TFLOPS (the largest GPU of the chip), memory sizes sold (GB); M5: its neural accelerators
_APPLE_CHIPS = (
    ("m1", "Apple M1", 68.25, 2.6, (8, 16)),
    ("m1-pro", "Apple M1 Pro", 200.0, 5.2, (16, 32)),
    ("m1-max", "Apple M1 Max", 400.0, 10.4, (32, 64)),
    ("m1-ultra", "Apple M1 Ultra", 800.0, 21.0, (64, 128)),
    ("m2", "Apple M2", 100.0, 3.6, (8, 16, 24)),
    ("m2-pro", "Apple M2 Pro", 200.0, 6.8, (16, 32)),
    ("m2-max", "Apple M2 Max", 400.0, 13.6, (32, 64, 96)),
    ("m2-ultra", "Apple M2 Ultra", 800.0, 27.2, (64, 128, 192)),
    ("m3", "Apple M3", 100.0, 3.58, (8, 16, 24)),
    ("m3-pro", "Apple M3 Pro", 150.0, 6.44, (18, 36)),
    ("m3-max", "Apple M3 Max", 400.0, 14.32, (48, 64, 96, 128)),  # the 40-core GPU (the 30-core: 300 GB/s, 36 GB)
    ("m3-ultra", "Apple M3 Ultra", 819.0, 28.6, (96, 256, 512)),
    ("m4", "Apple M4", 120.0, 3.76, (16, 24, 32)),
    ("m4-pro", "Apple M4 Pro", 273.0, 7.53, (24, 48, 64)),
    ("m4-max", "Apple M4 Max", 546.0, 17.18, (48, 64, 128)),  # the 40-core GPU (the 32-core: 410 GB/s, 36 GB)
    ("m5", "Apple M5", 153.6, 4.04, (16, 24, 32)),
)
_APPLE_VARIANTS = (("m3-max", "Apple M3 Max (30-core GPU)", 300.0, 10.74, (36,)),
                   ("m4-max", "Apple M4 Max (32-core GPU)", 410.0, 13.74, (36,)))
_M5_MATRIX = (16.2, 32.3)  # ~1024 FP16 and ~2048 INT8 ops per GPU core and clock (tzakharko, A19/M5 accelerators)


def _apple(chip, name, bw, fp32, size) -> Card:
    logged = _LOGGED_WORKING_SET_MB.get((chip, size))
    ram_mib = size * 1024
    ceiling = logged * 1e6 / 2**20 if logged else (ram_mib * 3 // 4 if size > 36 else ram_mib * 2 // 3)
    basis = (f"recommendedMaxWorkingSetSize = {logged:.2f} MB (a llama.cpp Metal log, {name} {size} GB)" if logged
             else "2/3 of the RAM up to 36 GiB, 3/4 above (macOS's recommendedMaxWorkingSetSize in llama.cpp's logs)")
    fp16, int8 = _M5_MATRIX if chip == "m5" else (None, None)
    return Card(f"apple-{chip}-{size}gb", f"{name} ({size} GB)", bw, fp32, size, _APPLE_SOURCE, "metal", True, ceiling,
                basis, fp16, int8, bw, "the machine's own unified memory", vendor="apple")


CARDS_UNIFIED = tuple(_apple(chip, name, bw, fp32, size)
                      for chip, name, bw, fp32, sizes in _APPLE_CHIPS + _APPLE_VARIANTS for size in sizes) + (
    # Vulkan on an integrated GPU (uma: 1) sums its memory heaps under the driver's budget, ROCm reports the GTT it
    # was given, and CUDA on GB10 reports the host's MemAvailable: at most the RAM, so the RAM less the OS's share binds
    Card("ryzen-ai-max-395-128gb", "AMD Ryzen AI Max+ 395 (Radeon 8060S, 128 GB)", 256.0, 29.7, 128,
         "Chips and Cheese, Strix Halo (40 CU RDNA 3.5, 256-bit LPDDR5X-8000); WMMA as RDNA3", "vulkan", True, None,
         "the device's memory heaps under the driver's budget (Vulkan uma: 1; ROCm: its GTT): at most the RAM",
         59.4, 59.4, 256.0, "the machine's own unified memory", ("vulkan", "rocm"), "amd"),
    Card("ryzen-ai-max-395-64gb", "AMD Ryzen AI Max+ 395 (Radeon 8060S, 64 GB)", 256.0, 29.7, 64,
         "Chips and Cheese, Strix Halo (40 CU RDNA 3.5, 256-bit LPDDR5X-8000); WMMA as RDNA3", "vulkan", True, None,
         "the device's memory heaps under the driver's budget (Vulkan uma: 1; ROCm: its GTT): at most the RAM",
         59.4, 59.4, 256.0, "the machine's own unified memory", ("vulkan", "rocm"), "amd"),
    Card("dgx-spark", "NVIDIA DGX Spark (GB10, 128 GB)", 273.0, 31.0, 128,
         "NVIDIA DGX Spark specifications (273 GB/s, 31 FP32 TFLOPS, 1 PFLOP FP4 sparse); huggingface/kernels PR 283 "
         "measured 92.3 TFLOPS BF16 matmul, so FP16 with FP32 accumulate runs at the full 125", "cuda", True, None,
         "CUDA on GB10 reports the host's MemAvailable: at most the RAM", 125.0, 250.0, 273.0,
         "the machine's own unified memory", ("cuda", "vulkan"), "nvidia"),
)

CARDS = CARDS_DISCRETE + CARDS_UNIFIED
_ALIASES = {"rtx-3080-10gb": "rtx-3080", "dgx-spark-gb10": "dgx-spark", "strix-halo": "ryzen-ai-max-395-128gb",
            "apple-m1-max": "apple-m1-max-64gb", "apple-m2-ultra": "apple-m2-ultra-192gb",
            "apple-m3-ultra": "apple-m3-ultra-512gb", "apple-m4-max": "apple-m4-max-128gb",
            "apple-m4-pro": "apple-m4-pro-24gb"}


def find_card(card_id: str) -> Card | None:
    key = str(card_id).strip().lower()
    key = _ALIASES.get(key, key)
    for c in CARDS:
        if c.id == key:
            return c
    return None


def card(card_id: str) -> Card:
    found = find_card(card_id)
    if found is not None:
        return found
    close = closest(card_id, [c.id for c in CARDS])
    raise UsageError(f"unknown card '{card_id}'" + (f"; did you mean {close}?" if close else ""),
                     hint=f"{len(CARDS)} cards, named as {families()}; or --bandwidth GB/s")


def families() -> str:
    """The card names by family, a few each (every name would make an error line of a thousand characters)."""
    by_family: dict[str, list[str]] = {}
    for c in CARDS:
        by_family.setdefault(c.id.split("-")[0], []).append(c.id)
    return "; ".join(f"{ids[0]} ... {ids[-1]}" if len(ids) > 2 else ", ".join(ids) for ids in by_family.values())
