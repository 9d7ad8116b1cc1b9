"""Every option shared by several commands, spelled once, as llama.cpp / llama-bench spell them.

Short flags as llama-bench (`-c -p -n -d -r -ctk -ctv -fa -ngl -b -ub -t -o`); `-o/--output` is
always the output format; paths are `--out` (a file) and `--out-dir` (a folder); the positional is
MODEL everywhere. Older spellings stay as aliases.
"""

from __future__ import annotations

import argparse
import re
from enum import StrEnum

from .. import cache_types
from ..errors import UsageError
from ..footprint import CacheSettings
from ..units import GIB, MIB

UINT32_MAX = 2**32 - 1  # n_ctx, n_batch, n_ubatch and n_seq_max are uint32 in llama_context_params


class OutputFormat(StrEnum):
    TEXT = "text"  # a table for people (markdown-compatible where it is a table)
    MD = "md"
    JSON = "json"
    JSONL = "jsonl"
    CSV = "csv"


# argument types ---------------------------------------------------------------------------------
def _uint32(text: str, low: int) -> int:
    """An integer from `low` up to llama.cpp's uint32 limit."""
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1" if low else f"{value} cannot be negative")
    if value > UINT32_MAX:
        raise argparse.ArgumentTypeError(f"{value} is larger than llama.cpp takes ({UINT32_MAX})")
    return value


def positive_int(text: str) -> int:
    return _uint32(text, 1)


def nonneg_int(text: str) -> int:
    return _uint32(text, 0)


def ctx_int(text: str) -> int:
    """A context length: 4096, 32k (x 1024); 0 means the model's trained length."""
    low = text.strip().lower()
    try:
        value = int(low.removesuffix("k")) * (1024 if low.endswith("k") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a context length") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: a context length cannot be negative")
    if value > UINT32_MAX:
        raise argparse.ArgumentTypeError(f"{value}: llama.cpp's n_ctx is a uint32 (at most {UINT32_MAX})")
    return value


