"""`fit --verify` on an emulated card: llama.cpp's RPC backend serving this CPU as a device on 127.0.0.1.

llama.cpp places layers, KV, recurrent state and compute buffers on that device as on a GPU and
prints them per device; every card-side part must equal the prediction to the printed 0.01 MiB
(compute: llama.cpp's own dry run of the same placement), and the host side too.
"""

from __future__ import annotations

import json

import psutil
import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.llama import rpc
from llamabench.memory.allocations import PARTS
from llamabench.records.fit import FitRecord, FitVerification
from tests.support import real_model

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not rpc.available(), reason="llama-cpp-python was built without the RPC backend")]
MIB = 2**20


def verify(model: str, **kw) -> FitVerification:
    record = lb.fit(model, verify=True, type_k="f16", type_v="f16", emulate=True, **kw)  # the card even on a GPU build
    return record.verify


def assert_all_parts_equal(verify: FitVerification) -> None:
    assert verify.ok, verify
    for check in verify.placements:
        assert [d.name.startswith("RPC0[127.0.0.1:") for d in check.devices] == [True, False]
        for dev in check.devices:
            for part in PARTS:
                assert abs(getattr(dev.allocated, part) - getattr(dev.predicted, part)) <= 0.005 * MIB + 1, \
                    (dev.name, part)
    assert not [p for p in psutil.Process().children(recursive=True) if p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE], "the RPC server was left running"


def test_real_gguf_with_tied_embeddings(capsys):
    path, why = real_model.fetch()
    if path is None:
        pytest.skip(why)
    recommended = verify(str(path), n_ctx=8192, vram="2GiB")
    assert_all_parts_equal(recommended)
    card = recommended.devices[0]
    assert round(card.allocated.weights / MIB, 2) == 235.16  # every layer + token_embd again as the output
    partial = verify(str(path), n_ctx=8192, vram="2GiB", n_gpu_layers=[5, 1])
    assert_all_parts_equal(partial)
    # -ngl 1 is the output layer alone: the duplicated token_embd (170 MiB) and no KV on the card
    ngl1 = partial.placements[1].devices[0].allocated
    assert round(ngl1.weights / MIB, 2) == 170.0 and ngl1.kv == 0
    # the command prints the same record and exits 0
    assert main(["fit", str(path), "--ctx", "8192", "--vram", "2GiB", "-ctk", "f16", "-ctv", "f16", "-ngl", "5",
                 "--verify", "--json", "--emulate"]) == 0
    printed = FitRecord.from_dict(json.loads(capsys.readouterr().out))
    assert printed.verify.ok and printed.verify.devices[0].allocated == partial.devices[0].allocated


@pytest.mark.parametrize("model, placements", [
    ("qwen3-30b-a3b", {"n_gpu_layers": [7], "n_cpu_moe": [3]}),  # MoE
    ("qwen3-5-35b-a3b", {"n_gpu_layers": "99,6", "n_cpu_moe": 2}),  # hybrid: KV and recurrent state split by layer
    ("gpt-oss-20b", {"n_gpu_layers": 9, "n_cpu_moe": 4}),  # SWA
    ("deepseek-v2-lite", {"n_gpu_layers": [99, 8]}),  # MLA
    ("granite-4-0-h-small", {"n_gpu_layers": 11}),  # Mamba2 hybrid
])
def test_twin_placements(model, placements):
    assert_all_parts_equal(verify(model, n_ctx=4096, vram="4GiB", **placements))
