"""The one module that reads the machine: psutil (RSS, RAM, CPU) and NVML (GPU memory, through nvidia-ml-py)."""

from __future__ import annotations

import os
import platform
from functools import lru_cache


def process_rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def available_ram_bytes() -> int:
    import psutil

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


def gpu_note() -> str | None:
    if gpu_memory() is not None:
        return None
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return "not available (nvidia-ml-py not installed: pip install 'llamabench[gpu]' on a machine with an NVIDIA GPU)"
    return "not available (no NVIDIA driver / GPU)"


def gpu_used_bytes() -> int | None:
    gpus = gpu_memory()
    return None if gpus is None else sum(g["used_bytes"] for g in gpus)


def machine_block() -> dict:
    import psutil

    gpus = gpu_memory()
    return {
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "ram_bytes": int(psutil.virtual_memory().total),
        "gpu": [{"name": g["name"], "total_bytes": g["total_bytes"]} for g in gpus] if gpus else None,
        "gpu_note": gpu_note(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
