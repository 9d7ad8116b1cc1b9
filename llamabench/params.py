"""One parameter schema: every option of every command declared once, as llama.cpp names it.

`Params` holds the llama.cpp model and context parameters of one configuration (the fields of
`llama_context_params` / `llama_model_params` that llamabench sets, and llama-bench's threadpool);
`SCHEMA` declares each option once (flags, aliases, parser, default, help). From it come:
- argparse for every command (`add_arguments`), short flags as llama-bench spells them;
- the sweep expansion (`expand`): comma lists and llama-bench's ranges (`512-2048+512`, `1-16*2`);
- the keyword arguments of the Python API (`parse_value` takes 32768, "32k", [4096, "8k"] alike);
- the child job: a `Params.to_dict()`.
Pure: no file, no llama.cpp.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from . import cache_types, serial
from .errors import UsageError
from .units import GIB, MIB

DEFAULT_N_CTX = 131072  # the one default context length: 128k, the question this tool answers
UINT32_MAX = 2**32 - 1  # n_ctx, n_batch, n_ubatch and n_seq_max are uint32 in llama_context_params
LLAMA_MAX_SEQ = 256  # src/llama-cparams.h


@dataclass(frozen=True)
class Params:
    """llama.cpp's parameters of one configuration: one context, one placement, one threadpool."""

    n_ctx: int = DEFAULT_N_CTX  # 0: the model's trained length
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = True
    n_seq: int = 1  # n_seq_max
    kv_unified: bool = False
    swa_full: bool = False
    n_batch: int = 2048
    n_ubatch: int = 512
    n_rs_seq: int = 0  # recurrent-state snapshots per sequence (speculative decoding rollback)
    n_outputs_max: int = 0  # outputs reserved in a batch; 0: n_batch (llama_context_default_params)
    n_outputs_max_per_seq: int = 1  # outputs per sequence; 0: n_outputs_max
    n_gpu_layers: int = 0
    n_cpu_moe: int = 0  # routed experts of the first n_cpu_moe layers kept in system RAM
    tensor_split: tuple[float, ...] = ()  # -ts: each device's share of the layers, in device order; (): by free memory
    split_mode: str = "layer"  # -sm: layer (pipelined over the devices) or none (the -mg device alone)
    main_gpu: int = 0  # -mg: the device of -sm none
    n_threads: int = 0  # 0: the machine's physical cores
    repack: bool = True  # use_extra_bufts: the repacked CPU copy of the weights (CPU_REPACK, AMX)
    poll: int = 50
    cpu_mask: str = "0x0"
    cpu_strict: bool = False
    prio: int = 0

    def replace(self, **changes) -> "Params":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> "Params":
        return serial.from_dict(cls, data)

    @property
    def label(self) -> str:
        """The fields that differ from the defaults, as llama-bench flags: for progress lines and plans."""
        parts = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value != field.default or field.name in ("n_ctx", "type_k", "type_v"):
                spec = SCHEMA[field.name]
                parts.append(f"{spec.flags[0]} {spec.show(value)}")
        return " ".join(parts)


class TestKind(StrEnum):
    __test__ = False  # not a pytest class
    PP = "pp"  # prompt processing (prefill)
    TG = "tg"  # token generation (decode)


@dataclass(frozen=True)
class BenchTest:
    """One timed test inside a context: llama-bench's pp512, tg128 @ d32768."""

    __test__ = False
    kind: TestKind
    n_tokens: int
    depth: int = 0

    @property
    def name(self) -> str:
        base = f"{self.kind}{self.n_tokens}"
        return base if self.depth == 0 else f"{base} @ d{self.depth}"


def bench_tests(n_prompt: Iterable[int], n_gen: Iterable[int], depths: Iterable[int]) -> list[BenchTest]:
    """The tests of one context in the order a child runs them: depths ascending, pp then tg."""
    n_prompt, n_gen, depths = list(n_prompt), list(n_gen), sorted(set(depths))
    check_plan_size("the tests of one context", {"-p/-n values": len(n_prompt) + len(n_gen), "depths": len(depths)},
                    MAX_TESTS)
    out = []
    for depth in depths:
        out += [BenchTest(TestKind.PP, p, depth) for p in n_prompt if p > 0]
        out += [BenchTest(TestKind.TG, n, depth) for n in n_gen if n > 0]
    return out


