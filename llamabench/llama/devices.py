"""A device as llama.cpp names and reports it: the one `Device` type, and the one rule for an RPC server's name.

A job names a device by ggml's name (CUDA0, Vulkan0; `none` for the CPU alone) or, for an RPC server (a remote
host, an emulated card), by its endpoint HOST:PORT. llama.cpp prints an RPC server's buffers under the name of its
first device, `RPC0[HOST:PORT]` (ggml-rpc.cpp), and every RPC device's name begins with "RPC". Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RPC_PREFIX = "RPC"  # ggml-rpc.cpp: RPC<i>[HOST:PORT]
_RPC_ENDPOINT = re.compile(r"\[.*\]$")


def is_endpoint(device: str) -> bool:
    """Whether a job's device is an RPC server's HOST:PORT, not a ggml device name (CUDA0, Vulkan0, none)."""
    return ":" in device


def buffer_name(device: str) -> str:
    """The name llama.cpp prints a device's buffers under: RPC0[HOST:PORT] for an RPC server's first device
    (ggml-rpc.cpp), the device's own name (CUDA0, Vulkan0) otherwise."""
    return f"{RPC_PREFIX}0[{device}]" if is_endpoint(device) else device


def is_rpc_name(name: str) -> bool:
    """Whether a device or buffer name, as llama.cpp prints it, is an RPC server's (RPC0[HOST:PORT])."""
    return name.startswith(RPC_PREFIX)


def without_endpoint(name: str) -> str:
    """A device or buffer name without an RPC server's [HOST:PORT] (RPC0[127.0.0.1:50052] -> RPC0)."""
    return _RPC_ENDPOINT.sub("", name)


@dataclass(frozen=True)
class Device:
    """One device llama.cpp sees other than the CPU (CUDA, Vulkan, Metal, RPC...), and its memory now, as
    llama.cpp's own fit reads it (`ggml_backend_dev_memory`, common/fit.cpp)."""

    name: str  # ggml's name: Vulkan0, CUDA0, Metal, RPC0[127.0.0.1:50052]
    description: str  # the device itself: llvmpipe (LLVM 15.0.6, 256 bits), NVIDIA GeForce RTX 4090
    free_bytes: int
    total_bytes: int
    is_gpu: bool  # ggml's device type GPU or IGPU (an RPC server's device says GPU too)
    unified: bool = False  # it shares the system RAM: ggml's type IGPU (Vulkan uma, CUDA on GB10), or Metal

    @property
    def is_rpc(self) -> bool:
        return is_rpc_name(self.name)

    @property
    def is_local_gpu(self) -> bool:
        """A GPU of this machine: not an RPC server's device."""
        return self.is_gpu and not self.is_rpc
