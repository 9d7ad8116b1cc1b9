"""`llamabench roofline MODEL`: what llama-bench would print on a card, test by test, predicted."""

from __future__ import annotations

import argparse

from .. import api
from ..jobs.roofline.job import CALIBRATE_MAX_BYTES, LISTS, ROOFLINE_PARAMS
from ..render.speed import render_roofline
from ..settings import arguments
from ..settings.cards import CARDS
from ..settings.params import OutputFormat
from . import SUMMARY
from .output import api_options, keywords, show

HELP = SUMMARY["roofline"]
EXAMPLES = f"""examples:
  llamabench roofline gpt-oss-20b --card dgx-spark -p 2048 -n 32 -d 0,4096,16384,32768 -ub 2048
  llamabench roofline qwen3-30b-a3b --quant Q8_0 --card ryzen-ai-max-395-128gb --backend rocm -d 0,32768
  llamabench roofline model.gguf -d 0,2048,8192          # this machine's CPU, as bench would measure it
  llamabench roofline model.gguf --calibrate bench.jsonl  # scaled to your own bench run of the model
  llamabench roofline qwen3-30b-a3b --card rtx-3090+rtx-3060-12gb -ts 2,1   # a split over two cards (PCIe)
  llamabench roofline qwen3-5-35b-a3b --card rtx-4060-ti-16gb -ncmoe 16   # what fit recommends, experts in RAM
  llamabench roofline llama-3-1-8b --card rtx-4090 -d 4096,32768 -o md
Each row is a llama-bench test (pp512 @ d4096: 512 prompt tokens after 4096 cached; tg128 @ d4096: 128 decoded)
and its t/s is an estimate: the bytes and FLOPs of each step (weights, KV at that depth, recurrent state,
matrix products and flash attention, a ubatch at a time) over the machine's published bandwidth and matrix
throughput, at the efficiencies the backend's kernels reached in published llama-bench runs on other machines
(one set a backend, fitted once; the held-out range is where those runs fell when left out of the fit).
Without --card or --bandwidth the machine is this one's CPU. -r is taken and ignored (nothing is timed).
The full-GQA column is the same model with every mixer layer cached as full attention.
--calibrate reads a results file of {CALIBRATE_MAX_BYTES // 2**20} MiB at most (every record in it is read and checked).
"""
# no --results here: a prediction is not a measurement to keep (and the older `--results FILE` meant
# "calibrate on FILE": it now fails in one line rather than append to the user's bench file)
OPTIONS = api_options(api.roofline, leave_out=("results",))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *ROOFLINE_PARAMS, *OPTIONS, "output"), lists=LISTS,
                            defaults={"n_gpu_layers": None, "n_cpu_moe": None, "n_depth": None},
                            helps={"n_gpu_layers": "price fit's -ngl N: the last N layers on the card, the rest in "
                                                   "system RAM (--ram-bandwidth)",
                                   "n_cpu_moe": "price fit's --n-cpu-moe N: the routed experts of layers 0..N-1 read "
                                                "from system RAM",
                                   "card": "a card from the table, or several joined by + (a split): "
                                           + ", ".join(c.id for c in CARDS),
                                   "backend": "the llama.cpp backend that runs the card: cuda, vulkan, rocm, metal, "
                                              "cpu (default: the card's own; an AMD card takes vulkan or rocm)",
                                   "ram_bandwidth": "GB/s of the system RAM that holds the part off the card "
                                                    "(default: the named card's typical desktop, else this machine's)",
                                   "repetitions": "taken for llama-bench's command line; nothing is timed",
                                   "n_depth": "depths: tokens already in the context (default: 0 and n_ctx / 16, / 8, "
                                              "/ 4, / 2, n_ctx)",
                                   "quant": "published quant of a catalog model (default Q4_K_M), or a llama-quantize "
                                            "file type priced by llama.cpp's recipe"})


def run(args: argparse.Namespace) -> int:
    record = api.roofline(args.model, **keywords(args, (*OPTIONS, *ROOFLINE_PARAMS)))
    if args.output is OutputFormat.JSONL:  # llama-bench -o jsonl: one test a line
        print(render_roofline(record, "jsonl"))
        return 0
    show(record, args.output, render_roofline)
    return 0
