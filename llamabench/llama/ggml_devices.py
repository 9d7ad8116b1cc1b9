"""The devices ggml sees, asked through llama-cpp-python's libggml: the GPUs, every device's memory, RPC servers
(emulated cards) registered once per process, and the backend an emulated card answers as. Only plain data leaves
(`devices.Device`, names); a device pointer only for the model params (`llama_params`).
"""

from __future__ import annotations

import ctypes
import os

from ..core.errors import EngineError
from ..memory.backends import emulates, rules_for
from . import breakdown
from .binding import ensure_logging, ggml_lib
from .devices import Device, is_endpoint, is_rpc_name

GGML_BACKEND_DEVICE_TYPE_CPU = 0  # ggml-backend.h: CPU 0, GPU 1, IGPU 2, ACCEL 3
GGML_BACKEND_DEVICE_TYPE_GPU = 1
GGML_BACKEND_DEVICE_TYPE_IGPU = 2
# ggml-metal.cpp: GGML_METAL_NAME "MTL" (MTL0); older builds named it Metal. Apple silicon shares its RAM (Metal
# reports type GPU: ggml-metal.cpp:683; its has_unified_memory, ggml-metal-device.m:1137)
METAL_NAMES = ("MTL", "Metal")


def _ggml():
    """libggml as llama_cpp loaded it, with the device-enumeration functions it does not bind."""
    from llama_cpp._ggml import libggml

    if not getattr(libggml, "_llamabench_typed", False):
        libggml.ggml_backend_dev_count.restype = ctypes.c_size_t
        libggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        libggml.ggml_backend_dev_get.restype = ctypes.c_void_p
        libggml.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        libggml.ggml_backend_dev_type.restype = ctypes.c_int
        libggml.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
        libggml.ggml_backend_dev_name.restype = ctypes.c_char_p
        libggml.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
        libggml.ggml_backend_dev_description.restype = ctypes.c_char_p
        libggml.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                                    ctypes.POINTER(ctypes.c_size_t)]
        libggml.ggml_backend_dev_memory.restype = None
        libggml._llamabench_typed = True
    return libggml


def gpu_devices() -> list[str]:
    """Names of the GPU devices this llama.cpp build sees (CUDA, Vulkan, Metal...); RPC servers are not counted.

    `llama_supports_gpu_offload` is true for any build with the RPC backend, GPU or not, so it cannot tell.
    """
    ensure_logging()  # llama_backend_init: the backends are registered
    lib = _ggml()
    names = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        if lib.ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU:
            name = lib.ggml_backend_dev_name(dev).decode("utf-8", errors="replace")
            if not is_rpc_name(name):
                names.append(name)
    return names


def device_memory() -> list[Device]:
    """Free and total memory of every device but the CPU (CUDA, Vulkan, Metal, RPC...), as llama.cpp's own fit
    reads it (`ggml_backend_dev_memory`, common/fit.cpp): backend-neutral, where NVML sees NVIDIA cards only."""
    ensure_logging()
    lib = _ggml()
    out = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        kind = int(lib.ggml_backend_dev_type(dev))
        if kind == GGML_BACKEND_DEVICE_TYPE_CPU:
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        name = lib.ggml_backend_dev_name(dev).decode("utf-8", errors="replace")
        out.append(Device(name=name,
                          description=(lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", errors="replace"),
                          free_bytes=int(free.value), total_bytes=int(total.value),
                          is_gpu=kind in (GGML_BACKEND_DEVICE_TYPE_GPU, GGML_BACKEND_DEVICE_TYPE_IGPU),
                          unified=kind == GGML_BACKEND_DEVICE_TYPE_IGPU or name.startswith(METAL_NAMES)))
    return out


def supports_gpu_offload() -> bool:
    """A GPU build with a GPU to offload to (not merely the RPC backend compiled in)."""
    return bool(gpu_devices())


_rpc_devices: dict[str, int] = {}  # endpoint -> ggml_backend_dev_t, registered once per process


def _rpc_device(endpoint: str) -> int:
    """Register an RPC server (an emulated card) with ggml once; its device pointer."""
    if endpoint not in _rpc_devices:
        rpc, ggml = ggml_lib("ggml-rpc"), ggml_lib("ggml")
        rpc.ggml_backend_rpc_add_server.argtypes = [ctypes.c_char_p]
        rpc.ggml_backend_rpc_add_server.restype = ctypes.c_void_p
        ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
        ggml.ggml_backend_reg_dev_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        ggml.ggml_backend_reg_dev_get.restype = ctypes.c_void_p
        reg = rpc.ggml_backend_rpc_add_server(endpoint.encode())
        if not reg:
            raise EngineError(f"llama.cpp could not reach the RPC server at {endpoint}")
        ggml.ggml_backend_register(reg)
        _rpc_devices[endpoint] = ggml.ggml_backend_reg_dev_get(reg, 0)
    return _rpc_devices[endpoint]


_emulated: dict[str, str] = {}  # endpoint -> the GPU backend whose rules that emulated card answers with


def emulate_backend(backend: str | None, endpoints) -> None:
    """From now on in this process, these RPC endpoints (emulated cards) answer as `backend` does where compute
    buffers are sized (memory.backends): op offload, flash attention's room, Vulkan's limit and node order. None
    or "cpu": as they are."""
    for endpoint in list(_emulated):
        if endpoint in _rpc_devices:
            breakdown.emulate_backend(_rpc_devices[endpoint], None)
    _emulated.clear()
    if emulates(backend):
        _emulated.update({e: backend for e in endpoints})


NO_DEVICE = "none"  # a job's device list ["none"]: the CPU alone, as llama.cpp's `-dev none`, even on a GPU build


def find_device(name: str) -> int:
    """A device by what a job names it: an RPC server "HOST:PORT", or a ggml device name (CUDA0, Vulkan0)."""
    if is_endpoint(name):
        dev = _rpc_device(name)
        if name in _emulated:
            breakdown.emulate_backend(dev, rules_for(_emulated[name], os.environ))
        return dev
    lib = _ggml()
    lib.ggml_backend_dev_by_name.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_dev_by_name.restype = ctypes.c_void_p
    dev = lib.ggml_backend_dev_by_name(name.encode())
    if not dev:
        raise EngineError(f"llama.cpp has no device named {name}")
    return dev
