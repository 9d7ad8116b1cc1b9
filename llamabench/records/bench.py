"""The record of `bench`: one timed test in one real context, with what the context allocated, the process and
devices around it, llama-server's own timings where it ran there, and the theory beside it.

`BenchResult` declares what one test of one context measured once: the job's `Measurement` and the stored
`BenchRecord` both carry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core import stats
from ..core.units import MIB
from ..llama.devices import without_endpoint
from ..memory import speed
from ..memory.allocations import PRINTED_TOLERANCE_BYTES, Allocations, bytes_equal, printed_equal
from ..memory.footprint import Footprint, pad
from ..memory.unified import UnifiedMemory
from ..settings.bench_tests import BenchTest
from ..settings.params import Params
from ..settings.values import Runtime
from .record import Record, RecordKind


@dataclass(frozen=True)
class DeviceMemory:
    """One device's memory around context creation, from ggml (`ggml_backend_dev_memory`, every backend)."""

    name: str  # as llama.cpp names it: Vulkan0, CUDA0, Metal, RPC0[127.0.0.1:50052]
    description: str  # the device itself: llvmpipe (LLVM 15.0.6, 256 bits), NVIDIA GeForce RTX 4090
    total_bytes: int
    free_after_bytes: int
    free_before_bytes: int | None = None  # None for a device registered by the context itself (an RPC server)


@dataclass(frozen=True)
class Memory:
    """The process and the devices around context creation (psutil; ggml for every backend; NVML for NVIDIA)."""

    rss_before_bytes: int
    rss_after_bytes: int
    gpu_used_before_bytes: int | None = None  # NVML, all NVIDIA GPUs
    gpu_used_after_bytes: int | None = None
    gpu_note: str | None = None  # why there is no NVML figure
    devices: tuple[DeviceMemory, ...] = ()  # every non-CPU device llama.cpp sees, in its order
    pool: UnifiedMemory | None = None  # a unified device (a Mac, an iGPU, GB10): its buffers and the host's, one RAM

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


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """One test of one context: the samples, or why there are none, what the context allocated, and the program
    that ran it."""

    params: Params
    test: BenchTest
    repetitions: int
    samples_ns: tuple[int, ...] = ()
    reason: str | None = None  # why it failed; None when it was measured
    allocations: Allocations | None = None
    memory: Memory | None = None
    runtime: str = Runtime.LLAMA_CPP_PYTHON.value  # the program timed: a Llama() context, or llama-server over HTTP
    server: ServerBench | None = None  # llama-server: its command, slots, parallel requests and own timings

    @property
    def ok(self) -> bool:
        return bool(self.samples_ns) and self.reason is None


@dataclass(frozen=True, kw_only=True)
class Measurement(BenchResult):
    """What the bench job hands on: a test's result, and the model file as llama.cpp loaded it (where it did)."""

    model_desc: str | None = None
    model_size_bytes: int | None = None
    n_params: int | None = None


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


