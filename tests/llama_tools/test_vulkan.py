"""A real GPU backend without a GPU: llama.cpp's Vulkan backend on Mesa's software device (lavapipe).

Runs where llama-cpp-python was built with Vulkan (`make install BACKEND=vulkan`) and a Vulkan device is
visible (`GGML_VK_VISIBLE_DEVICES=0` makes ggml use lavapipe, a CPU-type device it skips otherwise);
skipped, saying why, elsewhere. Slow: lavapipe decodes a few tokens a second.
"""

from __future__ import annotations

import os

import pytest

import llamabench as lb
from llamabench.llama import ggml_devices
from llamabench.memory.allocations import HOST, PARTS, PRINTED_TOLERANCE_BYTES, DeviceParts, compute_tolerance
from llamabench.runtimes.llama_server import llama_server_command
from tests.support.eagle3 import write_eagle3
from tests.support.llama_server import run_printed_command, vulkan_tools_dir

pytestmark = [pytest.mark.slow, pytest.mark.vulkan]


def _vulkan_devices() -> list[str]:
    return [name for name in ggml_devices.gpu_devices() if name.startswith("Vulkan")]


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


MIB = 2**20
VULKAN_TOOLS = vulkan_tools_dir()


def assert_held_to_the_fit(row, run, lines: int = 1) -> None:
    """The Vulkan device's and the host's allocations in llama-server's log against the fit's row: weights, KV and
    state to the printed 0.01 MiB (one rounding per printed line: `lines` models or contexts), compute to 3% or
    5 MiB."""
    card_fit, host_fit = _parts(row)
    card, host = run.allocations.device("Vulkan0"), run.allocations.device(HOST)
    for name, predicted, allocated in (("Vulkan0", card_fit, card), ("host", host_fit, host)):
        for part in ("weights", "kv", "recurrent"):
            assert abs(getattr(allocated, part) - getattr(predicted, part)) <= lines * PRINTED_TOLERANCE_BYTES, \
                (name, part, getattr(predicted, part) / MIB, getattr(allocated, part) / MIB)
        assert abs(allocated.compute - predicted.compute) <= compute_tolerance(predicted.compute), (name, "compute")


def _parts(row) -> tuple[DeviceParts, DeviceParts]:
    p, h = row.parts, row.host
    return DeviceParts(p.weights, p.kv, p.recurrent, p.compute), DeviceParts(h.weights, h.kv, h.recurrent, h.compute)


# lavapipe refuses both output matrices for Vulkan0 (Gemma's tied token_embd q8_0, 170 MiB; Qwen's output.weight q8_0,
# 137.94 MiB) and llama.cpp keeps them on the CPU: (card weights, host weights) in MiB as llama.cpp prints them
REFUSED_OUTPUT = {"gemma": (65.16, 170.00), "qwen": (235.76, 227.20)}
THEORY_CARD = {"gemma": 235.16, "qwen": 373.71}  # what the file's layout puts on a card that takes every tensor


@needs_vulkan
@pytest.mark.parametrize("which, n_ctx, n_gpu_layers", [("gemma", 32768, None), ("gemma", 8192, 5),
                                                        ("qwen", 32768, None), ("qwen", 16384, 12)])
def test_fit_verify_on_vulkan_checks_every_part_on_the_device_and_the_host(request, which, n_ctx, n_gpu_layers):
    """The placement comes from the backend: the fit reads from its dry run which tensors Vulkan0 took, and the
    real context agrees on every part of the card and of the host, to llama.cpp's printed 0.01 MiB."""
    path = request.getfixturevalue(which)
    record = lb.fit(str(path), n_ctx=n_ctx, type_k="f16", type_v="f16", verify=True,
                    **({"n_gpu_layers": [n_gpu_layers]} if n_gpu_layers else {}))
    check = record.verify.placements[0]
    assert check.where == "the GPU Vulkan0" and check.ok, check
    card, host = check.devices
    assert card.name == "Vulkan0" and host.name == HOST
    for device in (card, host):
        for part in PARTS:
            assert abs(getattr(device.allocated, part) - getattr(device.predicted, part)) <= PRINTED_TOLERANCE_BYTES
    if n_gpu_layers is None:
        on_card, on_host = REFUSED_OUTPUT[which]
        assert round(card.allocated.weights / MIB, 2) == on_card and round(host.allocated.weights / MIB, 2) == on_host
        assert any(f"the backend took {on_card:.2f} MiB of the {THEORY_CARD[which]:.2f} MiB" in n
                   for n in record.fit.notes), record.fit.notes
    assert "read from llama.cpp's dry run on this build's Vulkan0" in record.fit.basis["weights"]


@needs_vulkan
@pytest.mark.skipif(VULKAN_TOOLS is None, reason="no Vulkan llama-server: run BACKEND=vulkan "
                    "../shared/tools/build_llama_tools.sh (or set LLAMABENCH_LLAMA_TOOLS_VULKAN to its bin folder)")
@pytest.mark.parametrize("which, n_ctx, ngl", [("gemma", 32768, None), ("qwen", 16384, 12)])
def test_the_printed_command_on_a_vulkan_llama_server_allocates_what_fit_said(request, which, n_ctx, ngl):
    """llama.cpp's own Vulkan llama-server, started with the printed line, is the judge, device by device."""
    path = request.getfixturevalue(which)
    record = lb.fit(str(path), n_ctx=n_ctx, type_k="f16", type_v="f16", **({"n_gpu_layers": [ngl]} if ngl else {}))
    row = record.fit.rows[0]
    run = run_printed_command(llama_server_command(record.fit, row), VULKAN_TOOLS, extra=("-nr",), timeout_s=600)
    assert run.ready, run.log[-2000:]
    assert "Vulkan0 model buffer size" in run.log
    assert_held_to_the_fit(row, run)


@needs_vulkan
@pytest.mark.skipif(VULKAN_TOOLS is None, reason="no Vulkan build of llama-server: BACKEND=vulkan "
                    "scripts/build_llama_tools.sh")
def test_an_eagle3_head_on_a_vulkan_llama_server(qwen, tmp_path):
    """-md HEAD --spec-type draft-eagle3 on the Vulkan device: the head's context made against the target's, where
    the target's output stays in system RAM on this device, so does the head's lm-head compute; llama-server's
    own allocation log is the judge (two models, two contexts: two roundings)."""
    head = write_eagle3(qwen, tmp_path / "eagle3-head.gguf")
    record = lb.fit(str(qwen), n_ctx=4096, type_k="f16", type_v="f16", model_draft=str(head),
                    spec_type="draft-eagle3")
    row = record.fit.recommended(record.fit.budgets[0].label, 4096, "draft-eagle3")
    run = run_printed_command(llama_server_command(record.fit, row), VULKAN_TOOLS, extra=("-nr",), timeout_s=600)
    assert run.ready, run.log[-2000:]
    assert "adding speculative implementation 'draft-eagle3'" in run.log
    assert_held_to_the_fit(row, run, lines=2)
