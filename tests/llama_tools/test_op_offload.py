"""A GPU backend's op offload, predicted without the GPU and judged by one (issue 40).

`fit --backend vulkan` plans on this CPU build's emulated card, whose device then answers as ggml-vulkan does
(memory.backends): ops on host weights with a batch of 32 or more run on the card after their weights are copied
there, tensors over the card's maxStorageBufferRange stay on the CPU, each split's nodes in Vulkan's order. The judge
is llama.cpp's own Vulkan llama-server on Mesa's lavapipe device (Vulkan0), started with the printed command: every
part of the card and the host to llama.cpp's printed 0.01 MiB, compute included. The same plan made for the emulated
card as it is (`--backend cpu`, no op offload) must miss the compute, or the test would not judge the rule.

Runs where the Vulkan tools are built (`BACKEND=vulkan scripts/build_llama_tools.sh`, which `make test` runs where
the Vulkan headers and Mesa's driver can be installed) and lavapipe shows as a device; skipped, saying why, elsewhere.
"""

from __future__ import annotations

import os
import subprocess

import pytest

import llamabench as lb
from llamabench.memory.allocations import HOST, PRINTED_TOLERANCE_BYTES
from llamabench.memory.backends import VULKAN_RANGE_ENV
from llamabench.runtimes.llama_server import llama_server_command
from tests.support import offload_models
from tests.support.llama_server import run_printed_command, vulkan_tools_dir

pytestmark = [pytest.mark.slow, pytest.mark.vulkan]

VULKAN_TOOLS = vulkan_tools_dir()
LAVAPIPE_RANGE = 134217728  # lavapipe's maxStorageBufferRange (vulkaninfo): its limit, not a discrete card's 4 GiB
MIB = 2**20


def _lavapipe_shown() -> str | None:
    """Why the Vulkan llama-server cannot be the judge here, or None."""
    if VULKAN_TOOLS is None:
        return ("no Vulkan llama-server: run BACKEND=vulkan scripts/build_llama_tools.sh (or set "
                "LLAMABENCH_LLAMA_TOOLS_VULKAN to its bin folder)")
    env = dict(os.environ, GGML_VK_VISIBLE_DEVICES="0")
    try:
        listed = subprocess.run([str(VULKAN_TOOLS / "llama-server"), "--list-devices"], capture_output=True,
                                text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the Vulkan llama-server did not list its devices: {exc}"
    if "Vulkan0" not in listed.stdout + listed.stderr:
        return "no Vulkan0 device (Mesa's lavapipe: ../shared/tools/setup_vulkan_lavapipe.sh)"
    return None


WHY_NOT = _lavapipe_shown()
needs_judge = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


@pytest.fixture(scope="module")
def models(qwen):
    """The real Qwen2.5-Coder 0.5B requantized to Q4_0 by llama-quantize, and a small MoE (tests.support)."""
    return {"qwen": offload_models.requantized(qwen, VULKAN_TOOLS), "moe": offload_models.small_moe(VULKAN_TOOLS)}


def _held(row, run) -> list[str]:
    """Every part of Vulkan0 and the host against the row, to 0.01 MiB: the mismatches, in words."""
    out = []
    for name, predicted, allocated in (("Vulkan0", row.parts, run.allocations.device("Vulkan0")),
                                       ("host", row.host, run.allocations.device(HOST))):
        for part in ("weights", "kv", "recurrent", "compute"):
            p, a = getattr(predicted, part), getattr(allocated, part)
            if abs(p - a) > PRINTED_TOLERANCE_BYTES:
                out.append(f"{name} {part}: fit {p / MIB:.2f} MiB, llama-server {a / MIB:.2f} MiB")
    return out


@needs_judge
@pytest.mark.parametrize("which, placement", [
    ("qwen", {"n_gpu_layers": [12]}),  # -ngl partial: 12 layers' matmuls of a batch copied to the card
    ("qwen", {"n_gpu_layers": [99]}),  # all layers on the card (lavapipe keeps the output matrix: its 297 MiB op)
    ("moe", {"n_cpu_moe": [4]}),  # experts in RAM: the expert matmuls of a batch run on the card
    ("moe", {"n_cpu_moe": [4], "op_offload": False}),  # --no-op-offload, printed and sized: they stay on the CPU
])
def test_the_printed_command_on_vulkan_allocates_what_fit_said_for_vulkan(models, monkeypatch, which, placement):
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    monkeypatch.setenv(VULKAN_RANGE_ENV, str(LAVAPIPE_RANGE))  # the card planned for is lavapipe
    path = str(models[which])
    record = lb.fit(path, n_ctx=8192, type_k="f16", type_v="f16", vram="2GiB", backend="vulkan", **placement)
    row = record.fit.rows[0]
    assert record.fit.backend == "vulkan" and "answering as Vulkan does" in record.fit.basis["compute"]
    command = llama_server_command(record.fit, row)
    assert ("--no-op-offload" in command) == (placement.get("op_offload") is False)
    run = run_printed_command(command, VULKAN_TOOLS, extra=("-nr",), timeout_s=600)
    assert run.ready, run.log[-2000:]
    assert not _held(row, run), _held(row, run)
    # the emulated card as it is (no op offload, no node order of Vulkan's): the judge tells it apart
    as_is = lb.fit(path, n_ctx=8192, type_k="f16", type_v="f16", vram="2GiB", backend="cpu", **placement).fit.rows[0]
    assert _held(as_is, run), "the plan without Vulkan's rules held too: this placement does not judge them"
