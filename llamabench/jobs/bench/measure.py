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
class ServerRequest:
    """One request of a test timed through llama-server: the client's clock beside the server's own `timings`."""

    client_ns: int  # pp: send to first token (TTFT); tg: first to last streamed token
    ttft_ns: int  # send to the first streamed token
    prompt_n: int  # timings.prompt_n: prompt tokens the server processed (the rest came from its cache)
    prompt_ms: float
    predicted_n: int  # timings.predicted_n: tokens generated
    predicted_ms: float  # first to last generated token, as the server counts it
    cache_n: int = 0  # timings.cache_n: prompt tokens taken from the prompt cache
    draft_n: int | None = None  # speculative decoding: tokens drafted, and accepted (when the server drafts)
    draft_n_accepted: int | None = None

    @property
    def server_ts(self) -> float | None:
        """The server's own t/s: prompt tokens per prompt second, or decode steps (n - 1) per decode second."""
        return None if not self.prompt_ms else self.prompt_n / self.prompt_ms * 1e3

    @property
    def server_tg_ts(self) -> float | None:
        return (self.predicted_n - 1) / self.predicted_ms * 1e3 if self.predicted_n > 1 and self.predicted_ms else None


@dataclass(frozen=True)
class ServerBench:
    """How a test ran through llama-server: the exact command, the slots, the parallel requests, each request."""

    command: str  # the exact command line started, or "" where the bench attached to a running server (url)
    url: str
    concurrency: int = 1  # parallel requests, one per slot
    slots: int = 1
    requests: tuple[ServerRequest, ...] = ()  # every request of every repetition, in order
    fill_ms: float | None = None  # the server's prompt time to fill the context to the depth (all slots)

    def server_ts(self, kind: str) -> float | None:
        """Mean over the requests of the server's own per-request t/s."""
        values = [r.server_tg_ts if kind == "tg" else r.server_ts for r in self.requests]
        values = [v for v in values if v]
        return sum(values) / len(values) if values else None

    def request_ts(self, kind: str, n_tokens: int) -> float | None:
        """Mean over the requests of the client's per-request t/s."""
        steps = n_tokens - 1 if kind == "tg" else n_tokens
        values = [steps / r.client_ns * 1e9 for r in self.requests if r.client_ns and steps > 0]
        return sum(values) / len(values) if values else None

    @property
    def ttft_ms(self) -> float | None:
        return sum(r.ttft_ns for r in self.requests) / len(self.requests) / 1e6 if self.requests else None

    @property
    def acceptance(self) -> float | None:
        """Speculative decoding: accepted / drafted tokens over every request (None without a draft)."""
        drafted = sum(r.draft_n or 0 for r in self.requests)
        return sum(r.draft_n_accepted or 0 for r in self.requests) / drafted if drafted else None


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
    runtime: str = "llama-cpp-python"  # or "llama-server"
    server: ServerBench | None = None


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


def theory(geometry: ModelGeometry | None, params: Params, *, no_rule: str = "") -> tuple[Footprint | None, str | None]:
    """The footprint of these parameters, or why there is none (a quantized V without flash attention, an
    architecture without a layout rule: `no_rule` says why)."""
    if geometry is None:
        return None, no_rule or "no layout rule for this architecture: llama.cpp's own numbers only"
    try:
        return compute_footprint(geometry, params), None
    except LlamabenchError as exc:
        return None, str(exc)


def roofline(geometry: ModelGeometry | None, weights: WeightsBasis | None, params: Params, test: BenchTest,
             avg_ts: float | None, peak_gbps: float | None) -> Roofline | None:
    if weights is None or geometry is None:
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
