"""`llamabench roofline MODEL`: predicted decode t/s at depth on a card, beside the same model as full GQA."""

from __future__ import annotations

import argparse

from .. import api
from ..jobs.roofline.job import ROOFLINE_PARAMS
from ..memory.speed import CARDS
from ..render.speed import render_roofline
from ..settings import arguments
from . import SUMMARY
from .output import api_options, keywords, show

HELP = SUMMARY["roofline"]
EXAMPLES = """examples:
  llamabench roofline qwen3-5-35b-a3b --card rtx-4090 --ctx 131072
  llamabench roofline model.gguf --bandwidth 936 --tflops 35.6 --ctx 32768
  llamabench roofline model.gguf --calibrate bench.jsonl        # calibrated on your own measured depths
  llamabench roofline qwen3-30b-a3b --card rtx-3090+rtx-3060-12gb -ts 2,1   # a split over two cards (PCIe)
  llamabench roofline qwen3-30b-a3b --card rtx-4090+rtx-3090 --link 1.25 --link-ms 0.2  # the second over 10 GbE (RPC)
  llamabench roofline qwen3-5-35b-a3b --card rtx-4060-ti-16gb -ncmoe 16   # what fit recommends, experts in RAM
  llamabench roofline llama-3-1-8b --card rtx-4090 -d 4096,32768 -c 32768  # decode and TTFT at those depths
Time per token = bytes read / bandwidth + attention FLOPs / compute. A card's published bandwidth
and FP32 throughput are scaled by stated efficiencies (--bw-eff 0.70, --compute-eff 0.30); with
--calibrate FILE (bench results) the two ceilings are calibrated from two measured tg depths of this model
instead (it was --results FILE before).
The full-GQA column is the same model with every mixer layer cached as full attention.
TTFT is the time to prefill a prompt as deep as the row: every weight once per ubatch, the matrix
products at the card's published pp512 rate (llama-bench, Llama 3 8B Q4_K_M; a card without one at
its FP32 figure times the lowest ratio of a measured card), or calibrated on a pp test of --calibrate's run.
Every t/s is a ceiling: what the bytes and FLOPs allow at those efficiencies (a measured run is at or below it).
"""
# no --results here: a prediction is not a measurement to keep (and the older `--results FILE` meant
# "calibrate on FILE": it now fails in one line rather than append to the user's bench file)
OPTIONS = api_options(api.roofline, leave_out=("results",))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *ROOFLINE_PARAMS, *OPTIONS, "output"),
                            lists=("n_depth",), defaults={"n_gpu_layers": None, "n_cpu_moe": None},
                            helps={"n_gpu_layers": "price fit's -ngl N: the last N layers on the card, the rest in "
                                                   "system RAM (--ram-bandwidth)",
                                   "n_cpu_moe": "price fit's --n-cpu-moe N: the routed experts of layers 0..N-1 read "
                                                "from system RAM",
                                   "card": "a card from the table, or several joined by + (a split): "
                                           + ", ".join(c.id for c in CARDS),
                                   "quant": "published quant of a catalog model (default Q4_K_M)"})


def run(args: argparse.Namespace) -> int:
    record = api.roofline(args.model, **keywords(args, (*OPTIONS, *ROOFLINE_PARAMS)))
    show(record, args.output, render_roofline)
    return 0
