"""A real GPU backend without a GPU: llama.cpp's Vulkan backend on Mesa's software device (lavapipe).

Runs where llama-cpp-python was built with Vulkan (`make install BACKEND=vulkan`) and a Vulkan device is
visible (`GGML_VK_VISIBLE_DEVICES=0` makes ggml use lavapipe, a CPU-type device it skips otherwise);
skipped, saying why, elsewhere. Slow: lavapipe decodes a few tokens a second.
"""

from __future__ import annotations

import os

import pytest

import llamabench as lb
from llamabench.llama import engine

pytestmark = [pytest.mark.slow, pytest.mark.vulkan]


def _vulkan_devices() -> list[str]:
    return [name for name in engine.gpu_devices() if name.startswith("Vulkan")]


needs_vulkan = pytest.mark.skipif(
    not _vulkan_devices(),
    reason="no Vulkan device: needs `make install BACKEND=vulkan` and a Vulkan driver "
           f"(lavapipe: GGML_VK_VISIBLE_DEVICES=0; it is {os.environ.get('GGML_VK_VISIBLE_DEVICES')!r} here)")


@needs_vulkan
def test_bench_on_vulkan_names_the_device_and_reads_its_memory(gemma, tmp_path):
    run = lb.bench(str(gemma), n_ctx=2048, n_gpu_layers=99, n_prompt=16, n_gen=2, repetitions=1, repack=False,
                   results=tmp_path / "r.jsonl")
    record = run.records[0]
    assert record.ok, record.reason
    assert record.backend == "Vulkan0"  # the device as llama.cpp names it, not "GPU"
    vulkan = {d.name: d for d in record.memory.devices}["Vulkan0"]
    assert vulkan.description.startswith("llvmpipe")  # what the device is
    assert vulkan.total_bytes > 0 and vulkan.free_before_bytes is not None  # ggml_backend_dev_memory, not NVML
    assert record.allocations.device("Vulkan0").weights > 0


@needs_vulkan
def test_fit_without_vram_takes_the_devices_free_memory(gemma):
    rows = lb.fit(str(gemma), n_ctx=4096, n_gpu_layers=[99], type_k="f16", type_v="f16").rows
    assert rows and rows[0].budget_label.startswith("Vulkan0 free ")  # as llama-fit-params: the device's free memory
