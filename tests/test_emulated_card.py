"""`fit --verify` on an emulated card: llama.cpp's RPC backend serving this CPU as a device on 127.0.0.1.

llama.cpp places layers, KV, recurrent state and compute buffers on that device as on a GPU and
prints them per device; every card-side part must equal the prediction to the printed 0.01 MiB
(compute: llama.cpp's own dry run of the same placement), and the host side too.
"""

from __future__ import annotations

import json

import psutil
import pytest

import real_model
from llamabench.cli import main
from llamabench.llama import rpc

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not rpc.available(), reason="llama-cpp-python was built without the RPC backend")]
MIB = 2**20


def verify_json(capsys, *argv) -> dict:
    code = main(["fit", *argv, "--verify", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == (0 if data["verify"]["ok"] else 1)
    return data["verify"]


def assert_all_parts_equal(verify: dict) -> None:
    assert verify["ok"], json.dumps(verify, indent=1)
    for check in verify["placements"]:
        assert [d["name"].startswith("RPC0[127.0.0.1:") for d in check["devices"]] == [True, False]
        for dev in check["devices"]:
            for part in ("weights", "kv", "recurrent", "compute"):
                assert abs(dev["allocated"][part] - dev["predicted"][part]) <= 0.005 * MIB + 1, (dev["name"], part)
    assert not [p for p in psutil.Process().children(recursive=True) if p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE], "the RPC server was left running"


def test_real_gguf_with_tied_embeddings(capsys):
    path, why = real_model.fetch()
    if path is None:
        pytest.skip(why)
    recommended = verify_json(capsys, str(path), "--ctx", "8192", "--vram", "2GiB", "-ctk", "f16", "-ctv", "f16")
    assert_all_parts_equal(recommended)
    card = recommended["devices"][0]
    assert round(card["allocated"]["weights"] / MIB, 2) == 235.16  # every layer + token_embd again as the output
    partial = verify_json(capsys, str(path), "--ctx", "8192", "--vram", "2GiB", "-ctk", "f16", "-ctv", "f16",
                          "-ngl", "5,1")
    assert_all_parts_equal(partial)
    # -ngl 1 is the output layer alone: the duplicated token_embd (170 MiB) and no KV on the card
    ngl1 = partial["placements"][1]["devices"][0]["allocated"]
    assert round(ngl1["weights"] / MIB, 2) == 170.0 and ngl1["kv"] == 0


@pytest.mark.parametrize("model, placements", [
    ("qwen3-30b-a3b", ["-ngl", "7", "--n-cpu-moe", "3"]),  # MoE
    ("qwen3-5-35b-a3b", ["-ngl", "99,6", "--n-cpu-moe", "2"]),  # hybrid: KV and recurrent state split by layer
    ("gpt-oss-20b", ["-ngl", "9", "--n-cpu-moe", "4"]),  # SWA
    ("deepseek-v2-lite", ["-ngl", "99,8"]),  # MLA
    ("granite-4-0-h-small", ["-ngl", "11"]),  # Mamba2 hybrid
])
def test_twin_placements(model, placements, capsys):
    assert_all_parts_equal(verify_json(capsys, model, "--ctx", "4096", "--vram", "4GiB", "-ctk", "f16", "-ctv", "f16",
                                       *placements))
