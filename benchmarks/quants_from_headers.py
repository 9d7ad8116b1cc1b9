"""`fit -hf OWNER/REPO --quant all` on a local hub of six real quants: the wall time, the bytes read against the
headers and the files, and each quant's answer against `fit` on the downloaded file (a held-out check with --model).

    .venv/bin/python benchmarks/quants_from_headers.py [--model gemma|qwen|PATH] [-c 32768] [--vram 0.9GiB]

The hub (tests.support.http_server, HF_ENDPOINT) holds the model's own file and five more quants made by llama.cpp's
llama-quantize from it (Q2_K, Q3_K_M, Q5_K_M, Q6_K, Q8_0), the last as a split set of two. The sweep runs as a user's
first (an empty cache folder: every header fetched, every dry run made); then `fit FILE` on each local file, with
the same options, must give the same rows (weights, fits, max n_ctx).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gguf  # noqa: E402

from tests.support import real_model  # noqa: E402
from tests.support.http_server import FileServer  # noqa: E402
from tests.support.llama_server import tools_dir  # noqa: E402
from tests.support.offload_models import quantized  # noqa: E402
from tests.support.twin_split import write_split  # noqa: E402

QUANTS = ("Q2_K", "Q3_K_M", "Q5_K_M", "Q6_K", "Q8_0")
MIB = 2**20


def build_hub(model: Path, root: Path) -> dict[str, Path]:
    tools = tools_dir()
    stem = model.name.split("-q")[0].split("-Q")[0]
    files = {"ORIGINAL": root / f"{stem}-{model.stem.rsplit('-', 1)[-1].upper()}.gguf"}
    shutil.copyfile(model, files["ORIGINAL"])
    for quant in QUANTS[:-1]:
        files[quant] = root / f"{stem}-{quant}.gguf"
        shutil.copyfile(quantized(model, tools, quant), files[quant])
    whole = root.parent / f"{stem}-{QUANTS[-1]}.gguf"
    shutil.copyfile(quantized(model, tools, QUANTS[-1]), whole)
    (root / QUANTS[-1]).mkdir()
    files[QUANTS[-1]] = write_split(whole, root / QUANTS[-1], 2)[0]
    whole.unlink()
    return files


def fit(argv: list[str], env: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "llamabench", "fit", *argv, "-o", "json"], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr[-2000:])
    return time.perf_counter() - start, json.loads(done.stdout)


def rows(fit_dict: dict) -> list:
    return [(r["budget"], r["settings"]["n_ctx"], r["settings"]["type_k"], r["settings"]["type_v"], r["placement"],
             r["parts"], r["max_n_ctx"]) for r in fit_dict["fit"]["rows"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma")
    ap.add_argument("-c", "--ctx", default="32768")
    ap.add_argument("--vram", default="0.9GiB")
    a = ap.parse_args()
    named = {"gemma": real_model.GEMMA, "qwen": real_model.QWEN}
    model = real_model.fetch(named[a.model])[0] if a.model in named else Path(a.model)
    options = ["-c", a.ctx, "--vram", a.vram, "-ctk", "f16,q8_0", "-ctv", "f16,q8_0"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "hub"
        root.mkdir()
        files = build_hub(model, root)
        with FileServer(root) as server:
            env = dict(os.environ, HF_ENDPOINT=server.url, LLAMABENCH_CACHE_DIR=str(Path(tmp) / "cache"))
            seconds, swept = fit(["-hf", "someone/repo", "--quant", "all", *options], env)
            served = server.served.bytes_sent
        headers = total = 0
        for path in files.values():
            parts = sorted(path.parent.glob(path.name.replace("00001", "*")))
            headers += sum(gguf.GGUFReader(p).data_offset for p in parts)
            total += sum(p.stat().st_size for p in parts)
        print(f"{model.name}: {len(swept['quants'])} quants, -c {a.ctx}, --vram {a.vram}")
        print(f"wall {seconds:.1f} s (a first run: an empty cache); read {swept['bytes_read'] / MIB:.2f} MiB "
              f"(served {served / MIB:.2f} MiB) against headers of {headers / MIB:.2f} MiB "
              f"({swept['bytes_read'] / headers:.2f}x) and files of {total / MIB:.1f} MiB")
        by_name = {p.name: p for p in files.values()}
        same = 0
        for q in swept["quants"]:
            local = by_name[Path(q["file"]).name]
            _, answer = fit([str(local), *options], dict(os.environ, LLAMABENCH_CACHE_DIR=str(Path(tmp) / "c2")))
            equal = rows(q["fit"]) == rows(answer)
            same += equal
            print(f"  {q['quant']:>7}  {q['size_bytes'] / 1e9:.3f} GB  {q['bits_per_weight']:.2f} bpw  "
                  f"{'same as the downloaded file' if equal else 'DIFFERENT from the downloaded file'}")
        print(f"best: {swept['summary']['best']}")
        print(f"{same} of {len(swept['quants'])} quants answer as their downloaded file")


if __name__ == "__main__":
    main()
