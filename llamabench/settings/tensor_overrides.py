"""llama.cpp's tensor buffer overrides (`-ot/--override-tensor REGEX=BUFFER,...`, `--cpu-moe`) and its load mode
(`--load-mode`: mmap or not, mlock), as the fit sizes them. Pure: names and regular expressions, no llama.cpp.

- `common/arg.cpp:252-283` (`parse_tensor_buffer_overrides`): the value is split at every ',', each piece at its
  first '=' into a pattern and a buffer type name, which must name a buffer type of a device of the build (CPU,
  CUDA0, CUDA_Host, Vulkan1, RPC0[HOST:PORT]...); repeated flags append in order.
- `common/arg.cpp:2760-2765`: `--cpu-moe` appends `\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU`
  (`common/common.h:1198` LLM_FFN_EXPS_REGEX); `--n-cpu-moe N` appends one such pattern per block 0..N-1, after.
- `src/llama-model-loader.cpp:1235-1259`: each weight tensor's name is searched (`std::regex_search`) with each
  pattern in order, and the first that matches places it. An override to CPU picks among the CPU's buffer types
  (`select_weight_buft(buft_list_cpu)`: a GPU's pinned host buffer first, CUDA_Host, where one is listed:
  `src/llama-model.cpp:1093-1107`); with mmap a host buffer type is swapped for the mapped file
  (`llama-model-loader.cpp:1267-1275`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..core.errors import UsageError

# common/common.h:1198, what --cpu-moe appends (and --n-cpu-moe per block, with `blk\.N` in front)
EXPERTS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
CPU = "CPU"
MAX_OVERRIDES = 1024  # -ot pieces of one fit: every weight name is matched against each of them
MAX_PATTERN_CHARS = 4096
MAX_REPEAT = 1000  # a{N}: libstdc++'s regex builds N states each; 1e8 passes Python's re and fails llama.cpp's load
HOST = None  # a tensor's place: None is system RAM, else the device's position in llama.cpp's device order

# the buffer type names a -ot may give (ggml_backend_buft_name of a device's buffer types): CPU, a device's own
# (CUDA0, Vulkan1, ROCm0, MTL0, SYCL0, CANN0, RPC0[HOST:PORT]) and its pinned host buffer (CUDA_Host, Vulkan_Host)
_DEVICE_BUFFER = re.compile(r"^(CUDA|Vulkan|ROCm|MTL|Metal|SYCL|CANN|MUSA|OpenCL|RPC)(\d+)(\[([^\]]+)\])?$")
_HOST_BUFFER = re.compile(r"^(CUDA|Vulkan|ROCm|SYCL|CANN|MUSA)_Host$")


class LoadMode(StrEnum):
    """llama.cpp's --load-mode (common/arg.cpp:2690-2708; include/llama.h:206-213): older builds spelled `none` as
    --no-mmap and `mmap+mlock` as --mlock."""

    AUTO = "auto"  # mmap, unless a device cannot (src/llama-model.cpp:1512-1520)
    NONE = "none"  # read into allocated buffers
    MMAP = "mmap"
    MLOCK = "mlock"  # read into allocated buffers, locked in RAM
    MMAP_MLOCK = "mmap+mlock"  # the file mapped and its pages locked
    DIO = "dio"  # direct I/O, no mapping

    @property
    def maps(self) -> bool:
        """The file is mapped: the host's weights are its pages (src/llama-model-loader.cpp:559)."""
        return self in (LoadMode.AUTO, LoadMode.MMAP, LoadMode.MMAP_MLOCK)

    @property
    def locks(self) -> bool:
        """The host's weights are locked in RAM (src/llama-model.cpp:1502, 1888-1893): never swapped or compressed."""
        return self in (LoadMode.MLOCK, LoadMode.MMAP_MLOCK)

    def host_weights_words(self, pinned_buffer: str = "") -> str:
        """How the host's weights sit in system RAM, in a word or two: mapped, allocated, pinned (in the GPU's host
        buffer `pinned_buffer`, CUDA_Host; "": none), locked."""
        if self.maps:
            return "mapped, locked (mlock)" if self.locks else "mapped"
        if pinned_buffer:
            return f"pinned ({pinned_buffer})"
        return "allocated, locked (mlock)" if self.locks else "allocated"


@dataclass(frozen=True)
class TensorOverride:
    """One `REGEX=BUFFER` of -ot, as given; `target`: where it places a tensor (HOST, or a device position)."""

    pattern: str
    buffer: str

    @property
    def text(self) -> str:
        return f"{self.pattern}={self.buffer}"

    @property
    def to_host(self) -> bool:
        return self.buffer == CPU or bool(_HOST_BUFFER.match(self.buffer))

    @property
    def pinned(self) -> bool:
        """A GPU's pinned host buffer named outright (CUDA_Host): pinned whatever the load mode."""
        return bool(_HOST_BUFFER.match(self.buffer))


