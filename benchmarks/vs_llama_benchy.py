"""`bench --runtime llama-server` against llama-benchy 0.4.0, alternating, on one llama-server.

One llama-server (llama.cpp's own, built by scripts/build_llama_tools.sh) serves the model; each
round runs llama-benchy (`--enable-prefix-caching`: the context loaded first, then the follow-up timed) and
our server bench (`--url`, attached to the same server) with the same depths, pp and tg; the order
alternates between rounds. The table gives per test each tool's mean t/s, the median over rounds of ours /
llama-benchy's, and the same for each tool's wall time.

llama-benchy runs offline here: it needs a tokenizer and a book. The tokenizer is built from the GGUF's own
vocabulary and merges (a byte-level BPE `tokenizer.json`, read by the `tokenizers` package, as llama-benchy's
LightweightTokenizer takes a local file); the book is local text written where llama-benchy caches a
downloaded book (`~/.cache/llama-benchy/<md5 of --book-url>.txt`, under a temporary HOME), so nothing is
fetched. llama-benchy goes through the chat template (/v1/chat/completions) and counts tokens with that
tokenizer; ours sends token ids to /completion.

    .venv/bin/python benchmarks/vs_llama_benchy.py --benchy /tmp/benchy/venv/bin/llama-benchy [--model GGUF]
        [--rounds 2] [-p 256] [-n 32] [-d 0,2048] [-r 3] [-t 2]
The default model is the real Qwen2.5-Coder 0.5B Q4_K_M that the tests fetch (tests/support/real_model.py).
"""

from __future__ import annotations

import argparse
import hashlib
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
sys.path.insert(0, str(ROOT))  # the tests' support package

import llamabench as lb  # noqa: E402
from llamabench.llama import serving  # noqa: E402

BOOK_URL = "file://llamabench-local-book"
BOOK_SOURCES = [ROOT / "README.md", Path("/usr/share/common-licenses/GPL-3"), Path("/usr/share/common-licenses/GPL-2"),
                Path("/usr/share/common-licenses/Apache-2.0")]


def tokenizer_json(gguf_path: str, out: Path) -> Path:
    """A byte-level BPE tokenizer.json from the GGUF's vocabulary, merges and special tokens."""
    from gguf import GGUFReader

    reader = GGUFReader(gguf_path)

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]

    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True} for i, (t, k) in enumerate(zip(tokens, types)) if k in (3, 4)]  # control, user-defined
    data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                                                "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}}
    out.write_text(json.dumps(data))
    return out


