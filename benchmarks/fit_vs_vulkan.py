"""The fit on a Vulkan build beside llama.cpp's own programs on the same Vulkan device, part by part.

For each case: `lb.fit` sizes llama-server's context on this build's Vulkan0 (the placement read from
llama.cpp's dry run: which tensors the device took); the printed llama-server line is started with
llama.cpp's own Vulkan llama-server, whose allocation log (`-lv 4`) is the judge; and llama-fit-params
(llama.cpp's fit, same build) prints its memory breakdown of the same placement, whose weights column
(integer MiB) shows what the device takes by llama.cpp's own count. Timing: the fit and llama-fit-params
in alternating rounds, medians and their ratio.

Run it with a Vulkan llama-cpp-python (`make install BACKEND=vulkan`) and the Vulkan tools
(`BACKEND=vulkan ../shared/tools/build_llama_tools.sh`), with the device visible:

    GGML_VK_VISIBLE_DEVICES=0 .venv/bin/python benchmarks/fit_vs_vulkan.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' support package

import llamabench as lb  # noqa: E402
from llamabench.llama import ggml_devices  # noqa: E402
from llamabench.memory.allocations import HOST  # noqa: E402
from llamabench.render.table import render_table  # noqa: E402
from llamabench.runtimes.llama_server import llama_server_command  # noqa: E402
from tests.support import real_model  # noqa: E402
from tests.support.llama_server import run_printed_command, vulkan_tools_dir  # noqa: E402

MIB = 2**20
# common_memory_breakdown_print rows: a device "| - Vulkan0 (...) | total = free + (self = model + context + compute)
# + unaccounted |", the host "| - Host | self = model + context + compute |", integer MiB
DEVICE_ROW = re.compile(r"- (\S+) \([^|]*\|\s*\d+ =\s*\d+ \+ \(\s*\d+ =\s*(\d+) \+\s*(\d+) \+\s*(\d+)\)")
HOST_ROW = re.compile(r"- Host\s*\|\s*\d+ =\s*(\d+) \+\s*(\d+) \+\s*(\d+)")


def cases():
    gemma, qwen = real_model.path_or_exit(), real_model.path_or_exit(real_model.QWEN)
    return [("Gemma 3 270M Q4_K_M", gemma, 32768, None), ("Gemma 3 270M Q4_K_M", gemma, 8192, 5),
            ("Qwen2.5-Coder 0.5B Q4_K_M", qwen, 32768, None), ("Qwen2.5-Coder 0.5B Q4_K_M", qwen, 16384, 12)]


def fit_params(tools: Path, path: str, n_ctx: int, ngl: int) -> tuple[dict, float]:
    """llama-fit-params' breakdown of one placement ({device: (model, context, compute)} in MiB) and its time."""
    argv = [str(tools / "llama-fit-params"), "-m", path, "-c", str(n_ctx), "-ngl", str(ngl), "-fa", "on", "-np", "4",
            "-nr", "-lv", "4"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - t0
    rows = {}
    for line in (done.stdout + done.stderr).splitlines():
        if m := DEVICE_ROW.search(line):
            rows[m[1]] = tuple(int(x) for x in m.groups()[1:])
        elif m := HOST_ROW.search(line):
            rows[HOST] = tuple(int(x) for x in m.groups())
    return rows, elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating timing rounds per case")
    args = ap.parse_args()
    tools = vulkan_tools_dir()
    if tools is None or not any(d.startswith("Vulkan") for d in ggml_devices.gpu_devices()):
        print("needs a Vulkan llama-cpp-python, the Vulkan tools and a visible device (GGML_VK_VISIBLE_DEVICES=0)",
              file=sys.stderr)
        return 2
    out = []
    for name, path, n_ctx, ngl in cases():
        options = {"n_gpu_layers": [ngl]} if ngl else {}
        fit_times, params_times = [], []
        for _ in range(args.rounds):  # alternating: the fit, then llama.cpp's fit
            t0 = time.perf_counter()
            record = lb.fit(path, n_ctx=n_ctx, type_k="f16", type_v="f16", **options)
            fit_times.append(time.perf_counter() - t0)
            breakdown, elapsed = fit_params(tools, path, n_ctx, ngl or 99)
            params_times.append(elapsed)
        row = record.fit.rows[0]
        run = run_printed_command(llama_server_command(record.fit, row), tools, extra=("-nr",), timeout_s=600)
        if not run.ready:
            print(f"{name}: llama-server did not start:\n{run.log[-2000:]}", file=sys.stderr)
            return 1
        card, host = run.allocations.device("Vulkan0"), run.allocations.device(HOST)
        f_fit, f_params = statistics.median(fit_times), statistics.median(params_times)
        parts = [("Vulkan0", "weights", row.parts.weights, card.weights, breakdown.get("Vulkan0", (None,))[0]),
                 ("Vulkan0", "KV", row.parts.kv, card.kv, None),
                 ("Vulkan0", "compute", row.parts.compute, card.compute, None),
                 ("host", "weights", row.host.weights, host.weights, breakdown.get(HOST, (None,))[0]),
                 ("host", "KV", row.host.kv, host.kv, None),
                 ("host", "compute", row.host.compute, host.compute, None)]
        label = f"{name} -c {n_ctx}" + (f" -ngl {ngl}" if ngl else " -ngl 99")
        for i, (device, part, predicted, allocated, params_mib) in enumerate(parts):
            out.append([label if i == 0 else "", device, part, f"{predicted / MIB:.2f}", f"{allocated / MIB:.2f}",
                        f"{round((allocated - predicted) / MIB, 2) + 0.0:+.2f}",
                        "-" if params_mib is None else str(params_mib),
                        f"fit {f_fit:.2f} s, fit-params {f_params:.2f} s ({f_fit / f_params:.2f}x)" if i == 0 else ""])
    print(render_table(["case", "device", "part", "fit MiB", "llama-server MiB", "diff", "llama-fit-params MiB",
                        f"median time ({args.rounds} alternating rounds)"], out, align="lllrrrrl"))
    print("llama-server: the printed command on llama.cpp's Vulkan llama-server (its load_tensors / llama_kv_cache / "
          "sched_reserve lines); llama-fit-params: its memory breakdown's model column (integer MiB; the host's "
          "counts tensors, not the mapped span)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