class OutputFormat(StrEnum):
    TEXT = "text"  # a table for people
    MD = "md"
    CSV = "csv"
    JSON = "json"
    JSONL = "jsonl"


# parsers: text -> value, each raising UsageError with a message for the user ---------------------
def _uint(text, low: int) -> int:
    if isinstance(text, bool):
        raise UsageError(f"{text!r} is not an integer")
    try:
        value = int(text) if isinstance(text, int) else int(str(text).strip())
    except ValueError:
        raise UsageError(f"'{text}' is not an integer") from None
    if value < low:
        raise UsageError(f"{value} must be at least {low}" if low else f"{value} cannot be negative")
    if value > UINT32_MAX:
        raise UsageError(f"{value} is larger than llama.cpp takes (a uint32: at most {UINT32_MAX})")
    return value


def positive_int(text) -> int:
    return _uint(text, 1)


def nonneg_int(text) -> int:
    return _uint(text, 0)


def tokens(text) -> int:
    """A token count: 4096, 32k (x 1024). Used for n_ctx, depths, prompt and generation lengths."""
    if isinstance(text, int) and not isinstance(text, bool):
        return _uint(text, 0)
    low = str(text).strip().lower()
    try:
        value = int(low.removesuffix("k")) * (1024 if low.endswith("k") else 1)
    except ValueError:
        raise UsageError(f"'{text}' is not a token count (write e.g. 4096 or 32k)") from None
    return _uint(value, 0)


def on_off(text) -> bool:
    if isinstance(text, bool):
        return text
    key = str(text).strip().lower()
    if key in ("on", "1", "true", "yes"):
        return True
    if key in ("off", "0", "false", "no"):
        return False
    raise UsageError(f"'{text}': expected on or off")


def cache_type(text) -> str:
    return cache_types.parse_cache_type(str(text))


def cpu_mask(text) -> str:
    """common/common.cpp parse_cpu_mask: hex digits, lowest bit = CPU 0, '0x' optional."""
    mask = str(text).strip().lower()
    if not re.fullmatch(r"(0x)?[0-9a-f]{1,128}", mask):
        raise UsageError(f"'{text}' is not a hex CPU mask (e.g. 0x3)")
    return mask if mask.startswith("0x") else "0x" + mask


def priority(text) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = None
    if value not in (-1, 0, 1, 2, 3):
        raise UsageError(f"'{text}': thread priority is -1 (low), 0 (normal), 1, 2 or 3 (realtime)")
    return value


RUNTIMES = ("llama-server", "llama-cpp-python")  # runtimes.Runtime's values


def runtime_name(text) -> str:
    name = str(text).strip().lower()
    if name not in RUNTIMES:
        raise UsageError(f"'{text}' is not a runtime", hint=" or ".join(RUNTIMES))
    return name


def int_at_least_minus_one(text) -> int:
    """An integer where -1 means "no limit" (llama-server's --cache-ram)."""
    if str(text).strip() == "-1":
        return -1
    return _uint(text, 0)


LLAMA_MAX_DEVICES = 16  # llama_max_devices() of this build: the length of llama_model_params.tensor_split
SPLIT_MODES = ("layer", "none")
SPLIT_MODES_REFUSED = {
    "row": "row split (weights cut by rows across the cards) is not modelled yet: use -sm layer",
    "tensor": "tensor parallelism (EXPERIMENTAL in llama.cpp) is not modelled yet: use -sm layer",
}


def tensor_split(text) -> tuple[float, ...]:
    """-ts as llama.cpp reads it: proportions separated by , or / (3,1 or 3/1); at least one above 0."""
    if isinstance(text, (list, tuple)):
        pieces = [str(x) for x in text]
    else:
        pieces = [x for x in re.split(r"[,/]+", str(text).strip()) if x.strip()]
    if not pieces:
        raise UsageError(f"'{text}' is not a tensor split (write e.g. 3,1)")
    if len(pieces) >= LLAMA_MAX_DEVICES:
        raise UsageError(f"{len(pieces)} proportions, but llama.cpp takes at most {LLAMA_MAX_DEVICES - 1} devices")
    try:
        values = tuple(float(x) for x in pieces)
    except ValueError:
        raise UsageError(f"'{text}' is not a tensor split (write proportions, e.g. 3,1)") from None
    if any(not 0 <= v < 1e9 for v in values) or not any(values):
        raise UsageError(f"'{text}': proportions are numbers from 0 up, at least one above 0")
    return values


