"""llama.cpp's own memory breakdown, read through the compiled shim (llama/breakdown.py), against the file's tensors.

On an emulated card (llama.cpp's RPC backend serving this CPU: it takes every tensor type) the weights each
device takes, its KV, its compute buffer and the tensors kept in system RAM must be exactly what the
file and the metadata say: the shim reads llama.cpp's figures, not ours, so this checks both. (On a
GPU backend the two may part: tests/llama_tools/test_vulkan.py.)
"""

from __future__ import annotations

import pytest

from llamabench.jobs.source import resolve
from llamabench.llama import breakdown
from llamabench.llama.rpc import available, emulated_card
from llamabench.llama.worker import DryRunChild
from llamabench.memory.allocations import HOST, bytes_equal, printed_equal
from llamabench.memory.footprint import per_layer_bytes
from llamabench.memory.layer_split import layer_devices
from llamabench.model.layout import geometry_from_metadata
from llamabench.model.weights import breakdown as weights_breakdown
from llamabench.settings.params import Params


def test_the_shim_builds_here():
    assert breakdown.unavailable() is None  # a C++ compiler and libllama: both are here wherever llama.cpp was built


@pytest.mark.skipif(not available(), reason="no RPC backend in this llama-cpp-python build (make install)")
@pytest.mark.parametrize("which, n_gpu_layers", [("gemma", 99), ("gemma", 5), ("gemma", 0), ("qwen", 99), ("qwen", 12)])
def test_breakdown_on_an_emulated_card_is_the_files_tensors(request, which, n_gpu_layers):
    model = request.getfixturevalue(which)  # Gemma's output matrix is token_embd again (tied), Qwen's its own
    meta = resolve(str(model)).llama_metadata
    geometry = geometry_from_metadata(meta)
    weights = weights_breakdown(meta.tensors, geometry.n_layer, set(), basis="test")
    settings = Params(n_ctx=8192, n_gpu_layers=n_gpu_layers, flash_attn=True)
    devices = layer_devices(weights.n_layer, n_gpu_layers, (1.0,))
    with emulated_card() as endpoint, DryRunChild(str(model), Params(n_gpu_layers=n_gpu_layers, repack=False),
                                                  rpc=[endpoint]) as child:
        alloc = child.context(settings).allocations
        host_tensors = child.host_tensors
    card = f"RPC0[{endpoint}]"
    assert alloc.breakdown, "no breakdown read"
    on_card = alloc.breakdown_of(card)
    assert bytes_equal(on_card.model, weights.on_devices(devices, 1)[0])  # every tensor the layout puts there
    kv_card = sum(kv + rec for il, (kv, rec) in per_layer_bytes(geometry, settings).items() if devices[il] == 0)
    kv_host = sum(kv + rec for il, (kv, rec) in per_layer_bytes(geometry, settings).items() if devices[il] is None)
    assert on_card.context == kv_card and alloc.breakdown_of(HOST).context == kv_host  # to the byte
    assert printed_equal(on_card.compute, alloc.compute_buffers_mib.get(card, 0.0))  # the sched_reserve line
    # the tensors it kept in system RAM, by name: their mapped span is what the file's layout gives
    assert host_tensors is not None and "token_embd.weight" in host_tensors
    assert weights.mapped_span(host_tensors) == weights.host_mapped(n_gpu_layers=n_gpu_layers)
