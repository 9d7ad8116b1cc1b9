"""`llamabench fit MODEL`: does 128k fit on a 16 / 24 GB card, and with which settings?"""

from __future__ import annotations

import argparse
import json
import time

from .. import source as model_source
from ..errors import UsageError
from . import options

HELP = "does n_ctx fit on a 16 / 24 GB card beside the weights, and with which settings?"
EXAMPLES = """examples:
  llamabench fit qwen3-5-35b-a3b                       # 16 and 24 GiB cards, 128k, f16 / q8_0 / q4_0 KV
  llamabench fit model.gguf --vram 12GiB --ctx 32768,131072 -ctk q8_0 -ctv q8_0
  llamabench fit model.gguf --ctx 32768 -ngl 12,99 --verify   # these placements, created on the (emulated) card
  llamabench fit qwen3-30b-a3b --n-cpu-moe 8,16                # experts of the first layers kept in RAM
  llamabench fit model.gguf --ram 8GiB --verify               # everything in system RAM instead of a card
--verify creates the answer for real: on a GPU build on the card; without one on an emulated card
(llama.cpp's RPC backend serving this machine's CPU as a device on 127.0.0.1), and sets what
llama.cpp allocated on each device against the prediction (exit 1 on a mismatch).
Budgets: plain numbers are GiB; units GiB, GB, MiB, MB. The reserve (default 512 MiB) is kept free
for the driver and the display.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model(parser)
    parser.add_argument("--vram", type=options.comma_list(options.labelled_size), default=None,
                        help="card sizes, comma list (default 16GiB,24GiB)")
    parser.add_argument("-c", "--ctx", dest="n_ctx", type=options.comma_list(options.ctx_int), default=(131072,),
                        help="context lengths, comma list (default 131072)")
    parser.add_argument("--reserve", type=options.size_or_zero, default=512 * 2**20,
                        help="kept free for driver and display (default 512MiB)")
    options.add_cache_types(parser, listed=True, default="f16,q8_0,q4_0")
    parser.add_argument("-fa", "--flash-attn", dest="flash_attn", type=options.on_off, default=True, help="on|off (default on)")
    parser.add_argument("-ub", "--ubatch-size", "--n-ubatch", dest="n_ubatch", type=options.positive_int, default=512,
                        help="n_ubatch (default 512)")
    options.add_output(parser)
    parser.add_argument("--verify", action="store_true",
                        help="create the recommended context for real and compare (GPU memory on CUDA; system RAM here)")
    options.add_results(parser, "a fit record")
    parser.add_argument("-ngl", "--n-gpu-layers", dest="n_gpu_layers", type=options.comma_list(options.nonneg_int),
                        default=(), help="evaluate exactly these -ngl placements (comma list) instead of searching")
    parser.add_argument("-ncmoe", "--n-cpu-moe", dest="n_cpu_moe", type=options.comma_list(options.nonneg_int),
                        default=(), help="evaluate exactly these --n-cpu-moe placements (comma list, all layers on the card)")
    parser.add_argument("--mmproj", default=None, metavar="FILE",
                        help="a vision projector GGUF (local, https:// or hf://), or 'published' for a catalog "
                             "model's own: its weights and compute buffer on the card")
    parser.add_argument("--no-mmproj-offload", action="store_true",
                        help="keep the projector in system RAM, as llama-server's --no-mmproj-offload")
    parser.add_argument("--quant", default=None, help="with --remote: the catalog's published quant (e.g. Q4_K_M)")
    parser.add_argument("--remote", action="store_true",
                        help="a catalog id: read the real header of its published --quant from Hugging Face")
    parser.add_argument("--ram", type=options.labelled_size, default=None,
                        help="fit everything into system RAM with this budget instead of a card (e.g. 8GiB)")


def remote_model(model_id: str, quant: str | None) -> str:
    """The hf:// path of a catalog model's published quant."""
    from .. import catalog

    entry = catalog.get_entry(model_id)
    quants = {q.name: q for q in entry.published_quants if q.hf}
    name = quant or "Q4_K_M"
    if name not in quants:
        raise UsageError(f"{model_id}: no Hugging Face location for {name} in the catalog",
                         hint="published with a location: " + (", ".join(quants) or "none"))
    return "hf://" + quants[name].hf


def run(args: argparse.Namespace) -> int:
    from ..fit.job import FitSession
    from ..fit.search import Placement, PlacementKind
    from ..fit.verify import verify_fit
    from ..render.fit import render_text, render_verification

    budgets = list(args.vram or (("16GiB", 16 * 2**30), ("24GiB", 24 * 2**30)))
    if any(c == 0 for c in args.n_ctx):
        raise UsageError("--ctx 0 is not allowed in fit: give the context length")
    pairs = options.cache_pairs(args.type_k, args.type_v)

    model = remote_model(args.model, args.quant) if args.remote else args.model
    source = model_source.resolve(model)
    if source.url and args.verify:
        raise UsageError(f"--verify creates the model for real: download {source.url} (llamabench read only its "
                         "header) and give the file, or verify a catalog id on its twin")
    start = time.perf_counter()
    ram_mode = args.ram is not None
    if ram_mode and (args.n_gpu_layers or args.n_cpu_moe):
        raise UsageError("--ram puts everything in system RAM: it does not go with -ngl or --n-cpu-moe")
    session = FitSession.open(source, flash_attn=args.flash_attn, n_ubatch=args.n_ubatch, reserve=args.reserve,
                              verify=args.verify, ram_mode=ram_mode)
    if ram_mode:
        budgets = [(f"{args.ram[0]} RAM", args.ram[1])]
    if args.mmproj == "published":
        if not (source.entry and source.entry.mmproj):
            raise UsageError(f"{args.model}: the catalog names no published projector for it")
        args.mmproj = "hf://" + source.entry.mmproj
    if args.mmproj:
        from ..projector import projector_from_metadata

        session.add_projector(projector_from_metadata(model_source.read_any(args.mmproj)),
                              offload=not args.no_mmproj_offload)
    placements = ([Placement(PlacementKind.NGL, n) for n in args.n_gpu_layers]
                  + [Placement(PlacementKind.N_CPU_MOE, n) for n in args.n_cpu_moe])
    if placements and any(p.kind is PlacementKind.N_CPU_MOE for p in placements) and not session.weights.has_experts():
        raise UsageError(f"{args.model} has no routed experts: --n-cpu-moe does not apply")
    result = session.evaluate(budgets, list(args.n_ctx), pairs, placements or None)
    if args.mmproj:
        result.server_args = ["--mmproj", args.mmproj] + (["--no-mmproj-offload"] if args.no_mmproj_offload else [])
    result.seconds = time.perf_counter() - start
    verification = None
    if args.verify:
        verification = verify_fit(result, session, given=bool(placements))
    if args.results:
        from ..results.records import FitRecord, append

        append(args.results, FitRecord(source.model_block(result.architecture), fit=result, verify=verification))
    if args.output == options.OutputFormat.JSON:
        print(json.dumps(result.to_dict() | ({"verify": verification} if verification else {}), indent=2))
    else:
        print(render_text(result))
        if verification:
            print()
            print(render_verification(verification))
    if verification and not verification.get("ok", False):
        return 1
    return 0
