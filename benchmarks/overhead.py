"""Per-token overhead of `llamabench bench` against a bare ctypes llama_decode loop.

Same twin, same context parameters, same warm-up, same token counts; the bare loop calls
llama_cpp's low-level API directly in this process, `bench` runs its usual child process.
Rounds alternate (bare, bench, bare, bench, ...) so drift hits both sides.

    .venv/bin/python benchmarks/overhead.py [--model qwen3-30b-a3b] [--rounds 3]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import tempfile
import time
from pathlib import Path

import llamabench as lb
from llamabench.jobs.twin.build import write_twin
from llamabench.world import catalog

_quiet = None


def bare_loop(path: str, n_ctx: int, n_prompt: int, n_gen: int, reps: int,
              threads: int) -> tuple[list[float], list[float]]:
    import llama_cpp as lc

    global _quiet
    _quiet = lc.llama_log_callback(lambda *a: None)  # keep a reference: llama.cpp holds the pointer
    lc.llama_log_set(_quiet, ctypes.c_void_p(0))
    mparams = lc.llama_model_default_params()
    model = lc.llama_model_load_from_file(path.encode(), mparams)
    cparams = lc.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = n_ctx, 2048, 512
    cparams.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_ENABLED
    cparams.n_threads = cparams.n_threads_batch = threads
    cparams.no_perf = True
    ctx = lc.llama_init_from_model(model, cparams)
    mem = lc.llama_get_memory(ctx)
    n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))
    counter = 0

    def tokens(n):
        nonlocal counter
        arr = (lc.llama_token * n)(*[3 + (counter + i * 7919) % (n_vocab - 3) for i in range(n)])
        counter += n
        return arr

    def prompt(n):
        arr = tokens(n)
        assert lc.llama_decode(ctx, lc.llama_batch_get_one(arr, n)) == 0

    def gen(n):
        for _ in range(n):
            arr = tokens(1)
            assert lc.llama_decode(ctx, lc.llama_batch_get_one(arr, 1)) == 0

    pp, tg = [], []
    for run, n, out, warm in ((prompt, n_prompt, pp, min(2048, n_prompt)), (gen, n_gen, tg, 1)):
        lc.llama_memory_seq_rm(mem, 0, -1, -1)
        run(warm)
        for _ in range(reps):
            lc.llama_memory_seq_rm(mem, 0, -1, -1)
            t0 = time.perf_counter_ns()
            run(n)
            lc.llama_synchronize(ctx)
            out.append(n * 1e9 / (time.perf_counter_ns() - t0))
    lc.llama_free(ctx)
    lc.llama_model_free(model)
    return pp, tg


def bench_tool(path: str, label: str, n_ctx: int, n_prompt: int, n_gen: int, reps: int,
               threads: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        run = lb.bench(path, n_ctx=n_ctx, n_prompt=n_prompt, n_gen=n_gen, n_threads=threads, repetitions=reps,
                       results=Path(tmp) / "r.jsonl")
    by_kind = {str(r.test.kind): r.samples_ts for r in run.records}
    return by_kind["pp"], by_kind["tg"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(write_twin(catalog.get_entry(args.model).metadata, Path(tmp) / "twin.gguf").path)
        bare_pp, bare_tg, tool_pp, tool_tg = [], [], [], []
        for i in range(args.rounds):
            pp, tg = bare_loop(path, args.ctx, args.p, args.n, args.r, args.t)
            bare_pp += pp
            bare_tg += tg
            pp, tg = bench_tool(path, args.model, args.ctx, args.p, args.n, args.r, args.t)
            tool_pp += pp
            tool_tg += tg
            print(f"round {i + 1}/{args.rounds} done", flush=True)
    print(f"\n{args.model} twin, n_ctx {args.ctx}, {args.t} threads, {args.rounds} rounds x {args.r} repetitions")
    print(f"{'test':<8} {'bare ctypes t/s':>18} {'llamabench t/s':>18} {'bench / bare':>13}")
    for name, bare, tool in ((f"pp{args.p}", bare_pp, tool_pp), (f"tg{args.n}", bare_tg, tool_tg)):
        b, t = statistics.mean(bare), statistics.mean(tool)
        print(f"{name:<8} {b:>10.2f} ± {statistics.stdev(bare):>5.2f} "
              f"{t:>10.2f} ± {statistics.stdev(tool):>5.2f} {t / b:>13.3f}")


if __name__ == "__main__":
    main()
