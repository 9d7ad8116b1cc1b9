"""`llamabench quality` against llama-perplexity, the same passes side by side, in alternating rounds, on a real GGUF.

    .venv/bin/python benchmarks/quality_vs_perplexity.py [--model gemma|qwen|PATH] [-c 2048] [--chunks 2] [--rounds 3]
    .venv/bin/python benchmarks/quality_vs_perplexity.py --model gemma -c 32768 --chunks 1 --rounds 1 --ours-only
    .venv/bin/python benchmarks/quality_vs_perplexity.py --model PATH --text LICENSE.txt -c 1024   # held out

The passes: the f16-KV base and one pass per lossy KV type (q8_0, q4_0). llama-perplexity makes them as three
processes (--kl-divergence-base FILE, then --kl-divergence -ctk T -ctv T per type), `llamabench quality` as one (the
base and both types side by side). Each round times both with the wall clock, the order alternating (llama-perplexity
first in odd rounds); peak RSS is the largest process of each (wait4's ru_maxrss: a process or the largest of the
children it waited for). Both must print the same KLD, PPL and same-top rate (checked, to llama-perplexity's
printed digits). The budget of the issue: llamabench's peak RSS at most the model file + every context's KV + 1 GiB;
its wall time at most 1.2x llama-perplexity's.

llama-perplexity holds a chunk's scored logits (n_ctx/2 x n_vocab floats: 16 GiB at -c 32768 with Gemma 3's 262k
vocabulary) and writes the base's log-probs to a file (n_vocab uint16 a scored token: 8 GiB a chunk): --ours-only
skips it where that does not fit this machine, and prints what it would hold.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llamabench.world.texts import default_text  # noqa: E402
from tests.support import real_model  # noqa: E402
from tests.support.llama_server import tools_dir  # noqa: E402

TYPES = ("q8_0", "q4_0")
GIB = 2**30
STATS = {"ppl": r"Mean PPL\(Q\)\s*:\s*([\d.]+)", "kld_mean": r"Mean\s+KLD:\s*(-?[\d.]+)",
         "same_top_p": r"Same top p:\s*([\d.]+)"}


def timed(argv: list[str], **kw) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes of the largest process, stdout+stderr) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed:\n{out[-3000:]}")
    return seconds, usage.ru_maxrss * 1024, out


def perplexity(tools: Path, model: Path, text: Path, n_ctx: int, chunks: int, tmp: Path) -> tuple[float, int, dict]:
    common = [str(tools / "llama-perplexity"), "-m", str(model), "-f", str(text), "-c", str(n_ctx), "--chunks",
              str(chunks), "-nr", "-fa", "on"]
    base = tmp / "base.kld"
    seconds, rss, _ = timed(common + ["--kl-divergence-base", str(base)])
    found = {}
    for t in TYPES:
        s, r, out = timed(common + ["--kl-divergence-base", str(base), "--kl-divergence", "-ctk", t, "-ctv", t])
        seconds, rss = seconds + s, max(rss, r)
        found[t] = {k: float(re.search(p, out).group(1)) for k, p in STATS.items()}
    base.unlink()
    return seconds, rss, found


def ours(model: Path, text: Path, n_ctx: int, chunks: int) -> tuple[float, int, dict]:
    seconds, rss, out = timed([sys.executable, "-m", "llamabench", "quality", str(model), "-f", str(text), "-c",
                               str(n_ctx), "--chunks", str(chunks), "-nr", "-ctk", ",".join(TYPES), "-ctv",
                               ",".join(TYPES), "-o", "json"], cwd=ROOT)
    record = json.loads(out[out.index("{"):out.rindex("}") + 1])
    return seconds, rss, {r["type_k"]: {k: r[k] for k in STATS} for r in record["rows"]}


def budget(model: Path, n_ctx: int) -> tuple[int, int]:
    """(the model file's bytes, the KV of the base's and every type's context) from llamabench inspect (theory)."""
    import llamabench as lb

    kv = sum(lb.inspect(str(model), n_ctx=n_ctx, type_k=t, type_v=t, n_seq=1, runtime="llama-cpp-python").kv_bytes
             for t in ("f16", *TYPES))
    return model.stat().st_size, kv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma", help="gemma, qwen (the registry packages' GGUFs) or a path")
    ap.add_argument("-c", "--ctx", type=int, default=2048)
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ours-only", action="store_true", help="llamabench alone (where llama-perplexity cannot fit)")
    ap.add_argument("--text", type=Path, help="another UTF-8 text (a held-out check; default pydoc_data.topics)")
    a = ap.parse_args()
    named = {"gemma": real_model.GEMMA, "qwen": real_model.QWEN}
    if a.model in named:
        model, why = real_model.fetch(named[a.model])
        if model is None:
            raise SystemExit(why)
    else:
        model = Path(a.model)
    tools = tools_dir()
    if tools is None and not a.ours_only:
        raise SystemExit("llama-perplexity is not built: make tools")
    file_bytes, kv = budget(model, a.ctx)
    with tempfile.TemporaryDirectory() as tmp:
        text = a.text or Path(tmp) / "topics.txt"
        if a.text is None:
            text.write_text(default_text().text, encoding="utf-8")
        times: dict[str, list[float]] = {"llama-perplexity": [], "llamabench": []}
        peaks: dict[str, int] = {"llama-perplexity": 0, "llamabench": 0}
        for i in range(a.rounds):
            order = ["llama-perplexity", "llamabench"] if i % 2 == 0 else ["llamabench", "llama-perplexity"]
            results = {}
            for who in order:
                if who == "llama-perplexity" and a.ours_only:
                    continue
                s, rss, found = (perplexity(tools, model, text, a.ctx, a.chunks, Path(tmp)) if who == "llama-perplexity"
                                 else ours(model, text, a.ctx, a.chunks))
                times[who].append(s)
                peaks[who] = max(peaks[who], rss)
                results[who] = found
                print(f"round {i + 1}: {who}: {s:.1f} s, peak RSS {rss / GIB:.2f} GiB", flush=True)
            if len(results) == 2:
                for t in TYPES:
                    a_, b_ = results["llama-perplexity"][t], results["llamabench"][t]
                    same = all(abs(a_[k] - b_[k]) <= 10 ** -(4 if k == "ppl" else 3 if k == "same_top_p" else 6) * 1.01
                               for k in STATS)
                    print(f"  {t}: llama-perplexity {a_} | llamabench {({k: round(v, 6) for k, v in b_.items()})}"
                          f" -> {'same' if same else 'DIFFERENT'}")
    print(f"\n{model.name}, -c {a.ctx}, {a.chunks} chunks of {a.text or 'pydoc_data.topics'}, base + "
          f"{', '.join(TYPES)}; {a.rounds} rounds, alternating")
    ours_s = statistics.median(times["llamabench"])
    if times["llama-perplexity"]:
        theirs = statistics.median(times["llama-perplexity"])
        print(f"wall (median): llama-perplexity {theirs:.1f} s, llamabench {ours_s:.1f} s: ratio "
              f"{ours_s / theirs:.2f}x (budget 1.2x)")
        print(f"peak RSS: llama-perplexity {peaks['llama-perplexity'] / GIB:.2f} GiB, llamabench "
              f"{peaks['llamabench'] / GIB:.2f} GiB")
    else:
        print(f"wall (median): llamabench {ours_s:.1f} s")
        print(f"llama-perplexity would hold {a.ctx // 2:,} x n_vocab floats of logits and write n_vocab uint16 per "
              "scored token to its base file")
    limit = file_bytes + kv + GIB
    print(f"llamabench peak RSS {peaks['llamabench'] / GIB:.2f} GiB against model {file_bytes / GIB:.2f} + KV "
          f"{kv / GIB:.2f} (f16 + {' + '.join(TYPES)}) + 1 GiB = {limit / GIB:.2f} GiB: "
          f"{'within' if peaks['llamabench'] <= limit else 'OVER'}")


if __name__ == "__main__":
    main()
