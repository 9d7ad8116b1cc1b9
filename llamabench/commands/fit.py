"""`llamabench fit MODEL`: does 128k fit on a 16 / 24 GB card, and with which settings?"""

from __future__ import annotations

import argparse
import sys

from .. import api
from ..jobs.fit.quants import MAX_QUANTS, SWEEP_SECONDS, wants_sweep
from ..render.fit import render_text, render_verification
from ..render.progress import StatusLine
from ..render.quality import fit_quality_lines
from ..render.quants import render_quants
from ..settings import arguments
from . import SUMMARY
from .output import api_options, keywords, show

HELP = SUMMARY["fit"]
EXAMPLES = r"""examples:
  llamabench fit qwen3-5-35b-a3b                       # 16 and 24 GiB cards, 128k, f16 / q8_0 / q4_0 KV
  llamabench fit model.gguf --vram 12GiB --ctx 32k,128k -ctk q8_0 -ctv q8_0
  llamabench fit model.gguf --ctx 32768 -ngl 12,99 --verify   # these placements, created on the (emulated) card
  llamabench fit qwen3-30b-a3b --n-cpu-moe 8,16                # experts of the first layers kept in RAM
  llamabench fit model.gguf -ot 'blk\.(1[0-9])\.ffn_.*_exps=CPU' --no-mmap  # llama.cpp's -ot; weights read, not mapped
  llamabench fit model.gguf --quant Q3_K_M                     # this file in another quant (llama.cpp's recipe)
  llamabench fit model.gguf --ram 32GiB                       # the host part must fit 32 GiB of system RAM
  llamabench fit model.gguf --runtime llama-cpp-python        # size the Llama() context instead
  llamabench fit model.gguf -np 1 --cache-ram 0               # one slot, no prompt cache
  llamabench fit model.gguf --cpu-only --ram 8GiB --verify    # everything in system RAM instead of a card
  llamabench fit qwen3-30b-a3b --vram 24GiB+12GiB              # one machine, two cards: the -ts is searched
  llamabench fit model.gguf --vram 16GiB+8GiB -ts 2,1 --verify  # this split, created on two emulated cards
  llamabench fit model.gguf --rpc 192.168.1.20:50052 --vram 12GiB  # a second PC's ggml-rpc-server in front
  llamabench fit qwen3-30b-a3b --vram rx-7900-xtx --n-cpu-moe 24    # sized as its Vulkan build (--backend)
  llamabench fit model.gguf -ngl 20 --no-op-offload                # a prompt's batch not run on the card
  llamabench fit qwen3-30b-a3b --vram apple-m4-pro-24gb             # a Mac: one pool, its working set within it
  llamabench fit model.gguf --vram 36GB --unified --wired-limit 30000  # an unnamed Mac, iogpu.wired_limit_mb raised
  llamabench fit -hf unsloth/Qwen3.5-35B-A3B-GGUF --quant all --vram 24GiB  # each quant, fitted from its header
The context sized is the one the printed command creates: llama-server by default (4 slots on one
unified KV stream, its prompt cache and checkpoints in RAM), or Llama() with --runtime llama-cpp-python.
--verify creates the answer for real: on a GPU build on the card; without one (or with --emulate) on an
emulated card (llama.cpp's RPC backend serving this machine's CPU as a device on 127.0.0.1), and sets what
llama.cpp allocated on each device against the prediction (exit 1 on a mismatch).
Budgets: plain numbers are GiB; units GiB, GB, MiB, MB; + joins one machine's cards, in device order
(CUDA0 first). The reserve (default 512 MiB) is kept free on each card for the driver and the display;
512MiB+1GiB gives each card its own. --rpc hosts come first (llama.cpp orders RPC devices first), each
sized by the free memory its ggml-rpc-server reports.
A card you do not have is sized as its GPU backend allocates (--backend: a named card's own, else CUDA): weights
kept in system RAM are copied to the card for a prompt's batch (op offload), CUDA converts a quantized KV cache to
f16 for flash attention, Vulkan reorders nodes and refuses tensors past maxStorageBufferRange.
-hf OWNER/REPO[:QUANT] sizes the file llama.cpp's -hf loads, picked by its rules: the first page of the hub's
listing, QUANT read as a regular expression (letters, digits, _ - . * + ? | ( )).
--quant all, or a comma list, on -hf OWNER/REPO or a catalog id weighs each quant, said on stderr as it goes:
{max_quants} quants at most and {seconds:g} s in all; past either it stops in one line that says how to narrow it
(--quant Q4_K_M,Q5_K_M).
""".format(max_quants=MAX_QUANTS, seconds=SWEEP_SECONDS)
OPTIONS = api_options(api.fit)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *api.FIT_PARAMS, *OPTIONS, "output"), lists=(*api.FIT_LISTS, "vram"),
                            defaults={**api.FIT_DEFAULTS, "vram": None, "reserve": None, "n_gpu_layers": (),
                                      "n_cpu_moe": (), "n_seq": None, "kv_unified": None, "cache_ram": None,
                                      "ctx_checkpoints": None, "spec_type": None},
                            helps={"vram": "card sizes, comma list of alternatives; + joins one machine's cards "
                                           "(24GiB+12GiB); plain numbers are GiB (default: on a GPU build its GPUs' "
                                           "free memory, else 16GiB,24GiB)",
                                   "reserve": "kept free on each card for the driver and display; one per card "
                                              "joined by + (512MiB+1GiB) (default 512MiB)",
                                   "n_seq": "llama-server's slots (-np); default: its auto, 4 slots on one unified "
                                            "KV stream",
                                   "kv_unified": "one KV stream for all slots (llama-server's -kvu; on with the auto "
                                                 "-np)",
                                   "spec_type": "llama-server's speculative decoding: draft-mtp (the model's own MTP "
                                                "layer), ngram-*, none; default: none, and draft-mtp beside it where "
                                                "the model carries an MTP layer",
                                   "n_gpu_layers": "evaluate exactly these -ngl placements instead of searching",
                                   "n_cpu_moe": "evaluate exactly these --n-cpu-moe placements (all layers on the "
                                                "card)"})


def run(args: argparse.Namespace) -> int:
    # -ngl / --n-cpu-moe not given (an empty list): api.fit searches the placements
    given = {k: v for k, v in keywords(args, api.FIT_PARAMS).items() if not (k == "spec_type" and v is None)}
    line = StatusLine(enabled=sys.stderr.isatty())
    if wants_sweep(args.model or "", args.quant):  # -hf OWNER/REPO --quant all|Q4_K_M,Q8_0: every quant's header

        def said(text: str) -> None:  # one line per quant, each its own: the status line cleared first
            line.close()
            print(text, file=sys.stderr, flush=True)

        try:
            swept = api.fit_quants(args.model, **{k: v for k, v in keywords(args, OPTIONS).items() if k != "model"},
                                   **given, progress=line, on_quant=said)
        finally:
            line.close()
        show(swept, args.output, render_quants)
        return 0 if swept.best() is not None else 1
    try:
        record = api.fit(args.model, **keywords(args, OPTIONS), **given, progress=line)
    finally:
        line.close()

    def render(r, fmt: str) -> str:
        text = render_text(r.fit, fmt)
        if r.quality and fmt != "csv":
            text += "\n\n" + "\n".join(fit_quality_lines(r.quality))
        return text + ("\n\n" + render_verification(r.verify) if r.verify and fmt != "csv" else "")

    show(record, args.output, render)
    return 0 if record.ok else 1
