"""The allocation-log parser on lines llama.cpp really printed (recorded in tests/support/data)."""

from __future__ import annotations

from llamabench.memory.allocations import HOST, Allocations, DeviceParts, parse_allocations, printed_equal
from tests import support

DATA = support.DATA
MIB = 2**20

# llama.cpp 0.3.36 with an RPC device, from LLAMA_CPP_NOTES.md (Qwen2.5-Coder-0.5B, -ngl 12, n_ctx 4096)
RPC_LINES = """\
load_tensors: RPC0[127.0.0.1:50052] model buffer size =   244.33 MiB
load_tensors:   CPU_Mapped model buffer size =   373.71 MiB
llama_kv_cache: RPC0[127.0.0.1:50052] KV buffer size =    22.00 MiB
llama_kv_cache:        CPU KV buffer size =    26.00 MiB
llama_kv_cache: size =   48.00 MiB (  4096 cells,  24 layers,  1/1 seqs), K (f16):   24.00 MiB, V (f16):   24.00 MiB
sched_reserve: RPC0[127.0.0.1:50052] compute buffer size =   298.50 MiB
sched_reserve:        CPU compute buffer size =    39.51 MiB
"""


def test_recorded_hybrid_log():
    # the Qwen3.5-35B-A3B twin at n_ctx 4096 on the CPU: 10 KV layers, 30 recurrent layers
    alloc = parse_allocations((DATA / "qwen35moe-twin-4096.log").read_text())
    assert [(c.cells, c.layers, c.n_seq, c.n_stream, c.type_k, c.k_mib, c.v_mib) for c in alloc.kv_caches] == [
        (4096, 10, 1, 1, "f16", 40.0, 40.0)]
    assert alloc.kv_bytes == 20480 * 4096  # 80.00 MiB
    rec = alloc.recurrent[0]
    assert (rec.cells, rec.layers, rec.r_mib, rec.s_mib, rec.p_mib) == (1, 40, 2.81, 60.0, 0.0)
    assert alloc.kv_buffers_mib == {"CPU": 80.0} and alloc.rs_buffers_mib == {"CPU": 62.81}
    # the CPU's repacked (AMX) copy and the mapped file are separate buffers
    assert alloc.model_buffers_mib == {"AMX": 76.95, "CPU_Mapped": 82.75}
    assert alloc.compute_buffers_mib == {"CPU": 52.88}
    assert alloc.output_buffers_mib == {"CPU": 0.0}


def test_per_device_lines():
    alloc = parse_allocations(RPC_LINES)
    assert alloc.model_buffers_mib == {"RPC0[127.0.0.1:50052]": 244.33, "CPU_Mapped": 373.71}
    assert alloc.kv_buffers_mib == {"RPC0[127.0.0.1:50052]": 22.0, "CPU": 26.0}
    assert alloc.compute_buffers_mib == {"RPC0[127.0.0.1:50052]": 298.5, "CPU": 39.51}
    assert alloc.kv_mib == 48.0


def test_the_last_reservation_wins():
    # sched_reserve runs more than once: only the last compute buffer stays allocated
    text = ("sched_reserve:        CPU compute buffer size =   300.00 MiB\n"
            "sched_reserve:        CPU compute buffer size =    52.88 MiB\n")
    assert parse_allocations(text).compute_buffers_mib == {"CPU": 52.88}


def test_round_trip_through_a_record():
    alloc = parse_allocations((DATA / "qwen35moe-twin-4096.log").read_text())
    assert Allocations.from_dict(alloc.to_dict()) == alloc


def test_mib_matching_is_to_the_printed_hundredth():
    assert printed_equal(65_863_680, 62.81)  # 62.8125 prints as 62.81
    assert not printed_equal(65_863_680 + 10 * 1024, 62.81)


def test_parts_per_device():
    alloc = parse_allocations(RPC_LINES)
    card = alloc.card_names[0]
    assert card == "RPC0[127.0.0.1:50052]"
    assert alloc.device(card) == DeviceParts(round(244.33 * MIB), 22 * MIB, 0, round(298.50 * MIB))
    assert alloc.device(HOST).weights == round(373.71 * MIB) and alloc.device(HOST).kv == 26 * MIB
