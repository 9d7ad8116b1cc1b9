"""The fit's prediction beside what the printed llama-server command allocates, started for real.

For each case: `lb.fit` sizes the llama-server context (its default runtime) and, beside it, the
`Llama()` context (`--runtime llama-cpp-python`, the sizing fit used for every runtime before);
the llama-server line it printed is started with llama.cpp's own llama-server on llama.cpp's
ggml-rpc-server (an emulated card on 127.0.0.1), and its allocation log (`-lv 4`) is read card and
host apart. Printed side by side in MiB, with each case's time.

    .venv/bin/python benchmarks/fit_vs_llama_server.py [--tools DIR]   (scripts/build_llama_tools.sh)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' support package

import llamabench as lb  # noqa: E402
from llamabench.jobs.source import resolve  # noqa: E402
from llamabench.memory.allocations import HOST  # noqa: E402
from llamabench.render.table import render_table  # noqa: E402
from llamabench.runtimes.llama_server import llama_server_command  # noqa: E402
from tests.support import real_model  # noqa: E402
from tests.support.llama_server import rpc_server, run_printed_command, tools_dir  # noqa: E402

MIB = 2**20


def cases():
    gemma = real_model.path_or_exit()
    return [
        ("Gemma 3 270M Q4_K_M", gemma, 32768, {}),
        ("Gemma 3 270M Q4_K_M -ngl 5", gemma, 8192, {"n_gpu_layers": [5]}),
        ("Gemma 3 270M Q4_K_M -np 1", gemma, 32768, {"n_seq": 1}),
        ("Qwen3.5-35B-A3B twin", str(resolve("qwen3-5-35b-a3b").gguf_for_llama()), 131072, {}),
        ("gpt-oss-20b twin -ngl 9", str(resolve("gpt-oss-20b").gguf_for_llama()), 32768, {"n_gpu_layers": [9]}),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=Path, default=None, help="llama.cpp's bin folder (llama-server, ggml-rpc-server)")
    args = ap.parse_args()
    tools = args.tools or tools_dir()
    if tools is None:
        print("llama-server is not built: run scripts/build_llama_tools.sh", file=sys.stderr)
        return 2
    out = []
    for name, path, n_ctx, options in cases():
        t0 = time.perf_counter()
        server_fit = lb.fit(path, n_ctx=n_ctx, vram="64GiB", type_k="f16", type_v="f16", backend="cpu", **options)
        t_fit = time.perf_counter() - t0
        python_options = {k: v for k, v in options.items() if k != "n_seq"}
        python_fit = lb.fit(path, n_ctx=n_ctx, vram="64GiB", type_k="f16", type_v="f16", runtime="llama-cpp-python",
                            **python_options)
        row, before = server_fit.fit.rows[0], python_fit.fit.rows[0]
        t0 = time.perf_counter()
        with rpc_server(tools) as endpoint:
            run = run_printed_command(llama_server_command(server_fit.fit, row), tools, rpc=[endpoint], extra=("-nr",))
        t_server = time.perf_counter() - t0
        alloc = run.allocations
        card, host = alloc.device(alloc.card_names[0]), alloc.device(HOST)
        parts = [("card", "KV", before.parts.kv, row.parts.kv, card.kv),
                 ("card", "recurrent", before.parts.recurrent, row.parts.recurrent, card.recurrent),
                 ("card", "compute", before.parts.compute, row.parts.compute, card.compute),
                 ("card", "weights", before.parts.weights, row.parts.weights, card.weights),
                 ("host", "KV", before.host.kv, row.host.kv, host.kv),
                 ("host", "recurrent", before.host.recurrent, row.host.recurrent, host.recurrent),
                 ("host", "compute", before.host.compute, row.host.compute, host.compute),
                 ("host", "weights", before.host.weights, row.host.weights, host.weights)]
        for i, (side, part, b, a, s) in enumerate(parts):
            if not (b or a or s):
                continue
            out.append([f"{name} ({n_ctx})" if i == 0 else "", side, part, f"{b / MIB:.2f}", f"{a / MIB:.2f}",
                        f"{s / MIB:.2f}", f"{(s - a) / MIB:+.2f}",
                        f"fit {t_fit:.1f} s, server {t_server:.1f} s" if i == 0 else ""])
        out.append(["", "host", "grows (cache, ckpt)", "-", f"{row.host.growing / MIB:.2f}", "-", "", ""])
    print(render_table(["case", "device", "part", "Llama() sizing", "fit (llama-server)", "llama-server",
                        "diff", "time"], out, align="lllrrrrl"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
