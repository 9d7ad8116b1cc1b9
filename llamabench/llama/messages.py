"""The child protocol (`llama.child` and its parent `llama.worker`): every job, request and event, declared once.

One JSON object a line. A job is {"job": KIND, ...its fields} (the first line on the child's stdin), a request
to a dry-run child {"request": KIND, ...} (the lines after it), an event {"event": KIND, ...} (every line on
the child's stdout). Each is a frozen dataclass, written with `to_wire` (core.serial.to_dict) and read with
`read_job` / `read_request` / `read_event` (core.serial.from_dict): typed at both ends, checked on the way in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, Union

from ..core import serial
from ..memory.allocations import Allocations
from ..memory.divergence import QualityStats
from ..settings.bench_tests import BenchTest
from ..settings.params import Params
from ..settings.values import rpc_endpoints
from .devices import Device
from .user_model import GgufValue, TensorShape

T = TypeVar("T")


class _Job:
    tag: ClassVar[str] = "job"
    kind: ClassVar[str]


class _Request:
    tag: ClassVar[str] = "request"
    kind: ClassVar[str]


class _Event:
    tag: ClassVar[str] = "event"
    kind: ClassVar[str]


def _endpoints(job) -> None:
    """A job's devices as llama.cpp takes them: None, or the RPC endpoints / device names in order."""
    object.__setattr__(job, "rpc", rpc_endpoints(job.rpc) or None)


# jobs: the first line a child reads -----------------------------------------------------------------------------

@dataclass(frozen=True)
class CreateJob(_Job):
    """Create a context for real and report what it allocated (an `Alloc` event): `fit --verify`."""

    path: str
    params: Params
    rpc: tuple[str, ...] | None = None  # the devices: RPC endpoints (HOST:PORT) and ggml names, in order; ["none"]
    # llama-server's draft model (--spec-type draft-simple), loaded and given its context beside, on the same devices
    draft_path: str | None = None
    draft_params: Params | None = None
    draft_rpc: tuple[str, ...] | None = None  # -devd: the draft's own devices (["none"]: none); None: the target's
    # emulated cards (RPC endpoints of this machine) that answer as this GPU backend does (memory.backends.BACKENDS)
    backend: str | None = None
    backend_devices: tuple[str, ...] = ()
    kind: ClassVar[str] = "create"

    def __post_init__(self) -> None:
        _endpoints(self)
        if self.draft_rpc is not None:
            object.__setattr__(self, "draft_rpc", rpc_endpoints(self.draft_rpc))


@dataclass(frozen=True)
class BenchJob(CreateJob):
    """Create a context, then time its tests (`Fill`, `Measured` and `TestFailed` events): `bench`."""

    repetitions: int = 1
    tests: tuple[BenchTest, ...] = ()
    kind: ClassVar[str] = "bench"


@dataclass(frozen=True)
class DryRunsJob(_Job):
    """Load the model with no_alloc (a `Loaded` event), then answer one dry-run context per request."""

    path: str
    params: Params  # the placement: -ngl, --n-cpu-moe, -ts...
    rpc: tuple[str, ...] | None = None
    target_path: str | None = None  # an EAGLE3 head's target, loaded beside it with the same placement (ctx_other)
    backend: str | None = None  # as CreateJob's
    backend_devices: tuple[str, ...] = ()
    kind: ClassVar[str] = "dry_runs"

    def __post_init__(self) -> None:
        _endpoints(self)


@dataclass(frozen=True)
class DevicesJob(_Job):
    """List the devices llama.cpp sees (a `Devices` event); on CUDA the query makes a context on every GPU."""

    kind: ClassVar[str] = "devices"


@dataclass(frozen=True)
class TensorsJob(_Job):
    """Build a model from GGUF metadata alone (llama_model_init_from_user, no_alloc) and list every tensor
    llama.cpp created for it (a `Tensors` event)."""

    metadata: dict[str, GgufValue]
    kind: ClassVar[str] = "tensors"


@dataclass(frozen=True)
class RecipeJob(_Job):
    """The type llama.cpp's quantizer gives each tensor of a GGUF for a file type (llama_model_quantize with
    dry_run: llama_tensor_get_type, src/llama-quant.cpp), nothing written (a `Recipe` event)."""

    path: str
    ftype: int  # enum llama_ftype
    kind: ClassVar[str] = "recipe"


