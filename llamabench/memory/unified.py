"""A unified machine's pool as llama.cpp's own log shows it: the device's ceiling it prints, the buffers it put on the
device and on the host, and the rule that judges them. Pure: text in, data out.

The lines (llama.cpp's Metal and Vulkan backends, old builds and new):
  ggml_metal_device_init: recommendedMaxWorkingSetSize  = 11453.25 MB     (bytes / 1e6; builds of 2023 printed
      the MiB figure labelled MB, and some locales a decimal comma)
  ggml_metal_log_allocated_size: allocated buffer, size = 2207.12 MiB, ( 2207.50 / 10922.67)   (MiB: Metal's running
      currentAllocatedSize against recommendedMaxWorkingSetSize, ggml-metal-device.m)
  llama_model_load_from_file_impl: using device MTL0 (Apple M1 Pro) (unknown id) - 10922 MiB free
  load_tensors:  MTL0_Mapped model buffer size = 2207.10 MiB    (and KV, RS, compute, output buffers)
  ggml_vulkan: 0 = Radeon 8060S Graphics (RADV GFX1151) (radv) | uma: 1 | ...
  ggml_vulkan: Device memory allocation of size 4697620480 failed.
The rule (the fit's): the device's buffers within its ceiling (Metal's working set; a Vulkan or CUDA device's
reported memory), and no single Vulkan allocation past the driver's maxMemoryAllocationSize. Metal maps the GGUF
into its buffer once per model it loads from the file. Builds of May 2026 loaded an MTP draft as a partial second model
of the same file ("partial load ... sibling model on the same .gguf" in the log): that maps it again, and a log that
says so is read so. The vendored build creates the MTP context on the target model's own weights
(common/speculative.cpp, "creating MTP draft context against the target model"): the fit maps nothing twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..core.units import GIB, MIB
from ..settings.budget import metal_working_set
from .allocations import HOST, Allocations

_NUMBER = r"([\d]+(?:[.,]\d+)?)"
_WORKING_SET = re.compile(r"recommendedMaxWorkingSetSize\s*=\s*" + _NUMBER + r"\s*(MiB|MB)")
_RUNNING = re.compile(r"\(\s*" + _NUMBER + r"\s*/\s*" + _NUMBER + r"\s*\)")
_FREE = re.compile(r"using device (\S+) \((.*?)\).*? - (\d+) MiB free")
_BUFFER = re.compile(r"\s(\S+?) (?:(?:model|KV|RS|compute|output|input) )?buffer size =\s*" + _NUMBER + r" Mi?B")
_FAILED = re.compile(r"allocation of size (\d+) failed|failed to allocate \S+ buffer of size (\d+)")
_VULKAN = re.compile(r"ggml_vulkan: \d+ = (.*)\| uma: (\d)")
_PARTIAL = re.compile(r"partial load")
_DEVICE = re.compile(r"^(Metal|MTL\d*|Vulkan\d*|CUDA\d*|ROCm\d*)")
# the largest single allocation a Vulkan driver takes (maxMemoryAllocationSize), as the logs show it failing: RADV past
# 4 GiB, AMDVLK (and AMD's Windows driver) past 2 GiB. ggml-alloc.c chunks compute buffers by it (vbuffer, since
# 2025); a single tensor larger still fails.
VULKAN_ALLOCATION_CAP = {"amdvlk": 2 * GIB, "radv": 4 * GIB}
DEFAULT_VULKAN_ALLOCATION_CAP = 4 * GIB


def _number(text: str) -> float:
    return float(text.replace(",", "."))


class Verdict(StrEnum):
    FITS = "fits"
    OVER_CEILING = "over the device's ceiling"
    OVER_ALLOCATION = "one allocation past the driver's limit"
    UNKNOWN = "no ceiling in the log"


@dataclass(frozen=True)
class PoolReading:
    """What a log says of a unified machine's device: its backend, its ceiling, what was put on it and on the host."""

    backend: str  # metal, vulkan, cuda
    uma: bool  # Metal always; Vulkan's uma flag; CUDA on an integrated GPU
    ceiling_bytes: int | None  # Metal's working set; a Vulkan or CUDA device's free memory at load
    device_bytes: int  # the device's buffers (Metal: its own running total where printed), mappings counted each
    host_bytes: int  # CPU and pinned host buffers
    largest_allocation: int  # the largest single device allocation the driver refused (0: none refused)
    driver: str = ""  # radv, amdvlk (Vulkan)
    remapped: bool = False  # an MTP draft's partial load of the same file: the target's mapping is there too

    @property
    def allocation_cap(self) -> int | None:
        if self.backend != "vulkan":
            return None
        return VULKAN_ALLOCATION_CAP.get(self.driver, DEFAULT_VULKAN_ALLOCATION_CAP)

    def verdict(self) -> Verdict:
        cap = self.allocation_cap
        if cap is not None and self.largest_allocation > cap:
            return Verdict.OVER_ALLOCATION
        if self.ceiling_bytes is None:
            return Verdict.UNKNOWN
        return Verdict.OVER_CEILING if self.device_bytes > self.ceiling_bytes else Verdict.FITS