def split_mode(text) -> str:
    value = str(text).strip().lower()
    if value in SPLIT_MODES_REFUSED:
        raise UsageError(SPLIT_MODES_REFUSED[value])
    if value not in SPLIT_MODES:
        raise UsageError(f"'{text}' is not a split mode: layer, none (row and tensor are not modelled yet)")
    return value


_ENDPOINT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$")


def endpoints(text) -> tuple[str, ...]:
    """--rpc HOST:PORT[,HOST:PORT...]: ggml-rpc-server endpoints, in the order llama.cpp adds them."""
    pieces = list(text) if isinstance(text, (list, tuple)) else [x.strip() for x in str(text).split(",")]
    if not pieces or any(not x for x in pieces):
        raise UsageError(f"'{text}' is not a list of HOST:PORT")
    for piece in pieces:
        m = _ENDPOINT.match(str(piece))
        if not m or not 0 < int(m[2]) < 65536:
            raise UsageError(f"'{piece}' is not HOST:PORT (e.g. 192.168.1.20:50052)")
    if len(set(pieces)) != len(pieces):
        raise UsageError(f"'{text}' names a host twice")
    return tuple(str(x) for x in pieces)


def rpc_endpoints(rpc) -> tuple[str, ...]:
    """The RPC devices of a job: None, one "HOST:PORT", or a list of them (in device order)."""
    if not rpc:
        return ()
    return (rpc,) if isinstance(rpc, str) else tuple(rpc)


def nonneg_float(text) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"'{text}' is not a number") from None
    if not 0 <= value < 1e9:
        raise UsageError(f"{text} must be a number from 0 up")
    return value


def positive_float(text) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"'{text}' is not a number") from None
    if not 0 < value < 1e9:
        raise UsageError(f"{text} must be a positive number")
    return value


def fraction(text) -> float:
    """An efficiency: a share of a peak, above 0 and at most 1."""
    value = positive_float(text)
    if value > 1:
        raise UsageError(f"{text} is a share of the peak: give a number above 0 and at most 1 (0.7 for 70%)")
    return value


def percent(text) -> int:
    value = nonneg_int(text)
    if value > 100:
        raise UsageError(f"{text} must be from 0 to 100")
    return value


def file_or_url(text) -> str:
    """A file path or URL that must not be empty (an empty --mmproj is a mistake, not 'none')."""
    value = str(text)
    if not value.strip():
        raise UsageError("an empty path: give a file, a URL, or leave the option out")
    if "\0" in value:
        raise UsageError("a path with a NUL byte")
    return value


INT_PARSERS = (tokens, positive_int, nonneg_int, percent)  # the parsers whose list values take llama-bench's ranges

_SIZE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(gib|gb|mib|mb|tib|tb|g|m)?\s*$", re.IGNORECASE)
_UNITS = {None: GIB, "gib": GIB, "g": GIB, "gb": 10**9, "mib": MIB, "m": MIB, "mb": 10**6, "tib": 1024 * GIB,
          "tb": 10**12}
MAX_SIZE = 1024**5  # a PiB: no card or machine is bigger


@dataclass(frozen=True)
class Card:
    """One device of a machine: its memory, and where it is (a remote ggml-rpc-server, or None: this machine)."""

    label: str
    bytes: int
    endpoint: str | None = None

    @property
    def remote(self) -> bool:
        return self.endpoint is not None


@dataclass(frozen=True)
class Budget:
    """A memory budget as the user wrote it (its label) and in bytes: one card, or one machine's cards
    (`--vram 24GiB+12GiB`, remote hosts first as llama.cpp orders its devices), `bytes` their sum."""

    label: str
    bytes: int
    cards: tuple[Card, ...] = ()  # () : one card of `bytes`

    @property
    def devices(self) -> tuple[Card, ...]:
        return self.cards or (Card(self.label, self.bytes),)

    @property
    def multi(self) -> bool:
        return len(self.devices) > 1


def _size_value(text) -> tuple[str, float]:
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"'{text}' is not a size (write e.g. 16GiB, 24, 512MiB; plain numbers are GiB)")
    label = str(text).strip().replace(" ", "")
    return (label + "GiB" if re.fullmatch(r"[\d.]+", label) else label), float(m[1]) * _UNITS[m[2].lower() if m[2] else None]


