"""Our fit beside llama.cpp's own fit (`llama-fit-params`), on the same emulated card and the same budget.

For each catalog model (its full-size shape twin: real shapes and vocabulary, zero data) at 16 and
24 GiB, and for a real small GGUF at budgets scaled to it, both fits answer for the same card: an RPC
device on 127.0.0.1 whose budget is B MiB (llama.cpp: `-fitt FREE-B`; ours: `--vram B --reserve 0`).
llama.cpp keeps the asked `-c`, moves layers and experts and never changes the KV type, so ours is
compared on f16 KV first (and its best KV type beside it). Both answers are then sized on the card the
same way: our exact weights / KV / recurrent and llama.cpp's own dry run of that placement for the
compute buffer; for the real GGUF both answers are also created for real on the emulated card.

    .venv/bin/python benchmarks/fit_vs_llama_cpp.py [--models ID,...] [--ctx 131072]
        [--tools ~/.cache/llama-tools/0.3.36/bin]   (built by scripts/build_llama_tools.sh)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' support package

import llamabench as lb  # noqa: E402
from llamabench.jobs.fit.advice import short_placement  # noqa: E402
from llamabench.jobs.source import resolve  # noqa: E402
from llamabench.jobs.twin.shape import cached_shape_twin  # noqa: E402
from llamabench.llama.rpc import emulated_card  # noqa: E402
from llamabench.memory.placement import Placement, PlacementKind, recommend  # noqa: E402
from llamabench.render.table import render_table  # noqa: E402
from llamabench.world import catalog  # noqa: E402

MIB, GIB = 2**20, 2**30
FREE = re.compile(r"projected to use (\d+) MiB of device memory vs\. (\d+) MiB of free device memory")
FINAL = re.compile(r"(\d+) layers(?: \((\d+) overflowing\))?,\s+(\d+) MiB used,\s+(\d+) MiB free")
OT_LAYER = re.compile(r"blk\\?\.(\d+)")


def llama_fit(tools: Path, path: str, endpoint: str, n_ctx: int, margin_mib: int, fixed: list[str] = ()) -> dict:
    """llama-fit-params' answer (-c, -ngl, experts kept in RAM) and its projection of the card's use.

    With `fixed` placement arguments (-ngl N, --n-cpu-moe N) it changes nothing and only projects them.
    """
    proc = subprocess.run([str(tools / "llama-fit-params"), "-m", path, "--rpc", endpoint, "-c", str(n_ctx),
                           "-fitt", str(margin_mib), "-fa", "on", "-v", *fixed], capture_output=True, text=True,
                          timeout=900)
    args = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    projections = FREE.findall(proc.stderr)
    final = FINAL.findall(proc.stderr)
    out = {"args": args, "ok": proc.returncode == 0 and args.startswith("-c"),
           "free_mib": int(projections[0][1]) if projections else None,
           # its projection of its own answer: the final "N MiB used" line, else the first projection (no changes)
           "projected_mib": int(final[-1][2]) if final else int(projections[0][0]) if projections else None,
           "overflowing": int(final[-1][1] or 0) if final else 0}
    tokens = args.split()
    out["n_ctx"] = int(tokens[tokens.index("-c") + 1]) if "-c" in tokens else n_ctx
    ngl = int(tokens[tokens.index("-ngl") + 1]) if "-ngl" in tokens else -1
    ot = " ".join(t for i, t in enumerate(tokens) if i and tokens[i - 1] in ("-ot", "--override-tensor"))
    out["ngl"], out["cpu_moe_layers"] = ngl, sorted({int(m) for m in OT_LAYER.findall(ot)}) if "CPU" in ot else []
    return out


def describe_theirs(answer: dict, n_layer_all: int) -> str:
    if answer["cpu_moe_layers"]:
        layers = answer["cpu_moe_layers"]
        return f"experts of layers {layers[0]}-{layers[-1]} in RAM ({answer['overflowing'] or len(layers)})"
    return "all on card" if answer["ngl"] < 0 or answer["ngl"] > n_layer_all else f"-ngl {answer['ngl']}"


def placement_args(p: Placement) -> list[str]:
    if p.kind is PlacementKind.NGL:
        return ["-ngl", str(p.value)]
    return ["-ngl", "99"] + (["--n-cpu-moe", str(p.value)] if p.kind is PlacementKind.N_CPU_MOE else [])


def compare(label: str, path: str, endpoint: str, tools: Path, budget_mib: int, n_ctx: int, free_mib: int) -> list[str]:
    """Both fits on the same file (its real tensor infos) and the same card budget."""
    margin = max(0, free_mib - budget_mib)
    t0 = time.perf_counter()
    theirs = llama_fit(tools, path, endpoint, n_ctx, margin)
    t_theirs = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = lb.fit(path, n_ctx=n_ctx, vram=f"{budget_mib}MiB", reserve=0, backend="cpu").fit  # as its RPC card
    t_ours = time.perf_counter() - t0
    rows = result.rows_for(f"{budget_mib}MiB", n_ctx)
    ours = recommend([r for r in rows if r.settings.type_k == "f16"])
    best = recommend(rows)
    projected_ours = (llama_fit(tools, path, endpoint, ours.settings.n_ctx, margin, placement_args(ours.placement))
                      ["projected_mib"] if ours else None)
    over = lambda mib: "" if mib is None or mib <= budget_mib else " OVER"  # noqa: E731
    return [label, str(budget_mib),
            f"{theirs['n_ctx']}, {describe_theirs(theirs, result.n_layer_all)}" if theirs["ok"] else "no answer",
            f"{theirs['projected_mib']}{over(theirs['projected_mib'])}" if theirs["ok"] else "-",
            (f"{ours.settings.n_ctx}, {short_placement(ours.placement)} (max {ours.max_n_ctx})" if ours
             else "nothing fits"),
            f"{ours.parts.total / MIB:.0f}" if ours else "-",
            f"{projected_ours}{over(projected_ours)}" if ours else "-",
            f"{best.settings.type_k}, {short_placement(best.placement)}" if best else "-",
            f"{t_theirs:.1f} / {t_ours:.1f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(e.id for e in catalog.load_catalog()))
    ap.add_argument("--budgets", default="16,24", help="GiB")
    ap.add_argument("--ctx", type=int, default=131072)
    ap.add_argument("--tools", type=Path, default=Path.home() / ".cache" / "llama-tools" / "0.3.36" / "bin")
    ap.add_argument("--real", action="store_true", help="also the real Gemma 3 270M at 700 / 800 / 1024 MiB")
    args = ap.parse_args()
    if not (args.tools / "llama-fit-params").exists():
        sys.exit(f"no llama-fit-params in {args.tools}: run scripts/build_llama_tools.sh first")
    rows = []
    with emulated_card(n_threads=1) as endpoint:
        free_mib = llama_fit(args.tools, str(resolve("qwen3-30b-a3b").gguf_for_llama()), endpoint,
                             4096, 0)["free_mib"]
        print(f"emulated card {endpoint}: {free_mib} MiB free (llama.cpp's reading)", file=sys.stderr)
        for model_id in args.models.split(","):
            entry = catalog.get_entry(model_id)
            shape = str(cached_shape_twin(entry.metadata, entry.id))
            for gib in args.budgets.split(","):
                rows.append(compare(model_id, shape, endpoint, args.tools, int(float(gib) * 1024), args.ctx, free_mib))
                print(" | ".join(rows[-1]), file=sys.stderr)
        if args.real:
            from tests.support import real_model

            path, why = real_model.fetch()
            if path is None:
                print(f"real GGUF skipped: {why}", file=sys.stderr)
            else:
                for budget in (700, 800, 1024):
                    rows.append(compare("gemma-3-270m Q4_K_M", str(path), endpoint, args.tools, budget, 32768,
                                        free_mib))
                    print(" | ".join(rows[-1]), file=sys.stderr)
    print(render_table(["model", "budget MiB", "llama.cpp: -c, placement", "llama.cpp projects its answer MiB",
                        "ours (f16 KV): -c, placement", "we predict MiB", "llama.cpp projects ours MiB",
                        "our best KV choice", "s llama.cpp / ours"], rows, align="lrlrlrrll"))
    print("MiB on the emulated card: llama.cpp's projections come from its own fit code (llama-fit-params, a dry run "
          "of each placement); OVER marks a projection above the budget")


if __name__ == "__main__":
    os.environ.setdefault("LLAMABENCH_DEBUG", "0")
    main()
