"""`llamabench fit MODEL`: does 128k fit on a 16 / 24 GB card, and with which settings?"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from .. import model_source, options
from ..errors import UsageError
from ..tables import render_table
from ..units import GIB, MIB

HELP = "does n_ctx fit on a 16 / 24 GB card beside the weights, and with which settings?"
EXAMPLES = """examples:
  llamabench fit qwen3-5-35b-a3b                       # 16 and 24 GiB cards, 128k, f16 / q8_0 / q4_0 KV
  llamabench fit model.gguf --vram 12GiB --ctx 32768,131072 -ctk q8_0 -ctv q8_0
  llamabench fit qwen3-5-35b-a3b --verify --ram 2GiB   # create the recommended context for real
Budgets: plain numbers are GiB; units GiB, GB, MiB, MB. The reserve (default 512 MiB) is kept free
for the driver and the display.
"""

_SIZE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(gib|gb|mib|mb|tib|tb|g|m)?\s*$", re.IGNORECASE)
_UNITS = {None: GIB, "gib": GIB, "g": GIB, "gb": 10**9, "mib": MIB, "m": MIB, "mb": 10**6, "tib": 1024 * GIB, "tb": 10**12}


def parse_size(text: str, what: str) -> int:
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"{what} '{text}' is not a size", hint="write e.g. 16GiB, 24, 512MiB (plain numbers are GiB)")
    value = float(m[1]) * _UNITS[m[2].lower() if m[2] else None]
    if value <= 0:
        raise UsageError(f"{what} '{text}' must be positive")
    return int(value)


def size_label(text: str) -> str:
    label = text.strip().replace(" ", "")
    return label + "GiB" if re.fullmatch(r"[\d.]+", label) else label


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a GGUF file or a catalog id")
    parser.add_argument("--vram", default="16GiB,24GiB", help="card sizes, comma list (default 16GiB,24GiB)")
    parser.add_argument("--ctx", "-c", dest="n_ctx", default="131072", help="context lengths, comma list (default 131072)")
    parser.add_argument("--reserve", default="512MiB", help="kept free for driver and display (default 512MiB)")
    parser.add_argument("-ctk", "--cache-type-k", dest="type_k", default="f16,q8_0,q4_0", help="K types (default f16,q8_0,q4_0)")
    parser.add_argument("-ctv", "--cache-type-v", dest="type_v", default="f16,q8_0,q4_0", help="V types, paired with -ctk")
    parser.add_argument("-fa", "--flash-attn", dest="flash_attn", type=options.on_off, default=True, help="on|off (default on)")
    parser.add_argument("-ub", "--n-ubatch", dest="n_ubatch", type=options.positive_int, default=512)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--verify", action="store_true",
                        help="create the recommended context for real and compare (GPU memory on CUDA; system RAM here)")
    parser.add_argument("--results", type=Path, default=None, help="also append a fit record to this JSONL file")
    parser.add_argument("--ram", default=None, help="with --verify on a CPU build: the system-RAM budget (e.g. 8GiB)")


def _list(text: str, conv, what: str) -> list:
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise UsageError(f"{what}: empty list")
    return [conv(p) for p in items]


def _ctx(text: str) -> int:
    try:
        return options.ctx_int(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"--ctx: {exc}") from None


def _ctype(text: str) -> str:
    from ..cache_types import parse_cache_type

    return parse_cache_type(text)


def cache_pairs(type_k: list[str], type_v: list[str]) -> list[tuple[str, str]]:
    if len(type_k) == len(type_v):
        return list(zip(type_k, type_v))
    if len(type_k) == 1:
        return [(type_k[0], v) for v in type_v]
    if len(type_v) == 1:
        return [(k, type_v[0]) for k in type_k]
    raise UsageError("-ctk and -ctv lists must have the same length (they are paired), or one of them a single type")


def run(args: argparse.Namespace) -> int:
    from ..fitting import FitSession

    budgets = [(size_label(t), parse_size(t, "--vram")) for t in args.vram.split(",") if t.strip()]
    if not budgets:
        raise UsageError("--vram: empty list")
    reserve = parse_size(args.reserve, "--reserve") if args.reserve.strip() not in ("0", "0GiB") else 0
    contexts = _list(args.n_ctx, _ctx, "--ctx")
    pairs = cache_pairs(_list(args.type_k, _ctype, "-ctk"), _list(args.type_v, _ctype, "-ctv"))
    ram = parse_size(args.ram, "--ram") if args.ram else None
    if ram is not None and not args.verify:
        raise UsageError("--ram goes with --verify")

    resolved = model_source.resolve(args.model)
    start = time.perf_counter()
    session = FitSession.open(resolved, flash_attn=args.flash_attn, n_ubatch=args.n_ubatch, reserve=reserve,
                              verify=args.verify)
    if args.verify and not session.gpu_build:
        if ram is None:
            raise UsageError("this llama.cpp build has no GPU offload: give --ram to verify against system RAM")
        budgets = [(f"{size_label(args.ram)} RAM", ram)]
    result = session.evaluate(budgets, contexts, pairs)
    result.seconds = time.perf_counter() - start
    verification = session.verify(result) if args.verify else None
    if args.results:
        from .. import records

        model = records.model_block(resolved.label, resolved.metadata.display_name, result.architecture,
                                    str(resolved.path) if resolved.path else None, False)
        records.write(args.results, records.FIT_SCHEMA, model, {"fit": result.to_dict(), "verify": verification})
    if args.json:
        print(json.dumps(result.to_dict() | ({"verify": verification} if verification else {}), indent=2))
    else:
        print(result.render())
        if verification:
            print()
            print(render_verification(verification))
    if verification and not verification.get("ok", False):
        return 1
    return 0


def render_verification(v: dict) -> str:
    if "error" in v:
        return f"verify: {v['error']}"
    rows = [[k, f"{p / MIB:.2f}", "-" if m is None else f"{m / MIB:.2f}"]
            for k, p, m in v["parts"]]
    out = [f"verify: created {v['what']} for real ({v['where']})",
           render_table(["part", "predicted MiB", "llama.cpp allocated MiB"], rows, align="lrr"),
           f"predicted total {v['predicted_total'] / MIB:.2f} MiB, allocated {v['measured_total'] / MIB:.2f} MiB"
           f" (llama.cpp's buffers), process memory grew {v['rss_delta'] / MIB:.2f} MiB (RSS)"
           + (f", GPU memory used grew {v['gpu_delta'] / MIB:.2f} MiB (NVML)" if v.get("gpu_delta") is not None else ""),
           f"budget {v['budget'] / MIB:.2f} MiB: " + ("within" if v["measured_total"] <= v["budget"] else "OVER")
           + ("; prediction matches" if v["ok"] else "; prediction MISSED")]
    return "\n".join(out)