@dataclass(frozen=True, kw_only=True)
class BenchRecord(Record, BenchResult):
    """One timed test in one real context (`bench`), with what the context allocated and the theory beside it."""

    footprint: Footprint | None = None  # theory; None where the parameters have none (theory_error says why)
    theory_error: str | None = None
    roofline: Roofline | None = None
    # the devices the model was spread over, in llama.cpp's order (RPC0[HOST:PORT], CUDA0)
    devices: tuple[str, ...] = ()
    kind: ClassVar[RecordKind] = RecordKind.BENCH

    def inconsistency(self) -> str | None:
        if not self.samples_ns and self.reason is None:
            return "neither samples nor a reason why it failed"
        test = self.test
        if self.ok and test.depth + test.n_tokens > pad(max(self.params.n_ctx, 1)):
            return f"a test of {test.depth} + {test.n_tokens} tokens measured in a context of {self.params.n_ctx}"
        rf = self.roofline
        if rf and (rf.full_gqa_bytes_per_token is None) != (rf.full_gqa_attention_flops is None):
            return "roofline: full_gqa_bytes_per_token and full_gqa_attention_flops go together"
        if self.server is not None and self.runtime != Runtime.LLAMA_SERVER:
            return f"runtime {self.runtime!r} with a llama-server block"
        if self.server is None and self.runtime == Runtime.LLAMA_SERVER and self.ok:  # a failed test: maybe none timed
            return f"runtime '{Runtime.LLAMA_SERVER}' measured without a llama-server block"
        return None

    @property
    def status(self) -> str:
        return "ok" if self.ok else "failed"

    def summary(self) -> dict:
        out = {"status": self.status, "avg_ts": self.avg_ts, "stddev_ts": self.stddev_ts, "kv_match": self.kv_match,
               "recurrent_match": self.recurrent_match, "runtime": self.runtime}
        if self.server:
            kind = str(self.test.kind)
            out |= {"concurrency": self.concurrency, "request_ts": self.server.request_ts(kind, self.test.n_tokens),
                    "server_ts": self.server.server_ts(kind), "ttft_ms": self.server.ttft_ms,
                    "draft_acceptance": self.server.acceptance}
        return out

    @property
    def concurrency(self) -> int:
        return self.server.concurrency if self.server else 1

    @property
    def samples_ts(self) -> tuple[float, ...]:
        """Total t/s of each repetition: every parallel request's tokens over the wall time of them all."""
        return tuple(stats.tokens_per_second(self.test.n_tokens * self.concurrency, ns) for ns in self.samples_ns)

    @property
    def avg_ts(self) -> float | None:
        return stats.mean(self.samples_ts) if self.samples_ns else None

    @property
    def stddev_ts(self) -> float | None:
        return stats.stddev(self.samples_ts) if self.samples_ns else None

    @property
    def spread(self) -> float | None:
        """stddev / mean of the t/s samples: how far one repetition is from the next."""
        return self.stddev_ts / self.avg_ts if self.avg_ts else None

    @property
    def backend(self) -> str:
        """The devices that hold the context's buffers, as llama.cpp names them (`Vulkan0`, `CUDA0`, `RPC0`), or
        CPU; what each device is (`llvmpipe`, `NVIDIA GeForce RTX 4090`) is in `memory.devices`. A record without
        allocations (a failed context) says GPU where it asked for layers on one."""
        if self.allocations is None:
            return "GPU" if self.params.n_gpu_layers else "CPU"
        cards = self.allocations.card_names
        # an RPC device by its number alone: its HOST:PORT changes from run to run, the series should not
        return " + ".join(without_endpoint(c) for c in cards) if cards else "CPU"

    @property
    def series(self) -> str:
        """The machine and backend; llama-server records are a series of their own (the runtime, the slots and
        parallel requests beyond one)."""
        base = self.machine.series(self.backend)
        if self.runtime != Runtime.LLAMA_SERVER:
            return base
        c = self.concurrency
        return f"{base}, {Runtime.LLAMA_SERVER}" + (f" x{c} parallel" if c > 1 else "")

    @property
    def kv_match(self) -> bool | None:
        """Whether llama.cpp allocated the KV the theory says (None without both)."""
        if self.allocations is None or self.footprint is None:
            return None
        fp, printed = self.footprint, self.allocations.kv_caches
        # one rounding to 0.01 MiB per printed cache line: an SWA model prints two (gpt-oss's 6.38 + 6.38 MiB for
        # 6.375 each: 12.76 against 12.75), llama-server's MTP draft context one of its own beside the target's
        return bytes_equal(fp.kv_bytes + fp.mtp_kv_bytes, self.allocations.kv_mib * MIB,
                           PRINTED_TOLERANCE_BYTES * max(1, len(printed)))

    @property
    def recurrent_match(self) -> bool | None:
        if self.allocations is None or self.footprint is None:
            return None
        return printed_equal(self.footprint.recurrent_state_bytes, self.allocations.recurrent_mib)