def budget(text) -> Budget:
    """A memory size: 16GiB, 24, 512MiB, 2GB (plain numbers are GiB); positive, at most a PiB. Sizes joined
    by + are one machine's cards, in device order: 24GiB+12GiB."""
    if isinstance(text, Budget):
        return text
    if "+" in str(text).strip().lstrip("+"):
        pieces = str(text).split("+")
        if any(not x.strip() for x in pieces):
            raise UsageError(f"'{text}' is not a list of cards (write e.g. 24GiB+12GiB)")
        if len(pieces) >= LLAMA_MAX_DEVICES:
            raise UsageError(f"'{text}': llama.cpp takes at most {LLAMA_MAX_DEVICES - 1} devices")
        cards = tuple(Card(b.label, b.bytes) for b in map(budget, pieces))
        return Budget("+".join(c.label for c in cards), sum(c.bytes for c in cards), cards)
    label, value = _size_value(text)
    if value <= 0:
        raise UsageError(f"'{text}' must be positive")
    if value > MAX_SIZE:
        raise UsageError(f"'{text}' is larger than any machine")
    return Budget(label, int(value))


def reserve(text) -> "int | tuple[int, ...]":
    """The reserve: one size for every card, or one per card joined by + (512MiB+1GiB), in device order."""
    if isinstance(text, (list, tuple)):
        return tuple(size_or_zero(x) for x in text)
    if "+" in str(text).strip().lstrip("+"):
        pieces = str(text).split("+")
        if any(not x.strip() for x in pieces):
            raise UsageError(f"'{text}' is not a list of sizes (write e.g. 512MiB+1GiB)")
        return tuple(size_or_zero(x) for x in pieces)
    return size_or_zero(text)


def size_or_zero(text) -> int:
    """Bytes of a size that may be 0 (a reserve)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise UsageError(f"{text} cannot be negative")
        return text
    label, value = _size_value(text)
    if value < 0:
        raise UsageError(f"'{text}' cannot be negative")
    return 0 if value == 0 else budget(text).bytes


def text(value) -> str:
    return str(value)


def path(value) -> Path:
    return Path(value)


# the schema ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One option, declared once: where it lives, how it is spelled, parsed, defaulted and explained."""

    name: str  # the Params field, the API keyword and the argparse dest
    flags: tuple[str, ...]  # the first is the short flag as llama-bench spells it; the rest are aliases
    parse: Callable[[Any], Any]
    default: Any
    help: str
    context: bool = False  # a field of Params (a llama.cpp parameter), else a job option
    sweep: bool = True  # int-like values accept llama-bench's ranges in lists
    action: str | None = None  # "store_true" for flags without a value
    metavar: str | None = None
    negated: tuple[str, ...] = ()  # flags that set the inverse (llama-bench's -nr / --no-repack 1 for --repack 0)
    shown_default: str | None = None  # the default as a person writes it (512MiB, not 536870912)

    def show(self, value) -> str:
        if isinstance(value, bool):
            return "on" if value else "off" if self.parse is on_off else str(int(value))
        if isinstance(value, Budget):
            return value.label
        if self.parse is tensor_split:
            return ",".join(f"{v:g}" for v in value)
        return str(value)


def _p(name, flags, parse, default, help, **kw) -> Param:
    return Param(name, tuple(flags), parse, default, help, **kw)


