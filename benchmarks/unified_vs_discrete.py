"""The same models on a discrete card beside system RAM and on unified machines (one pool, two limits), side by side.

    .venv/bin/python benchmarks/unified_vs_discrete.py [-c 32768] [--models qwen3-30b-a3b,gemma-3-27b,qwen3-5-35b-a3b]

Each cell is llamabench's own fit (catalog twins, published quant sizes): the recommended row's KV type and placement,
what the card (or the device's ceiling) holds, what the RAM holds, and which limit binds where nothing fits. The
discrete machines check the host part against their RAM (--ram); the Macs count the device's buffers and the host's
in one pool (--cache-ram 0 on both: the prompt cache is the user's choice, not the model's).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llamabench as lb  # noqa: E402
from llamabench.render.fit import fits_text  # noqa: E402

MACHINES = (("16 GiB card + 64 GiB RAM", dict(vram="16GiB", ram="64GiB")),
            ("24 GiB card + 64 GiB RAM", dict(vram="24GiB", ram="64GiB")),
            ("apple-m4-pro-24gb", dict(vram="apple-m4-pro-24gb")),
            ("apple-m1-max-64gb", dict(vram="apple-m1-max-64gb")))


def cell(model: str, n_ctx: int, options: dict) -> str:
    record = lb.fit(model, n_ctx=n_ctx, spec_type="none", cache_ram=0, **options)
    result = record.fit
    label = result.budgets[0].label
    best = result.recommended(label, n_ctx)
    if best is not None:
        where = {"all": "all on card", "n_cpu_moe": f"--n-cpu-moe {best.placement.value}",
                 "ngl": f"-ngl {best.placement.value}", "ram": "RAM"}[best.placement.kind.value]
        ram = best.pool_bytes if best.pooled else best.host.total
        return (f"fits: {best.settings.type_k} KV, {where}; card {best.card_total / 2**30:.1f} GiB, "
                f"{'pool' if best.pooled else 'RAM'} {ram / 2**30:.1f} GiB")
    rows = result.rows_for(label, n_ctx)
    closest = min(rows, key=lambda r: (not r.card_fits, r.ram_short_by if r.card_fits else r.short_by))
    return f"no: {fits_text(closest)} ({closest.settings.type_k} KV)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", type=int, default=32768)
    parser.add_argument("--models", default="qwen3-30b-a3b,gemma-3-27b,qwen3-5-35b-a3b")
    args = parser.parse_args()
    print(f"n_ctx {args.c}, --cache-ram 0; each cell llamabench's fit (catalog twins, published Q4_K_M sizes)\n")
    print("| model | " + " | ".join(name for name, _ in MACHINES) + " |")
    print("|---|" + "---|" * len(MACHINES))
    start = time.perf_counter()
    for model in args.models.split(","):
        print(f"| {model} | " + " | ".join(cell(model, args.c, options) for _, options in MACHINES) + " |",
              flush=True)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