@dataclass(frozen=True)
class QualityJob(_Job):
    """Score a text as llama-perplexity does, the base (f16 KV: the model's, or `base_path`'s) and each choice of KV
    types side by side (a `QualityText`, then a `QualityChunk` per chunk): `quality`."""

    path: str
    params: Params  # n_ctx, batches, threads, flash attention, placement; the KV types are the choices'
    choices: tuple[tuple[str, str], ...]  # (type_k, type_v) of each lossy choice
    text: str
    chunks: int | None = None  # at most this many chunks; None: all the text holds
    base_path: str | None = None  # the reference weights; None: the model itself with f16 KV
    rpc: tuple[str, ...] | None = None
    kind: ClassVar[str] = "quality"

    def __post_init__(self) -> None:
        _endpoints(self)


@dataclass(frozen=True)
class TokensJob(_Job):
    """The text's tokens in the model's vocabulary, the model's vocabulary and trained context, and the base model's
    vocabulary where there is one: vocabularies alone are loaded (a `TextTokens` event)."""

    path: str
    text: str
    base_path: str | None = None
    kind: ClassVar[str] = "tokens"


# requests: the lines a dry-run child reads after its job --------------------------------------------------------

@dataclass(frozen=True)
class LoadRequest(_Request):
    """Load the model again with another placement and devices (a `Loaded` event)."""

    params: Params
    rpc: tuple[str, ...] | None = None
    kind: ClassVar[str] = "load"

    def __post_init__(self) -> None:
        _endpoints(self)


@dataclass(frozen=True)
class ContextRequest(_Request):
    """One dry-run context of the loaded placement (a `DryRunSizes` or a `DryFailed` event)."""

    params: Params
    kind: ClassVar[str] = "context"


# events: every line a child writes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Failed(_Event):
    """The job failed (llama.cpp refused the model or the context, or the child raised): why, in words."""

    reason: str
    kind: ClassVar[str] = "failed"


@dataclass(frozen=True)
class Alloc(_Event):
    """A context created for real: what llama.cpp allocated, and the process and devices around it."""

    allocations: Allocations
    model_size_bytes: int
    n_params: int
    model_desc: str
    n_ctx: int
    rss_before_bytes: int
    rss_after_bytes: int
    gpu_used_before_bytes: int | None  # NVML, all NVIDIA GPUs; None without NVML
    gpu_used_after_bytes: int | None
    create_seconds: float
    devices_before: tuple[Device, ...]  # every non-CPU device llama.cpp saw before the context, and after it
    devices: tuple[Device, ...]
    kind: ClassVar[str] = "alloc"

    def free_before(self, device: Device) -> int | None:
        """A device's free bytes before the context; None for one the context registered itself (an RPC server)."""
        return next((d.free_bytes for d in self.devices_before
                     if (d.name, d.description) == (device.name, device.description)), None)


@dataclass(frozen=True)
class Fill(_Event):
    """Filling the context to a test's depth: `done` of `total` tokens decoded in `seconds`."""

    depth: int
    done: int
    total: int
    seconds: float
    kind: ClassVar[str] = "fill"


@dataclass(frozen=True)
class Measured(_Event):
    """One test timed: a sample per repetition, in nanoseconds."""

    name: str
    samples_ns: tuple[int, ...]
    kind: ClassVar[str] = "test"


@dataclass(frozen=True)
class TestFailed(_Event):
    """One test that could not be timed, and why."""

    __test__ = False
    name: str
    reason: str
    kind: ClassVar[str] = "test_failed"


@dataclass(frozen=True)
class Loaded(_Event):
    """A dry-run child's model, loaded with no_alloc for one placement."""

    model_size_bytes: int
    n_params: int
    host_tensors: tuple[str, ...] | None  # the weight tensors it keeps in system RAM; None: not read
    breakdown_unavailable: str | None  # why llama.cpp's memory breakdown cannot be read here; None where it can
    kind: ClassVar[str] = "loaded"


@dataclass(frozen=True)
class DryRunSizes(_Event):
    """llama.cpp's sizes for one context from a no_alloc dry run (see engine.DryRun)."""

    allocations: Allocations
    n_ctx: int
    n_ctx_seq: int
    n_seq_max: int
    kind: ClassVar[str] = "dry"


@dataclass(frozen=True)
class DryFailed(_Event):
    """A dry-run context llama.cpp refused; the child goes on serving."""

    reason: str
    kind: ClassVar[str] = "dry_failed"


@dataclass(frozen=True)
class Devices(_Event):
    """Every device llama.cpp sees other than the CPU, in its order."""

    devices: tuple[Device, ...]
    kind: ClassVar[str] = "devices"