_CONTEXT = (
    _p("n_ctx", ["-c", "--ctx", "--ctx-size", "--n-ctx"], tokens, DEFAULT_N_CTX,
       "context length n_ctx: 4096 or 32k; 0 means the model's trained length"),
    _p("type_k", ["-ctk", "--cache-type-k", "--type-k"], cache_type, "f16",
       "K cache type: " + ", ".join(cache_types.CACHE_TYPES)),
    _p("type_v", ["-ctv", "--cache-type-v", "--type-v"], cache_type, "f16",
       "V cache type (a quantized V needs flash attention)"),
    _p("flash_attn", ["-fa", "--flash-attn"], on_off, True, "flash attention: on|off"),
    _p("n_seq", ["-np", "--n-seq", "--parallel"], positive_int, 1, "n_seq_max: sequences (llama-server's slots)"),
    _p("kv_unified", ["-kvu", "--kv-unified"], on_off, False, "one KV stream shared by all sequences",
       action="store_true"),
    _p("swa_full", ["--swa-full"], on_off, False, "full-size SWA cache (llama.cpp's C default is on!)",
       action="store_true"),
    _p("n_batch", ["-b", "--batch-size", "--n-batch"], positive_int, 2048, "n_batch: logical batch"),
    _p("n_ubatch", ["-ub", "--ubatch-size", "--n-ubatch"], positive_int, 512, "n_ubatch: physical batch"),
    _p("n_rs_seq", ["--n-rs-seq"], nonneg_int, 0, "recurrent-state snapshots per sequence (speculative rollback)"),
    _p("n_outputs_max", ["--n-outputs-max"], nonneg_int, 0,
       "outputs (logits) reserved per batch; 0: n_batch, as Llama() and llama-bench (llama-server: its slots)"),
    _p("n_outputs_max_per_seq", ["--n-outputs-max-per-seq"], nonneg_int, 1,
       "outputs per sequence; 0: n_outputs_max"),
    _p("n_gpu_layers", ["-ngl", "--n-gpu-layers", "--gpu-layers"], nonneg_int, 0,
       "layers on the GPU, the output layer counting as one (99: all)"),
    _p("n_cpu_moe", ["-ncmoe", "--n-cpu-moe"], nonneg_int, 0,
       "keep the routed experts of the first N layers in system RAM"),
    _p("tensor_split", ["-ts", "--tensor-split"], tensor_split, (),
       "each device's share of the layers, as llama.cpp: 3,1 (fit searches it when not given)", sweep=False,
       metavar="N0,N1,..."),
    _p("split_mode", ["-sm", "--split-mode"], split_mode, "layer",
       "layer: layers pipelined over the devices; none: the -mg device alone", sweep=False),
    _p("main_gpu", ["-mg", "--main-gpu"], nonneg_int, 0, "the device of -sm none", sweep=False),
    _p("n_threads", ["-t", "--threads"], nonneg_int, 0, "threads; 0: the physical cores"),
    _p("repack", ["--repack"], on_off, True,
       "the repacked CPU copy of the weights (CPU_REPACK / AMX): 0|1, as llama-bench --repack",
       negated=("-nr", "--no-repack")),
    _p("poll", ["--poll"], percent, 50, "threadpool polling level, 0-100, as llama-bench"),
    _p("cpu_mask", ["-C", "--cpu-mask"], cpu_mask, "0x0", "CPU affinity mask, hex (0x0: the default affinity)"),
    _p("cpu_strict", ["--cpu-strict"], on_off, False, "strict CPU placement: 0|1"),
    _p("prio", ["--prio"], priority, 0, "thread priority: -1 low, 0 normal, 1 medium, 2 high, 3 realtime"),
)
CONTEXT_PARAMS = tuple(p.name for p in _CONTEXT)
assert CONTEXT_PARAMS == tuple(f.name for f in dataclasses.fields(Params)), "SCHEMA and Params must list the same fields"
_CONTEXT = tuple(dataclasses.replace(p, context=True) for p in _CONTEXT)

