"""The parsers of the one schema: text (or an API value) in, a checked value out, or a UsageError written for
the user. Pure: no file, no llama.cpp."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

from ..core import cache_types
from ..core.errors import UsageError

UINT32_MAX = 2**32 - 1  # n_ctx, n_batch, n_ubatch and n_seq_max are uint32 in llama_context_params
LLAMA_MAX_SEQ = 256  # src/llama-cparams.h


def _ascii_number(text) -> None:
    """Digits as llama.cpp reads them (std::stoi, std::stof): ASCII only, where Python's int() and float() take any
    script's digits (٣, ９)."""
    if isinstance(text, str) and not text.isascii():
        raise UsageError(f"'{text}' is not a number written in ASCII digits")


def _uint(text, low: int) -> int:
    if isinstance(text, bool):
        raise UsageError(f"{text!r} is not an integer")
    _ascii_number(text)
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


GGML_MAX_N_THREADS = 512  # ggml/include/ggml.h: a threadpool holds at most this many threads


def threads(text) -> int:
    """-t: 0 (the physical cores) up to ggml's GGML_MAX_N_THREADS; beyond it llama.cpp's int32 wraps and crashes."""
    value = _uint(text, 0)
    if value > GGML_MAX_N_THREADS:
        raise UsageError(f"{value} threads: ggml runs at most {GGML_MAX_N_THREADS} (GGML_MAX_N_THREADS)")
    return value


def nonneg_int(text) -> int:
    return _uint(text, 0)


ALL_LAYERS = 999  # -ngl all: more layers than any model has (llama.cpp caps it at the model's n_layer + 1)


def gpu_layers(text) -> int:
    """-ngl as llama.cpp's common/arg.cpp takes it: a number, or `all` (every layer and the output); `auto` is read
    by the job that takes it (fit: searched; bench: all where a GPU backend is present), here as `all`."""
    if isinstance(text, str) and text.strip().lower() in ("all", "auto"):
        return ALL_LAYERS
    return _uint(text, 0)


def tokens(text) -> int:
    """A token count: 4096, 32k (x 1024), 1M (x 1024^2). Used for n_ctx, depths, prompt and generation lengths."""
    if isinstance(text, int) and not isinstance(text, bool):
        return _uint(text, 0)
    _ascii_number(text)
    low = str(text).strip().lower()
    scale = {"k": 1024, "m": 1024**2}.get(low[-1:], 1)
    try:
        value = int(low[:-1] if scale > 1 else low) * scale
    except ValueError:
        raise UsageError(f"'{text}' is not a token count (write e.g. 4096, 32k or 1M)") from None
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


def flash_attn(text) -> bool:
    """-fa on|off|auto. auto is llama-server's default: it turns flash attention on where the backend runs it,
    which every backend llamabench sizes (CPU, CUDA, Vulkan, Metal) does (common/arg.cpp `--flash-attn`,
    src/llama-context.cpp `LLAMA_FLASH_ATTN_TYPE_AUTO`); it is sized as on."""
    if str(text).strip().lower() == "auto":
        return True
    try:
        return on_off(text)
    except UsageError:
        raise UsageError(f"'{text}': expected on, off or auto") from None


def cache_type(text) -> str:
    return cache_types.parse_cache_type(str(text))


# llama-server's --spec-type names (common/speculative.cpp:33-44, the vendored llama.cpp)
SPEC_TYPES = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark", "ngram-simple",
              "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")


def spec_type(text) -> str:
    """--spec-type: one of llama-server's speculative decoding types (one at a time here)."""
    value = str(text).strip().lower()
    if value not in SPEC_TYPES:
        raise UsageError(f"'{text}' is not a --spec-type: {', '.join(SPEC_TYPES)}")
    return value


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


class Runtime(StrEnum):
    """The program that creates the context."""

    LLAMA_SERVER = "llama-server"  # what the printed command starts (Ollama and most front-ends start it too)
    LLAMA_CPP_PYTHON = "llama-cpp-python"  # llama_cpp.Llama()


