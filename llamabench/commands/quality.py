"""`llamabench quality MODEL`: what each lossy choice costs in quality, measured as llama-perplexity measures it."""

from __future__ import annotations

import argparse
import sys

from .. import api
from ..core.safe_text import escaped
from ..jobs.quality.job import QUALITY_LISTS, QUALITY_MIN_N_CTX, QUALITY_N_CTX, QUALITY_PARAMS
from ..render.quality import render_quality
from ..settings import arguments
from ..world.texts import MAX_TEXT_BYTES, TOKENIZE_DEADLINE_S
from . import SUMMARY
from .output import api_options, keywords, show

HELP = SUMMARY["quality"]
TEXT_MIB = MAX_TEXT_BYTES // 2**20
EXAMPLES = f"""examples:
  llamabench quality model.gguf                                  # q8_0 and q4_0 KV against f16, -c 4096
  llamabench quality model.gguf -c 4096,32768 -ctk q8_0,q4_0 -ctv q8_0,q4_0 --chunks 4
  llamabench quality model-Q4_K_M.gguf --base-model model-Q8_0.gguf -f wiki.test.raw
  llamabench quality model.gguf -ctk q8_0 -ctv q8_0 --results quality.jsonl   # fit --results shows it
The numbers are llama-perplexity's: the text cut into chunks of -c tokens, the second half of each scored, the
base's log-probs in its compact form (tools/perplexity/perplexity.cpp), so llama-perplexity --kl-divergence-base /
--kl-divergence on the same text and options prints the same KLD, PPL and same-top rate. The base and every choice
run side by side, a few rows at a time: no file of log-probs, and nothing vocab-sized held for a whole chunk.
-c is {QUALITY_MIN_N_CTX} or more (the least that scores a token); -b takes any batch (llama-perplexity decodes a chunk
-b tokens a call). The text (-f) is {TEXT_MIB} MiB at most, tokenized within {TOKENIZE_DEADLINE_S:g} s.
"""
OPTIONS = api_options(api.quality)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_arguments(parser, ("model", *QUALITY_PARAMS, *OPTIONS, "output"), lists=QUALITY_LISTS,
                            defaults={"n_gpu_layers": None, "type_k": None, "type_v": None, "n_ctx": None},
                            helps={"model": "a GGUF file of real weights (a catalog id's twin has none)",
                                   "n_ctx": f"context length of each chunk, {QUALITY_MIN_N_CTX} or more (default "
                                            f"{QUALITY_N_CTX}); the base is made per context",
                                   "type_k": "K cache types to score against f16 (default q8_0,q4_0; paired with -ctv)",
                                   "type_v": "V cache types to score against f16 (default q8_0,q4_0)",
                                   "n_gpu_layers": "layers on the GPU (default all, as llama-perplexity)"})


class _Progress:
    """Progress on stderr: a line per chunk scored, with an ETA; within a chunk, its tokens (rewritten in place on a
    terminal, elsewhere a line at most every STEP_EVERY_S)."""

    STEP_EVERY_S = 30.0

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_step = 0.0
        self.open = False

    def _line(self, text: str, *, transient: bool = False) -> None:
        if self.tty and transient:
            self.stream.write(f"\r\033[K{text}")
            self.open = True
        else:
            self.stream.write(("\r\033[K" if self.open else "") + text + "\n")
            self.open = False
        self.stream.flush()

    def __call__(self, kind: str, data) -> None:
        head = f"llamabench: quality -c {data.get('n_ctx', '')}"
        if kind == "warning":
            self._line(escaped(f"llamabench: warning: {data['message']}"))
        elif kind == "text":
            e = data["event"]
            self._line(f"{head}: {e.n_chunks} chunks of the text's {e.n_tokens:,} tokens to score "
                       f"({e.rows_per_decode} scored rows a decode call)")
        elif kind == "step":
            e, chunks = data["event"], data["chunks"]
            share = ((e.chunk - 1) * e.total + e.done) / (chunks * e.total)
            left = e.seconds / share - e.seconds if share else 0.0
            if self.tty or e.seconds - self.last_step >= self.STEP_EVERY_S:
                self.last_step = e.seconds
                self._line(f"{head}: chunk {e.chunk}/{chunks}: {e.done:,}/{e.total:,} tokens, {e.seconds:.0f} s, "
                           f"ETA ~{left:.0f} s (the scored half decodes slower)", transient=True)
        elif kind == "chunk":
            e = data["event"]
            left = e.seconds / e.done * (e.total - e.done)
            self._line(f"{head}: chunk {e.done}/{e.total} scored, {e.seconds:.0f} s, ETA {left:.0f} s")

    def close(self) -> None:
        if self.open:
            self.stream.write("\r\033[K")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    progress = _Progress()
    try:
        record = api.quality(args.model, on_event=progress, **keywords(args, (*QUALITY_PARAMS, *OPTIONS)))
    finally:
        progress.close()
    failed = [r for r in record.rows if not r.ok]
    if len(failed) == len(record.rows) and not record.interrupted and args.output.value == "text":
        # nothing measured (llama.cpp refused every context: a KV type this build lacks, out of memory): one line
        reasons = list(dict.fromkeys(r.reason or "not measured" for r in failed))
        print(escaped(f"llamabench: error: nothing measured: {'; '.join(reasons)}"), file=sys.stderr)
        return 1
    show(record, args.output, render_quality)
    if record.interrupted:
        print("llamabench: interrupted: the chunks scored before it are kept"
              + (f" in {args.results}" if args.results else ""), file=sys.stderr)
        return 130
    return 0 if all(r.ok for r in record.rows) else 1