def on_off(text: str) -> bool:
    key = text.strip().lower()
    if key in ("on", "1", "true", "yes"):
        return True
    if key in ("off", "0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"'{text}': expected on or off")


def cache_type(text: str) -> str:
    try:
        return cache_types.parse_cache_type(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(f"{exc} ({exc.hint})") from None


def comma_list(conv):
    """An argument type for comma lists (`-c 4096,8192`), each item through `conv`."""

    def parse(text: str) -> tuple:
        items = [part.strip() for part in text.split(",") if part.strip()]
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        return tuple(conv(item) for item in items)

    parse.__name__ = getattr(conv, "__name__", "list")
    return parse


_SIZE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(gib|gb|mib|mb|tib|tb|g|m)?\s*$", re.IGNORECASE)
_UNITS = {None: GIB, "gib": GIB, "g": GIB, "gb": 10**9, "mib": MIB, "m": MIB, "mb": 10**6, "tib": 1024 * GIB,
          "tb": 10**12}
MAX_SIZE = 1024**5  # a PiB: no card or machine is bigger


def size_bytes(text: str) -> int:
    """A memory size: 16GiB, 24, 512MiB, 2GB (plain numbers are GiB); positive, at most a PiB."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (write e.g. 16GiB, 24, 512MiB; plain numbers are GiB)")
    value = float(m[1]) * _UNITS[m[2].lower() if m[2] else None]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be positive")
    if value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"'{text}' is larger than any machine")
    return int(value)


def size_or_zero(text: str) -> int:
    m = _SIZE.match(text)
    if m and float(m[1]) == 0:
        return 0
    return size_bytes(text)


def size_label(text: str) -> str:
    label = text.strip().replace(" ", "")
    return label + "GiB" if re.fullmatch(r"[\d.]+", label) else label


def labelled_size(text: str) -> tuple[str, int]:
    return size_label(text), size_bytes(text)


# shared groups ------------------------------------------------------------------------------------
def add_model(parser: argparse.ArgumentParser, *, optional_default: str | None = None) -> None:
    help_text = "a GGUF file or a catalog id from models.toml (a catalog id runs llama.cpp on its geometry twin)"
    if optional_default is None:
        parser.add_argument("model", metavar="MODEL", help=help_text)
    else:
        parser.add_argument("model", metavar="MODEL", nargs="?", default=optional_default,
                            help=help_text + f" (default {optional_default})")


def add_output(parser: argparse.ArgumentParser, choices: tuple[OutputFormat, ...] = (OutputFormat.TEXT, OutputFormat.JSON),
               default: OutputFormat = OutputFormat.TEXT) -> None:
    parser.add_argument("-o", "--output", dest="output", type=OutputFormat, choices=list(choices), default=default,
                        metavar="FORMAT", help=f"output format: {', '.join(choices)} (default {default})")
    parser.add_argument("--json", dest="output", action="store_const", const=OutputFormat.JSON,
                        help="same as -o json")


def add_results(parser: argparse.ArgumentParser, what: str) -> None:
    from pathlib import Path

    parser.add_argument("--results", type=Path, default=None, metavar="FILE",
                        help=f"also append {what} to this JSON Lines results file")


def add_cache_arguments(parser: argparse.ArgumentParser, *, ctx_default: int = 131072) -> None:
    group = parser.add_argument_group("context (as llama.cpp's context params)")
    group.add_argument("-c", "--ctx", "--ctx-size", dest="n_ctx", type=ctx_int, default=ctx_default,
                       help=f"n_ctx; 0 means the model's trained length; 128k allowed (default {ctx_default})")
    add_cache_types(group, listed=False)
    group.add_argument("--n-seq", dest="n_seq", type=positive_int, default=1, help="n_seq_max (default 1)")
    group.add_argument("--kv-unified", action="store_true", help="one KV stream shared by all sequences")
    group.add_argument("--swa-full", action="store_true", help="full-size SWA cache (llama.cpp's C default is on!)")
    add_batch(group, listed=False)
    group.add_argument("-fa", "--flash-attn", dest="flash_attn", type=on_off, default=True, help="on|off (default on)")


def add_cache_types(group, *, listed: bool, default: str = "f16") -> None:
    conv = comma_list(cache_type) if listed else cache_type
    default_value = tuple(default.split(",")) if listed else default
    names = ", ".join(cache_types.CACHE_TYPES)
    group.add_argument("-ctk", "--cache-type-k", dest="type_k", type=conv, default=default_value,
                       help=f"K cache type{' list' if listed else ''}: {names} (default {default})")
    group.add_argument("-ctv", "--cache-type-v", dest="type_v", type=conv, default=default_value,
                       help=f"V cache type{' list' if listed else ''} (default {default}; quantized V needs flash attention)")


def add_batch(group, *, listed: bool) -> None:
    conv = comma_list(positive_int) if listed else positive_int
    group.add_argument("-b", "--batch-size", "--n-batch", dest="n_batch", type=conv,
                       default=(2048,) if listed else 2048, help="n_batch (default 2048)")
    group.add_argument("-ub", "--ubatch-size", "--n-ubatch", dest="n_ubatch", type=conv,
                       default=(512,) if listed else 512, help="n_ubatch (default 512)")


def settings_from_args(args: argparse.Namespace) -> CacheSettings:
    return CacheSettings(n_ctx=args.n_ctx, type_k=args.type_k, type_v=args.type_v, n_seq=args.n_seq,
                         kv_unified=args.kv_unified, swa_full=args.swa_full, n_batch=args.n_batch,
                         n_ubatch=args.n_ubatch, flash_attn=args.flash_attn)


def cache_pairs(type_k: tuple[str, ...], type_v: tuple[str, ...]) -> list[tuple[str, str]]:
    """-ctk / -ctv lists paired as llama-bench pairs them for fit: same length, or one of them single."""
    if len(type_k) == len(type_v):
        return list(zip(type_k, type_v))
    if len(type_k) == 1:
        return [(type_k[0], v) for v in type_v]
    if len(type_v) == 1:
        return [(k, type_v[0]) for k in type_k]
    raise UsageError("-ctk and -ctv lists must have the same length (they are paired), or one of them a single type")
