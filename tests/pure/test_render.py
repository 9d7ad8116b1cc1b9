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
    """Where only llama-server's growing bounds pass the RAM, the answer is the command at the asked context with
    bounds that fit, the bound that binds named (it said "does NOT fit, max n_ctx 9472" for gpt-oss-20b on a 24 GB
    Mac, which fits 131072 with --cache-ram 0); where lowering them cannot help, the flags to shrink it with."""
    text = render_text(fit_result(int(1.2 * GIB), ram=Budget("4GiB", 4 * GIB)))
    assert "RAM no (-" in text and "once llama-server's growing RAM is bounded lower" in text
    assert "what binds is the system RAM, not the context: at --cache-ram 8192" in text
    command = next(line for line in text.splitlines() if line.strip().startswith("llama-server"))
    assert "-c 8192" in command and int(command.split("--cache-ram ")[1].split()[0]) < 8192
    assert "grows to 4.00 GiB" in text and "of 4GiB: fits" in text
    tight = render_text(fit_result(int(1.2 * GIB), ram=Budget("0.5GiB", GIB // 2)))  # the start alone passes it
    assert "but not the system RAM" in tight and "--cache-ram, --ctx-checkpoints, -np" in tight
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


def _twin_report_figures(tmp_path, monkeypatch) -> dict:
    """`llamabench report` on a catalog id's run (timed on its twin): each plot's figure by name, left open."""
    from dataclasses import replace

    from llamabench.reporting import plots
    from llamabench.settings.bench_tests import TestKind

    figures = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, name: figures.setdefault(name, fig) and [])
    meta = ModelMetadata("test", "llama", {"general.architecture": "llama", "llama.block_count": 4,
                                           "llama.context_length": 8192, "llama.embedding_length": 256,
                                           "llama.attention.head_count": 4})
    inspection = inspect(meta, Params(n_ctx=4096))
    twin = replace(MODEL, is_twin=True)
    results = tmp_path / "t.jsonl"
    append(results, InspectRecord(model=twin, inspection=inspection,
                                  kv_curve=kv_curve(inspection.geometry, Params(n_ctx=4096), 8192)))
    for depth, ts in ((0, 20.0), (512, 18.0)):
        for kind in (TestKind.PP, TestKind.TG):
            append(results, replace(bench_record(depth=depth, kind=kind, ts=ts), model=twin))
    assert main(["report", str(results), "--out-dir", str(tmp_path / "rep")]) == 0
    return figures


def test_speed_vs_depth_keeps_the_twin_subtitle_clear_of_the_panel_titles(tmp_path, monkeypatch):
    """speed_vs_depth.png: the twin's second subtitle line ran over "prefill (pp)" and "decode (tg)"."""
    fig = _twin_report_figures(tmp_path, monkeypatch)["speed_vs_depth"]
    fig.canvas.draw()  # constrained layout places the titles at draw time
    renderer = fig.canvas.get_renderer()
    subtitle = next(t for t in fig.texts if "geometry twin" in t.get_text()).get_window_extent(renderer)
    titles = [ax.title.get_window_extent(renderer) for ax in fig.axes]
    assert len(titles) == 2 and not any(subtitle.overlaps(t) for t in titles)


def test_theory_vs_measured_says_a_catalog_id_was_sized_on_its_twin(tmp_path, monkeypatch):
    """theory_vs_measured.png: the twin's 44 MiB of weights read as the published model's."""
    from llamabench.reporting import plots

    fig = _twin_report_figures(tmp_path, monkeypatch)["theory_vs_measured"]
    title = fig.axes[0].get_title()
    assert "timed on its geometry twin" in title and "weights and compute buffer the twin's" in title
    plain = []
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, name: plain.append(fig) or [])
    plots.theory_vs_measured(tmp_path, "Tiny", [("KV cache", 8.0, 8.0)])
    assert "twin" not in plain[0].axes[0].get_title()  # a GGUF timed itself says nothing of a twin


def test_roofline_panels_share_colours_and_one_legend_and_use_the_width(tmp_path, monkeypatch):
    """roofline.png: a blank middle (the legend under the left panel squeezed both), no legend for the bandwidth
    panel, and colours cycled per panel (orange was one series' model on the left, another series on the right)."""
    from matplotlib.colors import to_hex

    from llamabench.reporting import plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, name: figures.append(fig) or [])
    points = [{"depth": d, "measured": 70 - d / 100, "predicted": 70 - d / 100, "full_gqa": 69 - d / 50, "mbu": 0.4}
              for d in (0, 256)]
    labels = [f"vm (AMD EPYC, CPU), n_ctx 296, {kv}" for kv in ("f16/f16", "f16/q8_0", "q8_0/f16", "q8_0/q8_0")]
    plots.roofline(tmp_path, "Tiny", [{"label": label, "basis": "b", "points": points, "line": points}
                                      for label in labels])
    fig = figures[0]
    fig.canvas.draw()
    left, right = fig.axes
    colours = [{to_hex(line.get_color()) for line in ax.get_lines()} for ax in (left, right)]
    assert colours[0] == colours[1] and len(colours[1]) == len(labels)  # one colour per series, the same on both
    assert len(fig.legends) == 1 and left.get_legend() is None  # one legend for both panels
    assert set(labels) <= {t.get_text() for t in fig.legends[0].get_texts()}
    assert right.get_position().x0 - left.get_position().x1 < 0.15  # no blank middle


def test_kv_vs_context_names_the_red_line_and_keeps_the_legend_off_the_curve(tmp_path, monkeypatch):
    """kv_vs_context.png: an unexplained red "128k" line, and the legend drawn over the curve."""
    from llamabench.reporting import plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, name: figures.append(fig) or [])
    meta = ModelMetadata("test", "llama", {"general.architecture": "llama", "llama.block_count": 4,
                                           "llama.context_length": 131072, "llama.embedding_length": 256,
                                           "llama.attention.head_count": 4})
    inspection = inspect(meta, Params(n_ctx=4096))
    plots.kv_vs_context(tmp_path, "Tiny", kv_curve(inspection.geometry, Params(n_ctx=4096), 131072), {}, None, 0)
    fig = figures[0]
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_legend() is None and len(fig.legends) == 1
    renderer = fig.canvas.get_renderer()
    assert not fig.legends[0].get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    assert any("128k (n_ctx 131,072)" in t.get_text() for t in fig.legends[0].get_texts())
    assert "one sequence (-np 1" in ax.get_title()  # llama-server's 4 slots hold 4 recurrent states (round 3)


def test_off_a_terminal_long_work_still_says_where_it_is(capsys):
    """Door round 3, trap 8: the demo printed nothing for about 5 minutes (its fit and bench progress only drew on a
    terminal). Off one, a plain line now and then; silent where not asked."""
    from llamabench.render.progress import Progress, StatusLine

    StatusLine(enabled=False, plain_every_s=0)("fit: llama.cpp dry run 3")
    Progress(2, enabled=False, plain_every_s=0)("fill", {"done": 5, "total": 10, "seconds": 1.0, "depth": 10})
    StatusLine(enabled=False)("unseen")
    err = capsys.readouterr().err
    assert "... fit: llama.cpp dry run 3" in err and "filling to depth 10" in err and "unseen" not in err
