"""GPU paths: only on a CUDA build of llama.cpp with an NVIDIA GPU (skipped on the CPU build)."""

from __future__ import annotations

import json

import pytest

from llamabench.cli import main
from llamabench.llama import ggml_devices
from llamabench.world import sysinfo

pytestmark = pytest.mark.gpu

needs_gpu = pytest.mark.skipif(not ggml_devices.supports_gpu_offload() or not sysinfo.gpu_memory(),
                               reason="needs a CUDA build of llama.cpp and NVML")


@needs_gpu
def test_fit_verify_on_the_card(capsys):
    assert main(["fit", "qwen3-30b-a3b", "--vram", "4GiB", "--ctx", "8192", "--verify", "--json"]) == 0
    verify = json.loads(capsys.readouterr().out)["verify"]
    assert verify["ok"] and verify["placements"][0]["gpu_delta"] is not None


@needs_gpu
def test_bench_offloaded_records_gpu_memory(tmp_path):
    results = tmp_path / "r.jsonl"
    assert main(["bench", "qwen3-30b-a3b", "-c", "4096", "-p", "16", "-n", "2", "-r", "1", "-ngl", "99",
                 "--results", str(results), "-o", "jsonl"]) == 0
    record = json.loads(results.read_text().splitlines()[0])
    assert record["memory"]["gpu_delta_bytes"] > 0