@dataclass(frozen=True)
class Tensors(_Event):
    """Every tensor llama.cpp created for a `TensorsJob`'s metadata, in its order."""

    tensors: tuple[TensorShape, ...]
    kind: ClassVar[str] = "tensors"


@dataclass(frozen=True)
class Recipe(_Event):
    """Each tensor's name and the ggml type a `RecipeJob`'s file type gives it, in the file's order."""

    types: tuple[tuple[str, str], ...]
    kind: ClassVar[str] = "recipe"


@dataclass(frozen=True)
class QualityText(_Event):
    """The text tokenized: its tokens, the chunks it gives at n_ctx, the vocabulary and the trained context."""

    n_tokens: int
    n_chunks: int
    n_vocab: int
    n_ctx_train: int
    rows_per_decode: int  # scored rows per decode call (the logits of every context bounded)
    kind: ClassVar[str] = "quality_text"


@dataclass(frozen=True)
class TextTokens(_Event):
    """A `TokensJob`'s answer."""

    n_tokens: int
    n_vocab: int
    n_ctx_train: int
    base_n_vocab: int | None = None
    kind: ClassVar[str] = "text_tokens"


@dataclass(frozen=True)
class QualityStep(_Event):
    """Within a chunk: `done` of its `total` tokens decoded by every context, `seconds` since the first chunk began."""

    chunk: int  # the chunk under way, from 1
    done: int
    total: int
    seconds: float
    kind: ClassVar[str] = "quality_step"


@dataclass(frozen=True)
class QualityChunk(_Event):
    """`done` chunks of `total` scored: every choice's statistics so far, in the job's order."""

    done: int
    total: int
    seconds: float
    stats: tuple[QualityStats, ...]
    kind: ClassVar[str] = "quality_chunk"


@dataclass(frozen=True)
class Done(_Event):
    """The job ended well."""

    kind: ClassVar[str] = "done"


@dataclass(frozen=True)
class Beat(_Event):
    """The child made progress (`what`: a share of the model loaded, a warm-up or a repetition done): what the
    parent's deadline for a --rpc host that stops answering counts from."""

    what: str
    kind: ClassVar[str] = "beat"


Job = Union[CreateJob, BenchJob, DryRunsJob, DevicesJob, TensorsJob, RecipeJob, QualityJob, TokensJob]
Request = Union[LoadRequest, ContextRequest]
Event = Union[Failed, Alloc, Fill, Measured, TestFailed, Loaded, DryRunSizes, DryFailed, Devices, Tensors, Recipe,
              QualityText, TextTokens, QualityStep, QualityChunk, Done, Beat]

JOBS = {c.kind: c for c in (CreateJob, BenchJob, DryRunsJob, DevicesJob, TensorsJob, RecipeJob, QualityJob,
                            TokensJob)}
REQUESTS = {c.kind: c for c in (LoadRequest, ContextRequest)}
EVENTS = {c.kind: c for c in (Failed, Alloc, Fill, Measured, TestFailed, Loaded, DryRunSizes, DryFailed, Devices,
                               Tensors, Recipe, QualityText, TextTokens, QualityStep, QualityChunk, Done, Beat)}


def to_wire(message: Job | Request | Event) -> dict:
    """A job, request or event as its JSON object: its kind under its tag, then its fields."""
    return {message.tag: message.kind, **serial.to_dict(message)}


def _read(family: Mapping[str, type[T]], tag: str, data: Any) -> T | None:
    """The message a JSON object holds, None where its tag names no message of this family; ShapeError (a
    ValueError) where a field has the wrong shape."""
    if not isinstance(data, Mapping) or not isinstance(data.get(tag), str) or data[tag] not in family:
        return None
    return serial.from_dict(family[data[tag]], {k: v for k, v in data.items() if k != tag})


def read_job(data: Any) -> Job:
    job = _read(JOBS, _Job.tag, data)
    if job is None:
        raise ValueError(f"not a job: {serial.describe(data)} (the jobs: {', '.join(JOBS)})")
    return job


def read_request(data: Any) -> Request:
    request = _read(REQUESTS, _Request.tag, data)
    if request is None:
        raise ValueError(f"not a request: {serial.describe(data)} (the requests: {', '.join(REQUESTS)})")
    return request


def read_event(data: Any) -> Event | None:
    """The event a child wrote; None for an object that is no event (passed over, as any other line is)."""
    return _read(EVENTS, _Event.tag, data)
