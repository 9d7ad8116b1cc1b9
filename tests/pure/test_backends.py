"""Which GPU backend a card sized without it answers as (--backend, or the card's own), and what each backend's rules
are. Pure: a table, one row per case."""

from __future__ import annotations

import pytest

from llamabench.core.errors import UsageError
from llamabench.jobs.fit.options import target_backend
from llamabench.memory.backends import BACKENDS, DEFAULT_BACKEND, OFFLOAD_MATMULS
from llamabench.settings.budget import budget
from llamabench.settings.values import BACKEND_NAMES, backend_name


@pytest.mark.parametrize("given, vram, cpu_only, expected", [
    (None, "24GiB", False, "cuda"),  # a plain size: the build most people who ask run
    (None, "rtx-4090", False, "cuda"),  # an NVIDIA name: CUDA
    (None, "rx-7900-xtx", False, "vulkan"),  # an AMD name: Vulkan (ROCm where asked)
    ("rocm", "rx-7900-xtx", False, "rocm"),  # --backend wins over the name
    (None, "rtx-4090+rtx-3060-12gb", False, "cuda"),  # one machine of NVIDIA cards
    ("metal", "24GiB", False, "metal"),  # --backend as given
    (None, "24GiB", True, None),  # --cpu-only: no card, no backend
])
def test_the_target_backend(given, vram, cpu_only, expected):
    assert target_backend(given, [budget(vram)], cpu_only) == expected


@pytest.mark.parametrize("given, vram, cpu_only, words", [
    (None, "rtx-4090+rx-7900-xtx", False, "different backends"),  # one build sizes one backend
    ("cuda", "24GiB", True, "--cpu-only"),  # no card to answer as CUDA
    ("opencl", "24GiB", False, "not a backend"),  # unknown names in one line
])
def test_a_target_backend_that_cannot_be_is_refused(given, vram, cpu_only, words):
    with pytest.raises(UsageError, match=words):
        target_backend(given, [budget(vram)], cpu_only)


def test_every_backend_name_has_its_rules():
    assert set(BACKENDS) == set(BACKEND_NAMES) and DEFAULT_BACKEND in BACKENDS
    assert [backend_name(n) for n in (" CUDA", "Vulkan")] == ["cuda", "vulkan"]
    # ggml-metal offloads matmuls only; CUDA and ROCm (the same ggml-cuda) size flash attention's f16 room; the RPC
    # card as it is offloads nothing
    assert BACKENDS["metal"].offload == OFFLOAD_MATMULS and not BACKENDS["metal"].cuda_alloc_size
    assert BACKENDS["cuda"].cuda_alloc_size and BACKENDS["rocm"].cuda_alloc_size
    assert not BACKENDS["cpu"].offloads and BACKENDS["vulkan"].max_tensor_bytes == 2**32 - 1
