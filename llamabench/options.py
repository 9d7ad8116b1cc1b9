"""Command-line options shared by several commands, spelled as in llama.cpp / llama-bench."""

from __future__ import annotations

import argparse

from . import cache_types
from .errors import UsageError
from .footprint import CacheSettings


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def ctx_int(text: str) -> int:
    try:
        value = int(text.lower().removesuffix("k")) * (1024 if text.lower().endswith("k") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a context length") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: a context length cannot be negative")
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


def add_cache_arguments(parser: argparse.ArgumentParser, *, ctx_default: int = 131072) -> None:
    group = parser.add_argument_group("context (as llama.cpp's context params)")
    group.add_argument("--ctx", "-c", dest="n_ctx", type=ctx_int, default=ctx_default,
                       help=f"n_ctx; 0 means the model's trained length; 128k allowed (default {ctx_default})")
    group.add_argument("-ctk", "--cache-type-k", dest="type_k", type=cache_type, default="f16",
                       help="K cache type: " + ", ".join(cache_types.CACHE_TYPES) + " (default f16)")
    group.add_argument("-ctv", "--cache-type-v", dest="type_v", type=cache_type, default="f16",
                       help="V cache type (default f16; quantized V needs flash attention)")
    group.add_argument("--n-seq", dest="n_seq", type=positive_int, default=1, help="n_seq_max (default 1)")
    group.add_argument("--kv-unified", action="store_true", help="one KV stream shared by all sequences")
    group.add_argument("--swa-full", action="store_true", help="full-size SWA cache (llama.cpp's C default is on!)")
    group.add_argument("-b", "--n-batch", dest="n_batch", type=positive_int, default=2048, help="n_batch (default 2048)")
    group.add_argument("-ub", "--n-ubatch", dest="n_ubatch", type=positive_int, default=512, help="n_ubatch (default 512)")
    group.add_argument("-fa", "--flash-attn", dest="flash_attn", type=on_off, default=True, help="on|off (default on)")


def settings_from_args(args: argparse.Namespace) -> CacheSettings:
    return CacheSettings(
        n_ctx=args.n_ctx,
        type_k=args.type_k,
        type_v=args.type_v,
        n_seq=args.n_seq,
        kv_unified=args.kv_unified,
        swa_full=args.swa_full,
        n_batch=args.n_batch,
        n_ubatch=args.n_ubatch,
        flash_attn=args.flash_attn,
    )
