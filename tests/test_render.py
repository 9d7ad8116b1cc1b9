"""Renderers on fixed records: fit tables and advice, bench tables, and a report from two machines."""

from __future__ import annotations

import json

from test_fit_search import GEOMETRY, fitter
from test_records import MODEL, bench_record
from llamabench.cli import main
from llamabench.fit.result import FitResult
from llamabench.footprint import CacheSettings
from llamabench.inspection import Inspection, kv_curve
from llamabench.footprint import compute_footprint
from llamabench.metadata import ModelMetadata
from llamabench.render.bench import render
from llamabench.render.fit import render_markdown_report, render_text
from llamabench.results.records import InspectRecord, append

GIB = 2**30


def fit_result(budget: int) -> FitResult:
    f = fitter()
    rows = f.rows("card", budget, CacheSettings(n_ctx=8192))
    return FitResult("Tiny MoE", "qwen3moe", {"weights": "test"}, rows, [("card", budget)], [8192], f.n_layer_all,
                     "tiny.gguf", n_ctx_train=32768)


def test_fit_text_gives_the_command_of_the_recommendation():
    text = render_text(fit_result(int(1.2 * GIB)))
    assert "all layers on the card" in text and "no (-" in text
    assert "-> fits with f16/f16 KV, experts of layers 0-" in text
    assert "llama-server -m tiny.gguf -c 8192 -ngl 99 -fa on -ctk f16 -ctv f16 --n-cpu-moe" in text
    assert "Llama() cannot keep experts in RAM" in text
    assert render_markdown_report(fit_result(int(1.2 * GIB))).count("| f16/f16 |") == 3


def test_a_tiny_shortfall_is_shown_in_mib():
    f = fitter()
    needed = f.parts(CacheSettings(n_ctx=8192), fit_result(GIB).rows[0].placement).total
    text = render_text(fit_result(needed - 100 * 1024))
    assert "no (-0.10 MiB)" in text and "no (-0.00)" not in text


def test_fit_result_round_trips():
    result = fit_result(int(1.2 * GIB))
    assert FitResult.from_dict(json.loads(json.dumps(result.to_dict()))).to_dict() == result.to_dict()


def test_bench_formats():
    records = [bench_record(), bench_record(depth=512)]
    md = render(records, "md")
    assert "| tiny | - | - | CPU | 0 | 2 | 4096 | f16 | f16 | 1 | tg16 @ d512 | 10.00 ± 0.00 |" in md
    assert render(records, "csv").splitlines()[2].startswith("tiny,4096,f16,f16,1,0,2,tg16 @ d512,ok,10.0")
    assert json.loads(render(records, "json"))[1]["test"] == "tg16 @ d512"


def test_report_from_two_machines_keeps_two_series(tmp_path, capsys):
    meta = ModelMetadata("test", "llama", {"general.architecture": "llama", "llama.block_count": 4,
                                           "llama.context_length": 8192, "llama.embedding_length": 256,
                                           "llama.attention.head_count": 4})
    from llamabench.layout import geometry_from_metadata

    geometry = geometry_from_metadata(meta)
    inspection = Inspection(meta, geometry, compute_footprint(geometry, CacheSettings(n_ctx=4096)))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    box_b = {"host": "box-b", "cpu": "Other CPU", "gpu": None}
    append(a, InspectRecord(MODEL, inspection=inspection.to_dict(), kv_curve=kv_curve(inspection)))
    for depth, ts in ((0, 20.0), (512, 18.0)):
        append(a, bench_record(depth=depth, ts=ts))
        append(a, bench_record(depth=depth, ts=ts - 1, timestamp="2026-12-02T00:00:00+00:00"))  # a rerun: newest wins
        append(b, bench_record(machine=box_b, depth=depth, ts=ts / 2))
    out = tmp_path / "rep"
    assert main(["report", str(a), str(b), "--out-dir", str(out)]) == 0
    md = (out / "report.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| box-")]
    assert len(table) == 4 and len(set(table)) == 4  # two machines x two depths, no repeats
    assert sum("box-a (Test CPU, CPU)" in line for line in table) == 2
    assert "| box-a (Test CPU, CPU) | tiny | - | - | CPU | 0 | 2 | 4096 | f16 | f16 | 1 | tg16 | 19.00 ± 0.00 |" in md
    assert (out / "speed_vs_depth.png").stat().st_size > 1000
