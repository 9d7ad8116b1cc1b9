"""What a GPU backend does differently from the emulated card, where the compute buffer is sized. Pure data.

The emulated card is llama.cpp's RPC backend on this CPU: it places layers, KV and compute as a GPU does, but its
device answers as a CPU in four places that change the compute buffers of the same graph (ggml-rpc.cpp's device
interface, ggml_backend_rpc_device_i):
- **op offload.** CUDA, ROCm (HIP builds ggml-cuda), Vulkan and Metal implement `offload_op`: an op whose weight
  sits in host memory (`-ngl` below all, `--n-cpu-moe`, `-ot ...=CPU`) runs on the card when its batch reaches
  `op_offload_min_batch_size` (32; GGML_OP_OFFLOAD_MIN_BATCH), and ggml_backend_sched copies the weight into the
  card's compute buffer first (ggml-backend.cpp, ggml_backend_sched_backend_id_from_cur, "1.off"). The RPC device's
  offload_op is NULL, so the emulated card never does this. llama_context_params.op_offload (llama-server's
  --no-op-offload) turns it off on every backend.
- **flash attention's room.** ggml-cuda's buffer type gives a flash-attention op of a batch (its MMA or tile kernel)
  room after its output for f16 copies of a quantized K and V (ggml_cuda_flash_attn_ext_get_alloc_size): at 128k a
  q8_0 cache costs the f16 copy of one layer's K and V in the compute buffer.
- **the largest tensor an op takes.** ggml-vulkan refuses an op whose tensors exceed maxStorageBufferRange (4 GiB on
  discrete NVIDIA and AMD cards; 128 MiB on Mesa's lavapipe): its weight stays on the CPU, and the op is not offloaded.
- **the order of the nodes.** ggml-vulkan reorders each split's nodes before they are allocated (ggml_vk_graph_optimize,
  its graph_optimize), which changes what is alive at once: a few percent of the compute buffer.

A dry run on an emulated card given these rules (llama/breakdown.cpp, llamabench_emulate_backend; Vulkan's order is
its own function, copied) is llama.cpp's own graph and allocator with the target's answers. Not modelled, and so
assumed equal: buffer alignment (CUDA 128 bytes, the CPU 32: bytes a tensor), CUDA's padding of a quantized matrix's
last row to 512 elements (a row a tensor), CUDA's fusion of the MoE top-k and weighted sum (its graph_optimize keeps a
few tensors alive a few nodes longer), Metal's extra room for MUL_MAT_ID and flash attention, and buffers split above
a card's maxMemoryAllocationSize.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from ..core import environment
from ..settings.values import BACKEND_NAMES, UINT32_MAX  # maxStorageBufferRange is a uint32_t

OP_OFFLOAD_MIN_BATCH = 32  # op_offload_min_batch_size's default in ggml-cuda.cu, ggml-vulkan.cpp and ggml-metal
OFFLOAD_NONE, OFFLOAD_BATCH, OFFLOAD_MATMULS = 0, 1, 2
VULKAN_MAX_STORAGE_BUFFER_RANGE = 2**32 - 1  # discrete NVIDIA and AMD cards (Vulkan's limit maxStorageBufferRange)


@dataclass(frozen=True)
class BackendRules:
    """One backend's answers where a dry run's compute buffers depend on them (see the module's text)."""

    name: str  # as --backend spells it
    label: str  # as llama.cpp names its devices
    offload: int  # OFFLOAD_NONE, OFFLOAD_BATCH (CUDA, ROCm, Vulkan: get_op_batch_size) or OFFLOAD_MATMULS (Metal)
    min_batch: int = OP_OFFLOAD_MIN_BATCH
    max_tensor_bytes: int = 0  # an op with a larger tensor stays on the CPU (Vulkan); 0: no limit
    cuda_alloc_size: bool = False  # ggml-cuda's get_alloc_size of flash attention (f16 copies of a quantized K/V)
    vulkan_order: bool = False  # ggml-vulkan's order of a split's nodes (ggml_vk_graph_optimize) before allocation
    source: str = ""

    @property
    def offloads(self) -> bool:
        return self.offload != OFFLOAD_NONE

    @property
    def key(self) -> str:
        """What decides its dry runs, as a cache key: the name, and limits set apart from the defaults."""
        default = BACKENDS.get(self.name)
        extra = [f"{f}={getattr(self, f)}" for f in ("min_batch", "max_tensor_bytes")
                 if default is None or getattr(self, f) != getattr(default, f)]
        return ",".join([self.name, *extra])


AS_IS = "cpu"  # --backend cpu: the emulated card as it is, the CPU's answers
_CUDA_SOURCE = ("ggml-cuda.cu: ggml_backend_cuda_device_offload_op (batch >= 32), get_alloc_size; fattn.cu: f16 "
                "copies of a quantized K/V for a batch")
BACKENDS: dict[str, BackendRules] = {b.name: b for b in (
    BackendRules("cuda", "CUDA", OFFLOAD_BATCH, cuda_alloc_size=True, source=_CUDA_SOURCE),
    BackendRules("rocm", "ROCm", OFFLOAD_BATCH, cuda_alloc_size=True,
                 source="HIP builds ggml-cuda: " + _CUDA_SOURCE),
    BackendRules("vulkan", "Vulkan", OFFLOAD_BATCH, max_tensor_bytes=VULKAN_MAX_STORAGE_BUFFER_RANGE, vulkan_order=True,
                 source="ggml-vulkan.cpp: ggml_backend_vk_device_offload_op (batch >= 32), supports_op refuses tensors "
                        "over maxStorageBufferRange (4 GiB assumed), ggml_vk_graph_optimize orders each split's nodes"),
    BackendRules("metal", "Metal", OFFLOAD_MATMULS,
                 source="ggml-metal.cpp: ggml_backend_metal_device_offload_op (matmuls of a batch >= 32)"),
    BackendRules(AS_IS, "CPU", OFFLOAD_NONE,
                 source="the emulated card as it is: llama.cpp's RPC device answers as the CPU behind it (no op "
                        "offload)"),
)}
DEFAULT_BACKEND = "cuda"  # a card given by its size alone: the build most people who ask run


def emulates(name: str | None) -> bool:
    """Whether an emulated card answering as this backend (by --backend's name) is given rules of another's."""
    return name is not None and name != AS_IS


assert set(BACKENDS) == set(BACKEND_NAMES)  # --backend's names (settings.values) are these rules


MIN_BATCH_ENV = "GGML_OP_OFFLOAD_MIN_BATCH"  # llama.cpp's own: ggml-cuda.cu, ggml-vulkan.cpp and ggml-metal read it
VULKAN_RANGE_ENV = "LLAMABENCH_VULKAN_MAX_STORAGE_BUFFER_RANGE"  # the target card's, in bytes (vulkaninfo prints it)


INT_MAX = 2**31 - 1  # atoi's int: GGML_OP_OFFLOAD_MIN_BATCH's range in ggml


def rules_for(name: str | None, environ: Mapping[str, str] = {}) -> BackendRules | None:  # noqa: B006 - read only
    """The rules of a backend by --backend's name (None for None), with the limits `environ` sets: llama.cpp's
    GGML_OP_OFFLOAD_MIN_BATCH (an int, as ggml's atoi reads it: a sign and ASCII digits) and a Vulkan card's
    maxStorageBufferRange in bytes. Unset or blank: the defaults; anything else that is not such a number is one
    UsageError naming the variable (core.environment), on every backend, not a traceback or a silent default."""
    if name is None:
        return None
    rules = BACKENDS[name]
    raw = environ.get(MIN_BATCH_ENV, "")
    if raw.strip(environment.BLANK):
        batch = environment.whole_number(MIN_BATCH_ENV, raw, low=-INT_MAX - 1, high=INT_MAX, what="a batch size")
        if rules.offloads:
            rules = replace(rules, min_batch=batch)
    raw = environ.get(VULKAN_RANGE_ENV, "")
    if raw.strip(environment.BLANK):
        limit = environment.whole_number(VULKAN_RANGE_ENV, raw, low=1, high=UINT32_MAX, what="a count of bytes")
        if name == "vulkan":
            rules = replace(rules, max_tensor_bytes=limit)
    return rules