PROMPT_EVAL = re.compile(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens")


def local_home(tmp: Path) -> Path:
    """A HOME whose llama-benchy cache already holds the book of BOOK_URL: local text, nothing downloaded."""
    home = tmp / "home"
    cache = home / ".cache" / "llama-benchy"
    cache.mkdir(parents=True)
    text = "\n\n".join(p.read_text(errors="replace") for p in BOOK_SOURCES if p.is_file())
    (cache / f"{hashlib.md5(BOOK_URL.encode()).hexdigest()}.txt").write_text(text)
    return home


def run_benchy(a, url: str, tokenizer: Path, home: Path, out: Path) -> tuple[dict[str, float], float]:
    # --model: llama-benchy asks Hugging Face whether a served name is a model; any name does for llama-server
    cmd = [a.benchy, "--base-url", f"{url}/v1", "--model", "local/gguf", "--tokenizer", str(tokenizer),
           "--book-url", BOOK_URL,
           "--pp", str(a.p), "--tg", str(a.n), "--depth", *a.d.split(","), "--runs", str(a.r),
           "--enable-prefix-caching", "--exit-on-first-fail", "--exact-tg", "--skip-coherence", "--format", "json",
           "--save-result", str(out)]
    env = {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    out.with_suffix(".log").write_text(done.stdout + "\n" + done.stderr)  # kept: what llama-benchy said
    if done.returncode != 0 or not out.exists():  # said, and the round left out of the ratios; the others go on
        said = [line for line in (done.stdout + done.stderr).splitlines() if "rror" in line][-1:]
        print(f"llama-benchy failed ({done.returncode}): {said[0] if said else 'no error line'} "
              f"(its output: {out.with_suffix('.log')})", file=sys.stderr)
        return {}, wall
    got: dict[str, float] = {}
    for run in json.loads(out.read_text())["benchmarks"]:
        if run["is_context_prefill_phase"]:
            continue
        suffix = f" @ d{run['context_size']}" if run["context_size"] else ""
        if run.get("pp_throughput"):
            got[f"pp{run['prompt_size']}{suffix}"] = run["pp_throughput"]["mean"]
        if run.get("tg_throughput"):
            got[f"tg{run['response_size']}{suffix}"] = run["tg_throughput"]["mean"]
    return got, wall


def run_ours(a, url: str, tmp: Path, round_: int) -> tuple[dict[str, float], float]:
    t0 = time.perf_counter()
    run = lb.bench(a.model, runtime="llama-server", url=url, n_ctx=a.ctx, n_prompt=a.p, n_gen=a.n, n_depth=a.d,
                   repetitions=a.r, n_threads=a.t, repack=False, results=tmp / f"ours-{round_}.jsonl")
    wall = time.perf_counter() - t0
    return {r.test.name: r.avg_ts for r in run.records if r.ok}, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchy", default="llama-benchy", help="the llama-benchy executable (its own venv)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--rounds", type=int, default=2, help="even, so that each tool goes first equally often")
    ap.add_argument("-p", type=int, default=256)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-d", default="0,2048")
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    a = ap.parse_args()
    if a.model is None:
        from tests.support.real_model import QWEN, path_or_exit
        a.model = path_or_exit(QWEN)
    argv = [str(serving.server_binary()), "-m", a.model, "-c", str(a.ctx), "-np", "1", "-t", str(a.t), "-nr"]
    ours_runs, theirs_runs, walls = [], [], {"ours": [], "llama-benchy": []}
    with tempfile.TemporaryDirectory() as tmp_name, serving.started(argv) as server:
        tmp = Path(tmp_name)
        tokenizer, home = tokenizer_json(a.model, tmp / "tokenizer.json"), local_home(tmp)
        print(f"llama-server: {server.command}", file=sys.stderr)
        for round_ in range(a.rounds):
            order = ("ours", "llama-benchy") if round_ % 2 == 0 else ("llama-benchy", "ours")
            for tool in order:
                if tool == "ours":
                    got, wall = run_ours(a, server.url, tmp, round_)
                    ours_runs.append(got)
                else:
                    seen = len(server.log())
                    got, wall = run_benchy(a, server.url, tokenizer, home, tmp / f"benchy-{round_}.json")
                    theirs_runs.append(got)
                    # the server's own count of the tokens each llama-benchy request made it process: about d for
                    # a context load, about P for a warm follow-up, d + P for one that missed the prompt cache
                    counts = PROMPT_EVAL.findall(server.log()[seen:])
                    print(f"round {round_ + 1} llama-benchy: tokens the server processed per request: "
                          + ", ".join(counts), file=sys.stderr)
                walls[tool].append(wall)
                print(f"round {round_ + 1} {tool}: {wall:.1f} s: " + ", ".join(f"{k} {v:.2f}" for k, v in got.items()),
                      file=sys.stderr, flush=True)
    report(ours_runs, theirs_runs, walls)


def report(ours_runs: list[dict], theirs_runs: list[dict], walls: dict[str, list[float]]) -> None:
    print("| test | ours t/s | llama-benchy t/s | ours / llama-benchy (median of rounds) | within 10% |")
    print("| --- | ---: | ---: | ---: | --- |")
    for test in ours_runs[0]:
        ratios = [o[test] / t[test] for o, t in zip(ours_runs, theirs_runs) if test in o and test in t]
        if not ratios:
            continue
        ours = statistics.mean(o[test] for o in ours_runs if test in o)
        theirs = statistics.mean(t[test] for t in theirs_runs if test in t)
        ratio = statistics.median(ratios)
        print(f"| {test} | {ours:.2f} | {theirs:.2f} | {ratio:.3f} | {'yes' if abs(ratio - 1) <= 0.10 else 'NO'} |")
    ours_wall, theirs_wall = statistics.median(walls["ours"]), statistics.median(walls["llama-benchy"])
    print(f"\nwall time per round (median): ours {ours_wall:.1f} s, llama-benchy {theirs_wall:.1f} s "
          f"(ours / llama-benchy {ours_wall / theirs_wall:.2f})")


if __name__ == "__main__":
    main()
