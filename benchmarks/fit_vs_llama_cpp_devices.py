"""Our fit beside llama.cpp's own fit (`llama-fit-params`) on several cards: placements, each device's
projection, and the time, side by side in one run.

Each machine is a set of emulated cards (one RPC server per card on 127.0.0.1). An RPC device reports
the host's free memory F, so llama.cpp is given the card budgets B_i as margins (`-fitt F-B_1,F-B_2`);
a card larger than F (24 GiB on this 24 GiB machine) is sized at F for both fits, and the table says
so. Ours is `lb.fit(..., vram="B_1+B_2", reserve=0, n_seq=1)`: llama-server with one slot, the
context closest to llama-fit-params' (one sequence); llama-fit-params sizes llama-cli's context,
whose compute buffer holds logits for a whole ubatch (512 outputs) where llama-server reserves only
its slots' outputs, so its projection of our answer is larger on the card holding the output layer.

    .venv/bin/python benchmarks/fit_vs_llama_cpp_devices.py [--models ID,...] [--cards 16+8,12+12,24+12]
        [--ctx 131072] [--tools ~/.cache/llama-tools/0.3.36/bin]   (../shared/tools/build_llama_tools.sh)
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import llamabench as lb
from llamabench.jobs.fit.advice import short_placement
from llamabench.jobs.twin.shape import cached_shape_twin
from llamabench.llama.rpc import emulated_card
from llamabench.memory.placement import recommend
from llamabench.render.table import render_table
from llamabench.world import catalog

MIB = 2**20
BREAKDOWN = re.compile(r"\|\s+- RPC(\d+) \([^)]*\) \|\s*(\d+) =\s*(\d+) \+ "
                       r"\(\s*(\d+) =\s*(\d+) \+\s*(\d+) \+\s*(\d+)\)")
FREE = re.compile(r"projected to use (\d+) MiB of device memory vs\. (\d+) MiB of free device memory")


def llama_fit(tools: Path, path: str, endpoints: list[str], n_ctx: int, margins: list[int],
              fixed: list[str] = ()) -> dict:
    """llama-fit-params' CLI answer and, per device, its last memory breakdown (self = model + context + compute)."""
    t0 = time.perf_counter()
    proc = subprocess.run([str(tools / "llama-fit-params"), "-m", path, "--rpc", ",".join(endpoints), "-c", str(n_ctx),
                           "-fitt", ",".join(map(str, margins)), "-fa", "on", "-v", *fixed],
                          capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t0
    args = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    per_device: dict[int, tuple[int, ...]] = {}
    for m in BREAKDOWN.finditer(proc.stderr):  # the last block is its final check
        per_device[int(m[1])] = tuple(int(x) for x in m.groups()[3:])
    free = FREE.findall(proc.stderr)
    return {"args": args, "ok": proc.returncode == 0 and args.startswith("-c"), "seconds": seconds,
            "self_mib": [per_device.get(i, (0,))[0] for i in range(len(endpoints))],
            "free_mib": int(free[0][1]) // len(endpoints) if free else None}


def short_args(args: str) -> str:
    """llama-fit-params' answer with its -ot list of expert tensors in RAM cut to their layer range."""
    out = re.sub(r"^-c \d+ ", "", args)
    if out.strip() == "-ngl -1":
        return "no change needed (-ngl -1: all layers, split by free memory)"
    layers = sorted({int(x) for x in re.findall(r"blk\\?\.(\d+)\\?\.ffn", out)})
    if layers:
        out = re.sub(r'-ot "?[^ ]+"?',
                     f"-ot experts of layers {layers[0]}-{layers[-1]} (some parts: {len(layers)}) =CPU", out)
    return out


def ours_args(row) -> list[str]:
    p = row.placement
    out = ["-ngl", "99" if p.kind.value in ("all", "n_cpu_moe") else str(p.value)]
    if p.kind.value == "n_cpu_moe":
        out += ["--n-cpu-moe", str(p.value)]
    if len(p.split) > 1:
        out += ["-ts", ",".join(map(str, p.split))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="qwen3-5-35b-a3b,gemma-3-27b,qwen3-30b-a3b")
    ap.add_argument("--cards", default="16+8,12+12,24+12", help="GiB per card, + between cards, comma between machines")
    ap.add_argument("--ctx", type=int, default=131072)
    ap.add_argument("--tools", type=Path, default=Path.home() / ".cache" / "llama-tools" / "0.3.36" / "bin")
    args = ap.parse_args()
    if not (args.tools / "llama-fit-params").exists():
        sys.exit(f"no llama-fit-params in {args.tools}: run ../shared/tools/build_llama_tools.sh first")
    rows = []
    with ExitStack() as stack:
        n_max = max(len(c.split("+")) for c in args.cards.split(","))
        endpoints = [stack.enter_context(emulated_card(n_threads=1)) for _ in range(n_max)]
        for model_id in args.models.split(","):
            entry = catalog.get_entry(model_id)
            shape = str(cached_shape_twin(entry.metadata, entry.id))
            for machine in args.cards.split(","):
                gib = [float(x) for x in machine.split("+")]
                devs = endpoints[:len(gib)]
                probe = llama_fit(args.tools, shape, devs, 4096, [0] * len(gib), ["-ngl", "0"])
                free = probe["free_mib"] or 0
                budgets = [min(int(g * 1024), free) for g in gib]
                margins = [free - b for b in budgets]
                theirs = llama_fit(args.tools, shape, devs, args.ctx, margins)
                if theirs["ok"]:  # its projection of its own answer: the answer given back as fixed arguments
                    fixed = shlex.split(theirs["args"])
                    fixed = fixed[2:] if fixed[:1] == ["-c"] else fixed
                    theirs["self_mib"] = llama_fit(args.tools, shape, devs, args.ctx, margins, fixed)["self_mib"]
                vram = "+".join(f"{b}MiB" for b in budgets)
                t0 = time.perf_counter()
                result = lb.fit(shape, n_ctx=args.ctx, vram=vram, reserve=0, n_seq=1, backend="cpu").fit
                t_ours = time.perf_counter() - t0
                ours = recommend([r for r in result.rows_for(vram, args.ctx) if r.settings.type_k == "f16"])
                best = recommend(result.rows_for(vram, args.ctx))
                seen = (llama_fit(args.tools, shape, devs, ours.settings.n_ctx, margins, ours_args(ours)) if ours
                        else None)
                over = lambda used: " ".join(f"{u}{'!' if u > b else ''}" for u, b in zip(used, budgets))  # noqa: E731
                rows.append([model_id, machine + ("" if budgets == [int(g * 1024) for g in gib] else
                                                  f" (as {'+'.join(str(b) for b in budgets)} MiB)"),
                             short_args(theirs["args"]) if theirs["ok"] else "no answer",
                             over(theirs["self_mib"]) if theirs["ok"] else "-",
                             (short_placement(ours.placement) + f" (max {ours.max_n_ctx})") if ours else "nothing fits",
                             " ".join(f"{c.parts.total / MIB:.0f}" for c in ours.devices) if ours else "-",
                             (over(seen["self_mib"]) + ("" if seen["ok"] else " (it refuses: over by its context)"))
                             if seen and any(seen["self_mib"]) else "-",
                             f"{best.settings.type_k}, {short_placement(best.placement)}" if best else "-",
                             f"{theirs['seconds']:.1f} / {t_ours:.1f}"])
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(render_table(["model", "cards GiB", "llama-fit-params answer", "it projects MiB per card",
                        "ours (f16 KV, -np 1)", "we predict MiB per card", "it projects ours MiB per card",
                        "our best KV choice", "s it / ours"], rows, align="llllrrrll"))
    print("MiB per card in device order; '!' marks a projection above that card's budget. llama-fit-params sizes "
          "llama-cli's context (logits for 512 outputs on the output card), ours llama-server -np 1 (one output)")


if __name__ == "__main__":
    os.environ.setdefault("LLAMABENCH_DEBUG", "0")
    main()