_OPTIONS = (
    _p("model", [], text, None, "a GGUF file (local, https:// or hf://) or a catalog id from models.toml "
       "(a catalog id runs llama.cpp on its geometry twin)", metavar="MODEL"),
    _p("output", ["-o", "--output"], OutputFormat, OutputFormat.TEXT, "output format: text, md, csv, json, jsonl",
       metavar="FORMAT"),
    _p("results", ["--results"], path, None, "append the records to this JSON Lines results file", metavar="FILE"),
    _p("out", ["--out"], path, None, "the file to write", metavar="FILE"),
    _p("out_dir", ["--out-dir"], path, None, "the folder to write (default reports/local/<label>/)", metavar="DIR"),
    _p("vram", ["--vram"], budget, (Budget("16GiB", 16 * GIB), Budget("24GiB", 24 * GIB)),
       "card sizes, comma list of alternatives; + joins one machine's cards (24GiB+12GiB); plain numbers are GiB"),
    _p("reserve", ["--reserve"], reserve, 512 * MIB, "kept free on each card for the driver and display; one per "
       "card joined by + (512MiB+1GiB)", shown_default="512MiB"),
    _p("rpc", ["--rpc"], endpoints, (), "remote hosts: ggml-rpc-server HOST:PORT, comma list (llama.cpp's --rpc); "
       "their free memory is read from the server", metavar="HOST:PORT,..."),
    _p("ram", ["--ram"], budget, None, "system RAM the host part must fit into (mapped weights, host buffers, "
       "prompt cache, checkpoints); with --cpu-only the whole budget"),
    _p("cpu_only", ["--cpu-only"], on_off, False, "no card: everything in system RAM, as a CPU build (needs --ram)",
       action="store_true"),
    _p("runtime", ["--runtime"], runtime_name, "llama-server", "the program that creates the context: llama-server "
       "(the printed command) or llama-cpp-python (the Llama() call)", metavar="NAME"),
    _p("cache_ram", ["-cram", "--cache-ram"], int_at_least_minus_one, 8192,
       "llama-server's prompt cache limit in MiB (-1: no limit, 0: off; its default 8192)", metavar="MIB"),
    _p("ctx_checkpoints", ["-ctxcp", "--ctx-checkpoints"], nonneg_int, 32, "llama-server's context checkpoints per slot (its default 32)"),
    _p("verify", ["--verify"], on_off, False, "create the answer for real and compare, device by device",
       action="store_true"),
    _p("emulate", ["--emulate"], on_off, False, "size (and verify) on an emulated card, llama.cpp's RPC backend on this "
       "CPU, even on a GPU build: a card you do not have, its backend assumed to take every tensor type",
       action="store_true"),
    _p("mmproj", ["--mmproj"], file_or_url, None, "a vision projector GGUF (local, https:// or hf://), or 'published' for "
       "a catalog model's own", metavar="FILE"),
    _p("no_mmproj_offload", ["--no-mmproj-offload"], on_off, False,
       "keep the projector in system RAM, as llama-server's --no-mmproj-offload", action="store_true"),
    _p("quant", ["--quant"], text, None, "a catalog model's published quant (e.g. Q4_K_M)"),
    _p("remote", ["--remote"], on_off, False, "a catalog id: read the real header of its published --quant "
       "from Hugging Face", action="store_true"),
    _p("n_prompt", ["-p", "--n-prompt"], tokens, 512, "prompt tokens of a pp test"),
    _p("n_gen", ["-n", "--n-gen"], tokens, 128, "generated tokens of a tg test"),
    _p("n_depth", ["-d", "--n-depth", "--depths"], tokens, 0, "depths: tokens already in the context"),
    _p("repetitions", ["-r", "--repetitions"], positive_int, 3, "repetitions of each test"),
    _p("resume", ["--resume"], on_off, False, "skip tests the results file already holds", action="store_true"),
    _p("dry_run", ["--dry-run"], on_off, False, "print the plan, run nothing", action="store_true"),
    _p("max_depth", ["--max-depth"], tokens, None, "deepest bench depth"),
    _p("matrix", ["--matrix"], on_off, False, "run the whole exactness matrix instead of one cell",
       action="store_true"),
    _p("seed", ["--seed"], nonneg_int, 0, "seed of the random weights"),
    _p("card", ["--card"], text, None, "a card from the speed table"),
    _p("bandwidth", ["--bandwidth"], positive_float, None, "memory bandwidth in GB/s (instead of --card)"),
    _p("tflops", ["--tflops"], positive_float, None, "FP32 TFLOPS with --bandwidth (default: bytes only)"),
    _p("link", ["--link"], positive_float, None, "several cards (--card A+B): GB/s of the link between them "
       "(default 16, PCIe 4.0 x16 at half its peak; 1.25 for 10 GbE to an RPC host)"),
    _p("link_ms", ["--link-ms"], nonneg_float, 0.0, "several cards: latency per hop in ms (0 on PCIe; a network "
       "round trip, e.g. 0.2, to an RPC host)"),
    _p("bw_eff", ["--bw-eff"], fraction, None, "bandwidth efficiency (default 0.70)"),
    _p("compute_eff", ["--compute-eff"], fraction, None, "compute efficiency (default 0.30)"),
    _p("compare", ["--compare"], text, (), "catalog ids to draw beside the model in the KV plot", metavar="ID"),
    _p("calibrate", ["--calibrate"], path, None, "bench results of this model: calibrate on two measured tg depths",
       metavar="FILE"),
    _p("result_files", [], path, None, "JSON Lines files written by inspect/verify/fit/bench --results",
       metavar="RESULTS"),
)
SCHEMA: dict[str, Param] = {p.name: p for p in _CONTEXT + _OPTIONS}


