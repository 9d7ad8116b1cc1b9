"""Typed records: every kind comes back equal from its stored form; lines that are not records are passed over
with a warning naming them; a broken record of this version is an error naming its line."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core import serial
from llamabench.jobs.bench.measure import WeightsBasis, roofline, theory
from llamabench.jobs.fit.search import Fitter
from llamabench.memory import speed
from llamabench.memory.allocations import DeviceParts, parse_allocations
from llamabench.memory.fit_result import FitResult
from llamabench.memory.placement import Placement, PlacementKind
from llamabench.memory.verification import MatrixCell, MatrixResult, compare
from llamabench.model.layout import geometry_from_metadata
from llamabench.model.metadata import ModelRef, TensorInfo
from llamabench.model.weights import breakdown
from llamabench.records import jsonl
from llamabench.records.bench import BenchRecord, Memory
from llamabench.records.fit import DeviceCheck, FitRecord, FitVerification, PlacementCheck
from llamabench.records.inspect import VerifyRecord
from llamabench.records.quality import QualityRecord, QualityRow, ScoredTextRef
from llamabench.records.record import SCHEMA_VERSION, RecordKind
from llamabench.records.records import append, from_dict, read_records
from llamabench.reporting.kv_record import KvEfficiencyRecord
from llamabench.settings.bench_tests import BenchTest, TestKind
from llamabench.settings.budget import Budget
from llamabench.settings.params import Params
from llamabench.world.sysinfo import Gpu, Machine
from llamabench.world.versions import Versions
from tests import support
from tests.support.metadata import model

DATA = support.DATA
MODEL = ModelRef("tiny", "Tiny", "qwen3moe", "/models/tiny.gguf", False)
MACHINE = Machine(host="box-a", cpu="Test CPU")
GPU_MACHINE = Machine(host="box-g", cpu="Test CPU", gpus=(Gpu("Test GPU", 16 * 2**30),))
VERSIONS = Versions(llama_cpp_python="0.3.36")
GEOMETRY = geometry_from_metadata(model("qwen3moe", block_count=4, context_length=8192, embedding_length=256,
                                        attention__head_count=4, attention__head_count_kv=2,
                                        attention__key_length=64, attention__value_length=64))
WORK = speed.model_work(model("qwen3moe"), GEOMETRY, breakdown((), GEOMETRY.n_layer, set(), basis="test"))
WORK = dataclasses.replace(WORK, dense_bytes=5_000)  # a token reads 5,000 B of weights
KV_LINE = ("llama_kv_cache: size =    8.00 MiB (  4096 cells,   4 layers,  1/1 seqs), K (f16):    4.00 MiB, "
           "V (f16):    4.00 MiB\n")


def bench_record(machine=MACHINE, depth=0, kind=TestKind.TG, ts=10.0, timestamp="2026-12-01T00:00:00+00:00"):
    params = Params(n_ctx=4096, n_threads=2)
    test = BenchTest(kind, 16, depth)
    fp, error = theory(GEOMETRY, params)
    record = BenchRecord(model=MODEL, params=params, test=test, repetitions=2, samples_ns=(int(16e9 / ts),) * 2,
                         allocations=parse_allocations(KV_LINE), memory=Memory(100, 300, None, None, "no GPU"),
                         footprint=fp, theory_error=error, machine=machine, versions=VERSIONS)
    rf = roofline(GEOMETRY, WeightsBasis(WORK, "test"), params, test, record.avg_ts, 40.0)
    return replace(record, roofline=rf, timestamp=timestamp)


def fit_record() -> FitRecord:
    weights = breakdown((TensorInfo("blk.0.attn_q.weight", (256, 256), 8, 2**20),
                         TensorInfo("blk.0.ffn_up_exps.weight", (256, 64, 4), 8, 4 * 2**20)), 4, set(), basis="test")
    fitter = Fitter(GEOMETRY, weights, lambda p: 2**20 + p.n_ctx, reserve=0)
    rows = tuple(fitter.rows(Budget("1GiB", 2**30), Params(n_ctx=4096), [Placement(PlacementKind.NGL, 2)]))
    result = FitResult("Tiny", "qwen3moe", {"weights": "test"}, rows, (Budget("1GiB", 2**30),), (4096,), 4, "t.gguf")
    device = DeviceCheck("RPC0[127.0.0.1:1]", DeviceParts(1, 2, 3, 4), DeviceParts(1, 2, 3, 4))
    verify = FitVerification((PlacementCheck("what", "an emulated card", 4096, (device,), budget=10, card_total=10),))
    return FitRecord(model=MODEL, fit=result, verify=verify, machine=GPU_MACHINE, versions=VERSIONS)


def every_kind() -> list:
    inspect = lb.inspect("qwen3-5-35b-a3b", n_ctx="4k")
    fp = inspect.footprint
    alloc = parse_allocations((DATA / "qwen35moe-twin-4096.log").read_text())
    verify = VerifyRecord(model=MODEL, params=fp.params, footprint=fp, allocations=alloc, checks=compare(fp, alloc),
                          machine=MACHINE, versions=VERSIONS)
    roof = lb.roofline("qwen3-30b-a3b", card="rtx-4090", n_ctx="8k")
    return [inspect, verify, fit_record(), bench_record(), roof, quality_record()]


def quality_record() -> QualityRecord:
    """A quality run: one choice measured (a KLD a hair below zero, as llama-perplexity's compact base allows), one
    context that failed."""
    measured = QualityRow(512, "q8_0", "q8_0", "f16 KV", 2, 2, -1e-7, 1e-8, 0.03, 0.07, 17.08, 2.31, 17.09, 2.30,
                          95.3, 0.94, 510)
    failed = QualityRow(65536, "q8_0", "q8_0", "f16 KV", 0, 0, reason="llama_decode returned 1 (out of memory?)")
    return QualityRecord(model=MODEL, params=Params(n_ctx=512, n_batch=512), machine=MACHINE, versions=VERSIONS,
                         text=ScoredTextRef("pydoc_data.topics (Python 3.11)", "ab" * 32, 465126, 112660),
                         rows=(measured, failed), chunks_asked=2, rows_per_decode=64)


def test_every_kind_round_trips(tmp_path):
    records = every_kind()
    assert {r.kind for r in records} == set(RecordKind)
    path = tmp_path / "r.jsonl"
    written = [append(path, r) for r in records]
    back = read_records(path)
    assert back.warnings == ()
    assert list(back.records) == written
    for r in records:
        assert from_dict(json.loads(json.dumps(r.to_dict()))) == r
        assert type(r).from_dict(r.to_dict()) == r


def test_the_results_of_every_api_call_round_trip():
    params = Params(n_ctx=4096, type_k="q8_0")
    run = lb.BenchRun("tiny", "r.jsonl", (params,), (BenchTest(TestKind.PP, 512),), 3, (bench_record(),), skipped=1)
    kv = KvEfficiencyRecord("kv-efficiency/x", "X", "basis", "method", "", "llama-cpp", 4096, 8192, 10, 40, 40960, 0)
    matrix = MatrixResult("tiny", "t.gguf", 10, 5, 1.5, (MatrixCell(params), MatrixCell(params, ("bad",))))
    report = lb.Report((lb.ModelReport("tiny", "out", ("out/report.md",), (kv,)),), ("a warning",))
    for value in (params, run, kv, matrix, report):
        assert type(value).from_dict(json.loads(json.dumps(value.to_dict()))) == value


def test_typed_values_not_prose():
    r = bench_record(depth=512)
    assert r.test.name == "tg16 @ d512" and r.params.n_ctx == 4096
    assert r.kv_match is True  # 4 layers x 2 heads x 64 x 2 x 2 B x 4096 cells = 8 MiB, as the line says
    assert r.memory.rss_delta_bytes == 200
    assert r.avg_ts == pytest.approx(10.0) and r.stddev_ts == 0.0
    assert r.roofline.kv_read_bytes == 4 * 2 * 64 * 2 * 2 * (512 + 8)  # the middle token of tg16 at depth 512


def test_lines_that_are_not_records_are_passed_over_with_their_line(tmp_path):
    path = tmp_path / "mixed.jsonl"
    good = bench_record().to_dict()
    old = dict(good, schema="llamabench/bench-record/1")
    path.write_bytes(b"\xff\xfe binary\n" + json.dumps(good).encode() + b"\n[1, 2]\n"
                     + json.dumps(old).encode() + b"\n"
                     + json.dumps({"schema": "someone-else/1"}).encode() + b"\n" + b'{"torn": ')
    read = read_records(path)
    assert [r.test for r in read.records] == [bench_record().test]
    assert len(read.warnings) == 5
    assert read.warnings[0].startswith(f"{path}:1: not JSON")
    assert f"{path}:4: a bench record of schema version 1" in read.warnings[2]
    assert read.warnings[-1].startswith(f"{path}:6:")


def test_a_broken_record_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    good = bench_record().to_dict()
    broken = dict(good, params={**good["params"], "n_ctx": "lots"})
    path.write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(jsonl.ResultsFileError, match=rf"{path.name}:2: broken bench record"):
        read_records(path)


def test_a_broken_record_is_one_line_at_the_cli(tmp_path, capsys):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps({"schema": f"llamabench/inspect-record/{SCHEMA_VERSION}", "model": 3}) + "\n")
    assert main(["report", str(path), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken.jsonl:1: broken inspect record" in err


def test_a_torn_line_is_closed_off_on_append(tmp_path):
    path = tmp_path / "torn.jsonl"
    path.write_text('{"schema": "llamabench/bench-rec')
    append(path, bench_record())
    read = read_records(path)
    assert len(read.records) == 1 and len(read.warnings) == 1


def test_destination_checked_before_measuring(tmp_path):
    (tmp_path / "a-file").write_text("x")
    for bad in (tmp_path, tmp_path / "a-file" / "below.jsonl"):
        with pytest.raises(jsonl.ResultsFileError):
            jsonl.check_destination(bad)


def test_the_kind_is_not_a_field():
    d = bench_record().to_dict()
    assert d["schema"] == f"llamabench/bench-record/{SCHEMA_VERSION}" and "kind" not in d


def test_a_wrong_shape_names_the_field():
    with pytest.raises(serial.ShapeError, match="n_ctx"):
        Params.from_dict({"n_ctx": "lots"})