def parse_runtime(text) -> Runtime:
    try:
        return Runtime(str(text).strip().lower())
    except ValueError:
        raise UsageError(f"'{text}' is not a runtime", hint="llama-server or llama-cpp-python") from None


BACKEND_NAMES = ("cuda", "vulkan", "metal", "rocm", "cpu")  # --backend (memory.backends.BACKENDS, the same names)


def backend_name(text) -> str:
    """--backend: the GPU backend an emulated card answers as (cuda, vulkan, metal, rocm), or cpu (as it is)."""
    key = str(text).strip().lower()
    if key not in BACKEND_NAMES:
        raise UsageError(f"'{text}' is not a backend", hint="one of " + ", ".join(BACKEND_NAMES))
    return key


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


MIN_PROPORTION = 1e-30  # above float32's smallest normal (1.18e-38): the split is computed in float32


def tensor_split(text) -> tuple[float, ...]:
    """-ts as llama.cpp reads it: proportions separated by , or / (3,1 or 3/1); at least one above 0."""
    if isinstance(text, (list, tuple)):
        pieces = [str(x) for x in text]
    else:
        _ascii_number(text)
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
    if any(0 < v < MIN_PROPORTION for v in values):  # std::stof, as llama.cpp reads -ts, throws on an underflow
        raise UsageError(f"'{text}': a proportion above 0 but below {MIN_PROPORTION:g} is not a float llama.cpp reads")
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
    _ascii_number(text)
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"'{text}' is not a number") from None
    if not 0 <= value < 1e9:
        raise UsageError(f"{text} must be a number from 0 up")
    return value


def positive_float(text) -> float:
    _ascii_number(text)
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


_DEVICE_NAME = re.compile(r"^([A-Za-z][A-Za-z_]*?)(\d+)$")  # llama.cpp's device names: CUDA0, Vulkan1, RPC0, ...


def device_list(text) -> str:
    """-devd: `none`, or llama.cpp device names (CUDA1, Vulkan0, RPC0; as --list-devices shows them), comma-separated,
    each once."""
    value = str(text).strip()
    if value.lower() == "none":
        return "none"
    names = [n.strip() for n in value.split(",")]
    for name in names:
        if not _DEVICE_NAME.match(name):
            raise UsageError(f"-devd: '{name}' is not a device name as llama.cpp gives it (CUDA0, Vulkan1, RPC0: see "
                             "llama-server --list-devices), or none")
    if len(set(names)) != len(names):
        raise UsageError(f"-devd {value}: a device named twice")
    return ",".join(names)


def device_positions(names: str, n_remote: int = 0) -> tuple[int, ...]:
    """The place of each -devd device among the cards, in llama.cpp's device order: the --rpc hosts first (RPC0,
    RPC1, ...), then this machine's devices (CUDA0 after them); () for none."""
    if names == "none":
        return ()
    positions = []
    for name in names.split(","):
        backend, index = _DEVICE_NAME.match(name).groups()
        positions.append(int(index) + (0 if backend.upper() == "RPC" else n_remote))
    return tuple(positions)


def file_or_url(text) -> str:
    """A file path or URL that must not be empty (an empty --mmproj is a mistake, not 'none')."""
    value = str(text)
    if not value.strip():
        raise UsageError("an empty path: give a file, a URL, or leave the option out")
    if "\0" in value:
        raise UsageError("a path with a NUL byte")
    return value


def hf_repo_model(value) -> str:
    """-hf OWNER/REPO[:QUANT] as the MODEL hf://OWNER/REPO[:QUANT] (the file is picked when it is read)."""
    value = str(value).strip()
    if value.startswith("hf://"):
        return value
    if value.count("/") != 1 or value.startswith(("/", ".")) or "://" in value:
        raise UsageError(f"'{value}' is not OWNER/REPO[:QUANT] (e.g. unsloth/Qwen3.5-35B-A3B-GGUF:Q4_K_M)")
    return "hf://" + value


def text(value) -> str:
    return str(value)


def path(value) -> Path:
    return Path(value)


# the parsers whose list values take llama-bench's ranges
INT_PARSERS = (tokens, positive_int, nonneg_int, percent, threads, gpu_layers)