def read_pool(log: str, *, ram_bytes: int | None = None) -> PoolReading | None:
    """The pool of the device a log was made on; None where it shows no Metal, Vulkan or CUDA device. `ram_bytes`:
    the machine's RAM where the user stated it (a Mac's working set where the log leaves it out)."""
    lines = log.splitlines()
    backend = ("metal" if any("ggml_metal" in x for x in lines) else "vulkan" if any("ggml_vulkan" in x for x in lines)
               else "cuda" if any("CUDA" in x for x in lines) else "")
    if not backend:
        return None
    vulkan = next((m for x in lines if (m := _VULKAN.search(x))), None)
    driver = ""
    if vulkan:
        words = vulkan[1].lower()
        driver = ("radv" if "radv" in words else "amdvlk" if "amd open-source driver" in words or "amdvlk" in words
                  else "")
    device, host = _buffers(lines)
    largest = max((int(a or b) for x in lines for a, b in _FAILED.findall(x)), default=0)  # asked, refused
    remapped = backend == "metal" and any(_PARTIAL.search(x) for x in lines)
    running = [(_number(m[1]), _number(m[2])) for x in lines if "allocated" in x and (m := _RUNNING.search(x))]
    if remapped:  # the target's mapping of the same file is the partial load's span again
        device *= 2
    device = max(device, int(max((used for used, _ in running), default=0) * MIB))
    return PoolReading(backend, backend == "metal" or bool(vulkan and vulkan[2] == "1"),
                       _ceiling(lines, backend, running, ram_bytes), device, host, largest, driver, remapped)


def _buffers(lines: list[str]) -> tuple[int, int]:
    """(device bytes, host bytes) of the buffer-size lines."""
    device = host = 0
    for x in lines:
        for name, size in _BUFFER.findall(x):
            n = int(_number(size) * MIB)
            if _DEVICE.match(name) and not name.endswith("_Host"):
                device += n
            else:
                host += n
    return device, host


def _ceiling(lines: list[str], backend: str, running: list[tuple[float, float]], ram_bytes: int | None) -> int | None:
    """Metal: the running lines' limit (MiB), else the init line (decimal MB on the builds that print the device
    init, MiB before), else the first free figure, else the rule of the stated RAM. Vulkan, CUDA: the free figure,
    else the stated RAM (the pool)."""
    free = next((int(m[3]) * MIB for x in lines if (m := _FREE.search(x))), None)
    if backend != "metal":
        return free if free is not None else ram_bytes
    if running:
        return int(running[0][1] * MIB)
    init = next((m for x in lines if (m := _WORKING_SET.search(x))), None)
    if init is not None:
        decimal = init[2] == "MB" and any("ggml_metal_device_init" in x for x in lines)
        return int(_number(init[1]) * (1e6 if decimal else MIB))
    if free is not None:
        return free
    return metal_working_set(ram_bytes) if ram_bytes else None


@dataclass(frozen=True)
class UnifiedMemory:
    """A unified device's pool around a real context: its buffers against its own ceiling (ggml_backend_dev_memory's
    total: Metal's working set, Vulkan's heaps, GB10's MemAvailable), and its buffers with the host's against the
    machine's RAM."""

    device: str  # as llama.cpp names it: MTL0, Vulkan0, CUDA0
    ceiling_bytes: int
    device_bytes: int
    host_bytes: int
    ram_bytes: int

    @property
    def pool_bytes(self) -> int:
        return self.device_bytes + self.host_bytes

    @property
    def within_ceiling(self) -> bool:
        return self.device_bytes <= self.ceiling_bytes

    @property
    def within_ram(self) -> bool:
        return not self.ram_bytes or self.pool_bytes <= self.ram_bytes


def unified_memory(device: str, ceiling_bytes: int, allocations: Allocations, ram_bytes: int) -> UnifiedMemory:
    """The pool of the unified `device` from what llama.cpp allocated on it and on the host."""
    return UnifiedMemory(device, ceiling_bytes, allocations.device(device).total, allocations.device(HOST).total,
                         ram_bytes)
