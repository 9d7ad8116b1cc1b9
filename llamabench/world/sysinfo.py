"""The one module that reads the machine: psutil (RSS, RAM, CPU) and NVML (GPU memory, through nvidia-ml-py)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import lru_cache

import psutil

from .bandwidth import PeakBandwidth


def process_rss_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


def total_ram_bytes() -> int:
    return int(psutil.virtual_memory().total)


def available_ram_bytes() -> int:
    return int(psutil.virtual_memory().available)


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def has_amx() -> bool:
    """Intel AMX: llama.cpp then repacks quantized weights into an AMX buffer (ggml-cpu's extra buffer type)."""
    return "amx_tile" in cpu_flags()


@lru_cache(maxsize=1)
def _nvml():
    """pynvml (the nvidia-ml-py package, `pip install llamabench[gpu]`), initialised; None without it or a driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # pynvml.NVMLError and friends: no driver, no GPU
        return None
    return pynvml


def gpu_memory() -> list[dict] | None:
    """Per GPU: name, total and used bytes (NVML). None when NVML is not available."""
    nvml = _nvml()
    if nvml is None:
        return None
    gpus = []
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            name = nvml.nvmlDeviceGetName(handle)
            gpus.append({"index": i, "name": name.decode() if isinstance(name, bytes) else str(name),
                         "total_bytes": int(mem.total), "used_bytes": int(mem.used)})
    except Exception:
        return None
    return gpus


def gpu_peak_gbps() -> float | None:
    """NVML: max memory clock (MHz) x bus width (bits) x 2 (double data rate) / 8, of GPU 0."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        clock_mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)
        bus_bits = nvml.nvmlDeviceGetMemoryBusWidth(handle)
    except Exception:
        return None
    return clock_mhz * 1e6 * bus_bits * 2 / 8 / 1e9


def gpu_note() -> str | None:
    if gpu_memory() is not None:
        return None
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return ("not available (nvidia-ml-py not installed: pip install 'llamabench[gpu]' "
                "on a machine with an NVIDIA GPU)")
    return "not available (no NVIDIA driver / GPU)"


def gpu_used_bytes() -> int | None:
    gpus = gpu_memory()
    return None if gpus is None else sum(g["used_bytes"] for g in gpus)


@dataclass(frozen=True)
class Gpu:
    name: str
    total_bytes: int


@dataclass(frozen=True)
class Machine:
    """The machine block of every record: what ran it. `memory_bandwidth` is set where a bench measured it."""

    host: str = ""
    cpu: str = ""
    cpu_cores_logical: int | None = None
    cpu_cores_physical: int | None = None
    ram_bytes: int | None = None
    gpus: tuple[Gpu, ...] = ()
    gpu_note: str | None = None
    os: str = ""
    python: str = ""
    memory_bandwidth: PeakBandwidth | None = None

    def series(self, backend: str | None = None) -> str:
        """The name of this machine's series in tables and plots: host, CPU or GPU, backend."""
        device = self.gpus[0].name if self.gpus else self.cpu or "?"
        return f"{self.host or '?'} ({device}{', ' + backend if backend else ''})"


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def this_machine() -> Machine:
    gpus = gpu_memory()
    return Machine(host=platform.node(), cpu=cpu_model(), cpu_cores_logical=os.cpu_count(),
                   cpu_cores_physical=psutil.cpu_count(logical=False), ram_bytes=int(psutil.virtual_memory().total),
                   gpus=tuple(Gpu(g["name"], g["total_bytes"]) for g in gpus or ()), gpu_note=gpu_note(),
                   os=f"{platform.system()} {platform.release()}", python=platform.python_version())


@dataclass(frozen=True)
class CpuPeak:
    """This CPU's FP32 vector peak: physical cores x clock x FLOPs per core and cycle (two FMA units of its widest
    vectors: AVX-512 64, AVX2 32, NEON 16), the figure its efficiency is fitted against (settings.speed_rates)."""

    flops: float
    words: str


def cpu_peak(threads: int = 0) -> CpuPeak:
    cores = physical_cores()
    used = min(threads, cores) if threads else cores
    flags = cpu_flags()
    per_cycle, isa = ((64, "AVX-512") if "avx512f" in flags else (32, "AVX2") if "avx2" in flags
                      else (16, "NEON") if {"asimd", "neon"} & flags or platform.machine() in ("arm64", "aarch64")
                      else (8, "SSE"))
    freq = psutil.cpu_freq()
    mhz = (freq.max or freq.current) if freq else 0.0
    if not mhz:
        mhz = 2000.0
    return CpuPeak(used * mhz * 1e6 * per_cycle, f"{used} core{'s' if used != 1 else ''} x {mhz / 1000:.2f} GHz x "
                                                 f"{per_cycle} FLOPs ({isa}, 2 FMA units)")