# values: scalars, lists and ranges ------------------------------------------------------------
_RANGE = re.compile(r"^\s*(\w+)\s*-\s*(\w+)\s*([+*])\s*(\w+)\s*$")


MAX_LIST_ITEMS = 4096  # values of one list option (a comma list or a range), counted before it expands
MAX_CONFIGURATIONS = 4096  # contexts of one sweep (the product of its lists), counted before it expands
MAX_TESTS = 4096  # tests of one context (-p x -n x -d)
MAX_FIT_CELLS = 1024  # budgets x contexts x KV types x placements of one fit


def _range_count(first: int, last: int, op: str, step: int) -> int:
    """How many values first-last+step (or *factor) holds, without listing them."""
    if op == "+":
        return (last - first) // step + 1
    count, value = 0, first
    while value <= last and count <= MAX_LIST_ITEMS:
        count += 1
        value = max(value * step, value + 1)
    return count


def _items(spec: Param, raw) -> list:
    """The items of a list value: a comma string, a sequence, or one scalar; ranges expanded (at most
    MAX_LIST_ITEMS values, counted before anything is built)."""
    if isinstance(raw, (list, tuple)):
        pieces = list(raw)
    elif isinstance(raw, str):
        if raw.count(",") >= MAX_LIST_ITEMS:
            raise UsageError(f"{spec.name}: {raw.count(',') + 1:,} values: more than {MAX_LIST_ITEMS:,} in one list")
        pieces = [part.strip() for part in raw.split(",") if part.strip()]
        if not pieces:
            raise UsageError(f"{spec.name}: empty list")
    else:
        pieces = [raw]
    out = []
    for piece in pieces:
        m = _RANGE.match(piece) if isinstance(piece, str) and spec.sweep else None
        if m and spec.parse in INT_PARSERS:
            first, last, step = spec.parse(m[1]), spec.parse(m[2]), spec.parse(m[4])
            if m[3] == "+" and step < 1 or m[3] == "*" and step < 2 or last < first:
                raise UsageError(f"{spec.name}: '{piece}' is not a range (write first-last+step or first-last*factor)")
            count = _range_count(first, last, m[3], step)
            if len(out) + count > MAX_LIST_ITEMS:
                raise UsageError(f"{spec.name}: '{piece}' holds {count:,} values: more than {MAX_LIST_ITEMS:,} in one "
                                 "list (take a larger step)")
            value = first
            while value <= last:
                out.append(value)
                value = value + step if m[3] == "+" else max(value * step, value + 1)
        else:
            out.append(spec.parse(piece))
        if len(out) > MAX_LIST_ITEMS:
            raise UsageError(f"{spec.name}: more than {MAX_LIST_ITEMS:,} values in one list")
    return out


def check_plan_size(what: str, factors: Mapping[str, int], limit: int) -> int:
    """The product of a plan's list lengths; one line giving the count when it is past `limit`."""
    total = 1
    for n in factors.values():
        total *= max(1, n)
    if total > limit:
        product = " x ".join(f"{n:,} {name}" for name, n in factors.items() if n > 1)
        raise UsageError(f"{what}: {total:,} ({product}): more than {limit:,}; split it into smaller runs")
    return total


def parse_value(name: str, raw, *, listed: bool):
    """One option's value from the CLI or the API: a scalar, or with `listed` a tuple (comma lists, ranges)."""
    spec = SCHEMA[name]
    try:
        if listed:
            return tuple(_items(spec, raw))
        if isinstance(raw, (list, tuple)) and spec.parse not in (tensor_split, endpoints, reserve):
            if len(raw) != 1:
                raise UsageError(f"takes one value here, got {len(raw)}")
            raw = raw[0]
        return spec.parse(raw)
    except UsageError as exc:
        raise UsageError(f"{name}: {exc}", hint=exc.hint) from None


