"""Typed records: what is stored comes back equal; lines that are not records are skipped and counted."""

from __future__ import annotations

import json

from llamabench.footprint import CacheSettings
from llamabench.inspection import inspect, kv_curve
from llamabench.llama.alloc_log import parse_allocations
from llamabench.results import jsonl
from llamabench.results.records import (BenchRecord, InspectRecord, ModelRef, VerifyRecord, append, from_dict,
                                        read_records)
from llamabench.source import resolve

MODEL = ModelRef("tiny", "Tiny", "llama", "/models/tiny.gguf", False)
MACHINE = {"host": "box-a", "cpu": "Test CPU", "gpu": None}


def bench_record(machine=MACHINE, depth=0, kind="tg", ts=10.0, timestamp="2026-12-01T00:00:00+00:00") -> BenchRecord:
    cell = {"n_ctx": 4096, "type_k": "f16", "type_v": "f16", "flash_attn": True, "n_gpu_layers": 0, "n_batch": 2048,
            "n_ubatch": 512, "n_threads": 2}
    name = f"{kind}16" + (f" @ d{depth}" if depth else "")
    return BenchRecord(MODEL, key="c4096|" + name, status="ok", test=name,
                       params={**cell, "kind": kind, "n_tokens": 16, "depth": depth, "repetitions": 2},
                       samples_ns=[1_600_000_000 // int(ts)] * 2, samples_ts=[ts, ts], avg_ts=ts, stddev_ts=0.0,
                       allocations=parse_allocations("llama_kv_cache: size =   32.00 MiB (  4096 cells,   4 layers,  "
                                                     "1/1 seqs), K (f16):   16.00 MiB, V (f16):   16.00 MiB\n"),
                       theory={"kv_bytes": 32 * 2**20, "recurrent_state_bytes": 0}, machine=machine,
                       versions={"llama_cpp_python": "0.3.36"}, timestamp=timestamp)


def test_every_kind_round_trips(tmp_path):
    source = resolve("qwen3-5-35b-a3b")
    result = inspect(source.metadata, CacheSettings(n_ctx=4096), source.entry)
    records = [InspectRecord(MODEL, inspection=result.to_dict(), kv_curve=kv_curve(result), machine=MACHINE),
               VerifyRecord(MODEL, ok=True, settings=CacheSettings(n_ctx=4096), theory={"kv_bytes": 1},
                            allocations=parse_allocations(""), checks=[], machine=MACHINE),
               bench_record()]
    path = tmp_path / "r.jsonl"
    for r in records:
        append(path, r)
    back = read_records(path)
    assert back.skipped == 0
    assert [r.to_dict() for r in back.records] == [r.to_dict() for r in records]
    assert [from_dict(r.to_dict()) for r in records] == records


def test_lines_that_are_not_records_are_counted_not_fatal(tmp_path):
    path = tmp_path / "mixed.jsonl"
    good = bench_record().to_dict()
    path.write_bytes(b"\xff\xfe binary\n" + json.dumps(good).encode() + b"\n[1, 2]\n"
                     + json.dumps({"schema": "llamabench/bench-record/1", "key": 3}).encode() + b"\n"
                     + json.dumps({"schema": "someone-else/1"}).encode() + b"\n" + b'{"torn": ')
    read = read_records(path)
    assert [r.key for r in read.records] == [good["key"]]
    assert read.skipped == 5


def test_a_torn_line_is_closed_off_on_append(tmp_path):
    path = tmp_path / "torn.jsonl"
    path.write_text('{"schema": "llamabench/bench-rec')
    append(path, bench_record())
    assert len(read_records(path).records) == 1


def test_destination_checked_before_measuring(tmp_path):
    import pytest

    from llamabench.results.jsonl import ResultsFileError

    (tmp_path / "a-file").write_text("x")
    for bad in (tmp_path, tmp_path / "a-file" / "below.jsonl"):
        with pytest.raises(ResultsFileError):
            jsonl.check_destination(bad)


def test_the_kind_is_not_a_field():
    # a record's schema is its class's: the second positional argument is the payload, never the kind
    assert InspectRecord(MODEL, {"n_ctx": 1}).to_dict()["schema"] == "llamabench/inspect-record/1"