def parse_overrides(value) -> tuple[str, ...]:
    """-ot's value (or the API's list of them) as llama.cpp splits it: pieces at ',', each `REGEX=BUFFER` with a
    pattern that compiles and a buffer type name of a device; each piece as given, in order."""
    texts = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if texts is None or any(not isinstance(t, str) for t in texts):
        raise UsageError(f"{value!r} is not REGEX=BUFFER (e.g. 'exps=CPU')")
    pieces = [piece for text in texts for piece in text.split(",")]
    if not pieces:
        raise UsageError("an empty list: give REGEX=BUFFER (e.g. 'exps=CPU')")
    if len(pieces) > MAX_OVERRIDES or any(len(p) > MAX_PATTERN_CHARS for p in pieces):
        raise UsageError(f"-ot: at most {MAX_OVERRIDES} overrides of at most {MAX_PATTERN_CHARS} characters each "
                         "(a model has a few thousand weight tensors; one pattern per block is enough)")
    for piece in pieces:
        override = _split(piece)
        if "\0" in piece or "\n" in piece:
            raise UsageError(f"'{piece!r}': a pattern with a NUL byte or a line break")
        try:
            re.compile(override.pattern)
        except re.error as exc:
            raise UsageError(f"'{override.pattern}' is not a regular expression ({exc})") from None
        bounds = re.findall(r"\{(\d+)(?:,(\d*))?\}", override.pattern)  # a{N} and a{N,M}: (N, M or "")
        counts = [int(n) for low_high in bounds for n in low_high if n]
        if any(n > MAX_REPEAT for n in counts):
            raise UsageError(f"'{override.pattern}': a repeat count above {MAX_REPEAT}: llama.cpp's std::regex "
                             "(libstdc++) refuses it when it loads the model (_GLIBCXX_REGEX_STATE_LIMIT)")
        if not (override.to_host or _DEVICE_BUFFER.match(override.buffer)):
            raise UsageError(f"'{override.buffer}' is not a buffer type llama.cpp names (CPU, CUDA0, CUDA_Host, "
                             "Vulkan1, ROCm0, MTL0, RPC0[HOST:PORT]: llama-server lists them when given a wrong one)")
    return tuple(pieces)


def _split(piece: str) -> TensorOverride:
    pattern, eq, buffer = piece.partition("=")  # the first '=', as common/arg.cpp:265
    if not eq:
        raise UsageError(f"'{piece}' is not REGEX=BUFFER (e.g. 'blk\\.(1[0-9])\\.ffn_.*_exps=CPU')")
    if not buffer:
        raise UsageError(f"'{piece}': no buffer type after '='")
    return TensorOverride(pattern, buffer)


def overrides_of(tensor_overrides: tuple[str, ...], cpu_moe: bool) -> tuple[TensorOverride, ...]:
    """Every override llama.cpp holds, in its order: -ot's, then --cpu-moe's (as the printed command orders them)."""
    out = tuple(_split(p) for p in tensor_overrides)
    return out + ((TensorOverride(EXPERTS_REGEX, CPU),) if cpu_moe else ())


def target(override: TensorOverride, remote: tuple[str, ...]) -> int | None:
    """Where an override puts a tensor: HOST (None), or the device's position in llama.cpp's device order (the --rpc
    hosts first, RPCn[HOST:PORT] by its endpoint; then this machine's devices, CUDA0 after them)."""
    if override.to_host:
        return HOST
    m = _DEVICE_BUFFER.match(override.buffer)
    backend, index, endpoint = m[1], int(m[2]), m[4]
    if backend == "RPC":
        if endpoint is None or endpoint not in remote:
            raise UsageError(f"-ot {override.text}: {override.buffer} names no --rpc host of this fit"
                             + (f" ({', '.join(remote)})" if remote else ""))
        return remote.index(endpoint)
    return len(remote) + index


@dataclass(frozen=True)
class Placer:
    """The overrides of one fit, compiled, each with its target: the first whose pattern a tensor name contains
    places it (regex_search, as llama.cpp). `first`: each tensor name's first matching rule (-1: none), where it was
    worked out ahead (`first_matches`, with a deadline: a pattern can take exponential time)."""

    rules: tuple[tuple[re.Pattern, int | None], ...] = ()
    first: "dict[str, int] | None" = None

    @classmethod
    def of(cls, overrides: tuple[TensorOverride, ...], remote: tuple[str, ...] = ()) -> "Placer":
        return cls(tuple((re.compile(o.pattern), target(o, remote)) for o in overrides))

    def with_matches(self, first: dict[str, int]) -> "Placer":
        return Placer(self.rules, dict(first))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def place(self, name: str, default: int | None) -> int | None:
        if self.first is not None and name in self.first:
            index = self.first[name]
            return default if index < 0 else self.rules[index][1]
        for pattern, where in self.rules:
            if pattern.search(name):
                return where
        return default

    @property
    def devices(self) -> set[int]:
        """The device positions the overrides name."""
        return {where for _, where in self.rules if where is not None}


def printed_flags(tensor_overrides: tuple[str, ...], cpu_moe: bool, load_mode: str) -> tuple[str, ...]:
    """The flags as llama-server takes them: -ot once with the overrides joined by ',' (the order kept), --cpu-moe,
    --load-mode where it is not auto."""
    out: tuple[str, ...] = ("-ot", ",".join(tensor_overrides)) if tensor_overrides else ()
    out += ("--cpu-moe",) if cpu_moe else ()
    return out + (("--load-mode", str(load_mode)) if load_mode != LoadMode.AUTO else ())


def first_matches(patterns: list[str], names: list[str]) -> list[int]:
    """Each name's first pattern that regex_search finds in it (-1: none): what a child works out under a deadline."""
    compiled = [re.compile(p) for p in patterns]
    return [next((i for i, p in enumerate(compiled) if p.search(name)), -1) for name in names]