def expand(values: Mapping[str, Iterable], base: Params | None = None) -> list[Params]:
    """Every combination of the context parameters' lists, in schema order (llama-bench's
    get_cmd_params_instances): the one place a sweep expands."""
    base = base or Params()
    names = [n for n in CONTEXT_PARAMS if n in values]
    def alternatives(name: str) -> tuple:
        value = values[name]
        if SCHEMA[name].parse is tensor_split and (not value or not isinstance(value[0], (list, tuple))):
            return (tuple(value),)  # one -ts is one value (a tuple of proportions), not a list of them
        return tuple(value) if isinstance(value, (list, tuple)) else (value,)

    lists = [alternatives(n) for n in names]
    check_plan_size("the sweep's configurations", {n: len(v) for n, v in zip(names, lists)}, MAX_CONFIGURATIONS)
    return [base.replace(**dict(zip(names, combo))) for combo in itertools.product(*lists)]


def params_from(values: Mapping[str, Any], base: Params | None = None) -> Params:
    """One Params from scalar values (context fields only; other keys are passed over)."""
    base = base or Params()
    return base.replace(**{n: values[n] for n in CONTEXT_PARAMS if n in values and values[n] is not None})


# argparse --------------------------------------------------------------------------------------
class _ArgType:
    """An argparse `type` that turns the schema's UsageError into argparse's one-line usage error."""

    def __init__(self, name: str, listed: bool):
        self.name, self.listed = name, listed
        self.__name__ = name

    def __call__(self, text: str):
        try:
            return parse_value(self.name, text, listed=self.listed)
        except UsageError as exc:
            message = str(exc).removeprefix(f"{self.name}: ")
            raise argparse.ArgumentTypeError(message + (f" ({exc.hint})" if exc.hint else "")) from None


class _Negated(_ArgType):
    """`-nr 1` is `--repack 0`."""

    def __call__(self, text: str):
        value = super().__call__(text)
        return tuple(not v for v in value) if self.listed else not value


def add_arguments(parser: argparse.ArgumentParser, names: Iterable[str], *, lists: Iterable[str] = (),
                  defaults: Mapping[str, Any] | None = None, helps: Mapping[str, str] | None = None,
                  optional_model: str | None = None) -> None:
    """argparse options for these schema names; `lists` take comma lists and ranges; per-command
    `defaults` (never for n_ctx: it has one default) and `helps` override the schema's."""
    lists, defaults, helps = set(lists), dict(defaults or {}), dict(helps or {})
    if "n_ctx" in defaults:
        raise ValueError("n_ctx has one default: params.DEFAULT_N_CTX")
    context = parser.add_argument_group("llama.cpp parameters (as llama-bench spells them)")
    for name in names:
        spec = SCHEMA[name]
        listed = name in lists
        default = defaults.get(name, spec.default)
        if listed and default is not None and not isinstance(default, tuple):
            default = (default,)
        shown = spec.shown_default or (",".join(spec.show(v) for v in default) if isinstance(default, tuple)
                                       else spec.show(default))
        ranges = spec.parse in INT_PARSERS
        help_text = helps.get(name, spec.help) + ((", comma list or range" if ranges else ", comma list") if listed else "")
        if default is not None and default != () and spec.action is None:
            help_text += f" (default {shown})"
        target = context if spec.context else parser
        if name == "result_files":
            target.add_argument("result_files", nargs="+", type=Path, metavar="RESULTS", help=help_text)
            continue
        if name == "model":
            if optional_model is None:
                target.add_argument("model", metavar="MODEL", help=help_text)
            else:
                target.add_argument("model", metavar="MODEL", nargs="?", default=optional_model,
                                    help=help_text + f" (default {optional_model})")
            continue
        if spec.action == "store_true":
            target.add_argument(*spec.flags, dest=name, action="store_true", default=default, help=help_text)
            continue
        if spec.negated:
            target.add_argument(*spec.negated, dest=name, type=_Negated(name, listed), metavar="0|1",
                                help=f"the inverse of {spec.flags[0]} (older llama-bench's spelling)")
        if name == "output":
            target.add_argument(*spec.flags, dest=name, type=_ArgType(name, False), default=default,
                                metavar=spec.metavar, help=help_text)
            target.add_argument("--json", dest=name, action="store_const", const=OutputFormat.JSON,
                                help="same as -o json")
            continue
        if name == "compare":
            target.add_argument(*spec.flags, dest=name, action="append", type=_ArgType(name, False), default=[],
                                metavar=spec.metavar, help=help_text + " (repeatable)")
            continue
        target.add_argument(*spec.flags, dest=name, type=_ArgType(name, listed), default=default,
                            metavar=spec.metavar or name.upper(), help=help_text)
