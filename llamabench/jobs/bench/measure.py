"""What one timed test measured, and the theory set beside it: typed blocks of a bench record. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import LlamabenchError
from ...memory import speed
from ...memory.allocations import Allocations
from ...memory.footprint import Footprint, compute_footprint
from ...model.layout import ModelGeometry
from ...settings.bench_tests import BenchTest, TestKind
from ...settings.params import Params


@dataclass(frozen=True)
class DeviceMemory:
    """One device's memory around context creation, from ggml (`ggml_backend_dev_memory`, every backend)."""

    name: str  # as llama.cpp names it: Vulkan0, CUDA0, Metal, RPC0[127.0.0.1:50052]
    description: str  # the device itself: llvmpipe (LLVM 15.0.6, 256 bits), NVIDIA GeForce RTX 4090
    total_bytes: int
    free_after_bytes: int
    free_before_bytes: int | None = None  # None for a device registered by the context itself (an RPC server)

    @property
    def used_delta_bytes(self) -> int | None:
        return None if self.free_before_bytes is None else self.free_before_bytes - self.free_after_bytes


@dataclass(frozen=True)
class Memory:
    """The process and the devices around context creation (psutil; ggml for every backend; NVML for NVIDIA)."""

    rss_before_bytes: int
    rss_after_bytes: int
    gpu_used_before_bytes: int | None = None  # NVML, all NVIDIA GPUs
    gpu_used_after_bytes: int | None = None
    gpu_note: str | None = None  # why there is no NVML figure
    devices: tuple[DeviceMemory, ...] = ()  # every non-CPU device llama.cpp sees, in its order

    @property
    def rss_delta_bytes(self) -> int:
        return self.rss_after_bytes - self.rss_before_bytes

    @property
    def gpu_delta_bytes(self) -> int | None:
        if self.gpu_used_before_bytes is None or self.gpu_used_after_bytes is None:
            return None
        return self.gpu_used_after_bytes - self.gpu_used_before_bytes


@dataclass(frozen=True)
class Measurement:
    """One test of one context: the samples, or why there are none, and what the context allocated."""

    params: Params
    test: BenchTest
    repetitions: int
    samples_ns: tuple[int, ...] = ()
    reason: str | None = None
    allocations: Allocations | None = None
    memory: Memory | None = None
    model_desc: str | None = None
    model_size_bytes: int | None = None
    n_params: int | None = None


@dataclass(frozen=True)
class WeightsBasis:
    """What the roofline of a bench record needs of the weights: all bytes, and those one decoded token reads."""

    all_bytes: int
    active_bytes: int
    basis: str


@dataclass(frozen=True)
class Roofline:
    """Bytes (and attention FLOPs) per token of one test, the bandwidth that achieves, its share of the peak."""

    bytes_per_token: int
    weights_bytes: int
    kv_read_bytes: int
    recurrent_bytes: int
    attention_flops: int
    basis: str
    full_gqa_bytes_per_token: int | None = None
    full_gqa_attention_flops: int | None = None
    achieved_gbps: float | None = None
    peak_gbps: float | None = None
    mbu: float | None = None

    @property
    def cost(self) -> speed.TokenCost:
        return speed.TokenCost(0, self.weights_bytes, self.kv_read_bytes, self.recurrent_bytes, self.attention_flops)


def theory(geometry: ModelGeometry, params: Params) -> tuple[Footprint | None, str | None]:
    """The footprint of these parameters, or why there is none (a quantized V without flash attention...)."""
    try:
        return compute_footprint(geometry, params), None
    except LlamabenchError as exc:
        return None, str(exc)


def roofline(geometry: ModelGeometry, weights: WeightsBasis | None, params: Params, test: BenchTest,
             avg_ts: float | None, peak_gbps: float | None) -> Roofline | None:
    if weights is None:
        return None
    cost = speed.test_cost(geometry, params, weights.all_bytes, weights.active_bytes, str(test.kind), test.depth,
                           test.n_tokens)
    achieved = cost.total_bytes * avg_ts / 1e9 if avg_ts else None
    gqa = speed.token_cost(geometry, params, weights.active_bytes, test.depth + test.n_tokens // 2,
                           as_full_gqa=True) if test.kind is TestKind.TG else None
    return Roofline(cost.total_bytes, cost.weights_bytes, cost.kv_bytes, cost.recurrent_bytes, cost.attention_flops,
                    f"{weights.basis}; KV read at the test's middle depth" if test.kind is TestKind.TG
                    else f"{weights.basis}; every weight once per ubatch",
                    gqa.total_bytes if gqa else None, gqa.attention_flops if gqa else None,
                    round(achieved, 2) if achieved else None, peak_gbps,
                    round(achieved / peak_gbps, 4) if achieved and peak_gbps else None)
