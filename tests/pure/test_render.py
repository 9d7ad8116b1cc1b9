"""Renderers on fixed records: fit tables and advice, bench tables, and a report from two machines."""

from __future__ import annotations

import csv
import io
import json

from llamabench.cli import main
from llamabench.core import serial
from llamabench.memory.fit_result import FitResult
from llamabench.memory.footprint import kv_curve
from llamabench.memory.inspection import inspect
from llamabench.memory.runtimes import Runtime, RuntimeConfig
from llamabench.model.metadata import ModelMetadata
from llamabench.records.inspect import InspectRecord
from llamabench.records.records import append
from llamabench.render.bench import render
from llamabench.render.fit import markdown_report, render_text
from llamabench.settings.budget import Budget
from llamabench.settings.params import Params
from llamabench.world.sysinfo import Machine
from tests.pure.test_fit_search import fitter
from tests.pure.test_records import MODEL, bench_record

GIB = 2**30


def fit_result(budget: int, runtime: Runtime = Runtime.LLAMA_SERVER, ram: Budget | None = None) -> FitResult:
    """The tiny MoE of test_fit_search, sized for a runtime; Llama() searches no --n-cpu-moe placements."""
    config = RuntimeConfig(runtime)
    f = fitter(runtime=config, ram=ram)
    rows = f.rows(Budget("card", budget), config.context(Params(n_ctx=8192)))
    return FitResult("Tiny MoE", "qwen3moe", {"weights": "test"}, tuple(rows), (Budget("card", budget),), (8192,),
                     f.n_layer_all, "tiny.gguf", n_ctx_train=32768, runtime=config,
                     server_args=config.server_flags(f.geometry), ram=ram)


def test_fit_text_gives_the_command_of_the_recommendation():
    text = render_text(fit_result(int(1.2 * GIB)))
    assert "all layers on the card" in text and "no (-" in text
    assert "-> fits with f16/f16 KV, experts of layers 0-" in text
    assert ("llama-server -m tiny.gguf -c 8192 -ngl 99 -fa on -ctk f16 -ctv f16 --n-cpu-moe 4 -np 4 -kvu "
            "--cache-ram 8192" in text)
    assert "system RAM: " in text and "prompt cache <= 8.00" in text
    assert "Llama(" not in text  # sized for llama-server: the Llama() line would be another context
    python = render_text(fit_result(int(1.2 * GIB), Runtime.LLAMA_CPP_PYTHON))
    assert "--n-cpu-moe" not in python and "llama-server -m" not in python
    assert "-> fits with f16/f16 KV, " in python and "llama_cpp.Llama(" in python
    assert markdown_report(fit_result(int(1.2 * GIB))).count("| f16/f16 |") == 3
    rows = list(csv.DictReader(io.StringIO(render_text(fit_result(int(1.2 * GIB)), "csv"))))
    assert [r["fits"] for r in rows][0].startswith("no (-") and rows[-1]["command"].startswith("llama-server")
    assert int(rows[-1]["host_bytes"]) >= 8192 * 2**20  # the prompt cache limit is a part of the host


def test_a_placement_that_fits_the_card_but_not_the_ram_names_the_flags():
    text = render_text(fit_result(int(1.2 * GIB), ram=Budget("4GiB", 4 * GIB)))
    assert "RAM no (-" in text and "but not the system RAM" in text
    assert "does NOT fit" in text and "--cache-ram, --ctx-checkpoints, -np" in text
    assert "-> fits with" in render_text(fit_result(int(1.2 * GIB), ram=Budget("16GiB", 16 * GIB)))


def test_a_tiny_shortfall_is_shown_in_mib():
    f = fitter()
    needed = f.parts(Params(n_ctx=8192), fit_result(GIB).rows[0].placement).total
    text = render_text(fit_result(needed - 100 * 1024))
    assert "no (-0.10 MiB)" in text and "no (-0.00)" not in text


def test_fit_result_round_trips():
    result = fit_result(int(1.2 * GIB))
    assert serial.from_dict(FitResult, json.loads(json.dumps(serial.to_dict(result)))) == result


def test_bench_formats():
    records = [bench_record(), bench_record(depth=512)]
    md = render(records, "md")
    assert "| tiny | - | - | CPU | 0 | 2 | 4096 | f16 | f16 | 1 | tg16 @ d512 | 10.00 ± 0.00 |" in md
    rows = list(csv.DictReader(io.StringIO(render(records, "csv"))))
    assert rows[1]["test"] == "tg16 @ d512" and rows[1]["n_ctx"] == "4096" and rows[1]["status"] == "ok"
    assert float(rows[1]["avg_ts"]) == 10.0 and int(rows[1]["kv_theory_bytes"]) == 8 * 2**20


def test_report_from_two_machines_keeps_two_series(tmp_path, capsys):
    meta = ModelMetadata("test", "llama", {"general.architecture": "llama", "llama.block_count": 4,
                                           "llama.context_length": 8192, "llama.embedding_length": 256,
                                           "llama.attention.head_count": 4})
    inspection = inspect(meta, Params(n_ctx=4096))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    box_b = Machine(host="box-b", cpu="Other CPU")
    append(a, InspectRecord(model=MODEL, inspection=inspection,
                            kv_curve=kv_curve(inspection.geometry, Params(n_ctx=4096), 8192)))
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


def test_budget_bars_draw_every_part_so_they_add_up_to_the_total(tmp_path):
    from dataclasses import fields, replace

    from llamabench.memory.placement import Parts
    from llamabench.reporting import plots

    assert {part for part, _ in plots.BAR_PARTS.values()} == {f.name for f in fields(Parts)}  # the projector too
    rows = [replace(r, parts=replace(r.parts, projector=300 * 2**20)) for r in fit_result(int(1.2 * GIB)).rows]
    written = plots.budget_bars(tmp_path, "Tiny", rows, 8192)
    assert (tmp_path / "budget.png") in written and "mmproj" in (tmp_path / "budget.svg").read_text()


def test_budget_bars_put_each_verdict_right_of_the_red_line(tmp_path, monkeypatch):
    """budget.png: "fits" / "does not fit" sat at the bar's end, across the budget line of a bar just under it."""
    from llamabench.reporting import plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, name: figures.append(fig) or [])
    rows = fit_result(int(1.2 * GIB)).rows
    plots.budget_bars(tmp_path, "Tiny", rows, 8192)
    ax = figures[0].axes[0]
    budget_x = next(line.get_xdata()[0] for line in ax.get_lines())  # the red line
    verdicts = [t for t in ax.texts if t.get_text() in ("fits", "does not fit")]
    assert verdicts and all(t.xy[0] >= budget_x for t in verdicts)
