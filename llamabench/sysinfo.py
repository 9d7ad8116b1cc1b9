"""The one module that reads the machine: psutil (RSS, RAM, CPU) and NVML (GPU memory), by ctypes."""

from __future__ import annotations

import ctypes
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


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


@lru_cache(maxsize=1)
def _nvml():
    """libnvidia-ml, initialised, or None where there is no NVIDIA driver."""
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.nvmlInit_v2() == 0:
            return lib
    return None


def gpu_memory() -> list[dict] | None:
    """Per GPU: name, total and used bytes (NVML). None when NVML is not available."""
    lib = _nvml()
    if lib is None:
        return None
    count = ctypes.c_uint(0)
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
        return None
    gpus = []
    for i in range(count.value):
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
            continue
        mem = _NvmlMemory()
        name = ctypes.create_string_buffer(96)
        lib.nvmlDeviceGetName(handle, name, 96)
        if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) == 0:
            gpus.append({"index": i, "name": name.value.decode(errors="replace"),
                         "total_bytes": int(mem.total), "used_bytes": int(mem.used)})
    return gpus


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
        "gpu_note": None if gpus else "not available (no NVML / no NVIDIA GPU)",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
