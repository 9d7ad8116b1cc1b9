"""`llamabench report`: records against inspect and the results, null measured_* without a timed run, plots."""

from __future__ import annotations

import json

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.records.bench import BenchRecord
from llamabench.reporting.kv_record import KvEfficiencyRecord

pytestmark = pytest.mark.slow  # builds its results with real llama.cpp runs

PLOTS = ("kv_vs_context", "budget", "speed_vs_depth", "theory_vs_measured")


@pytest.fixture(scope="module")
def timed_results(tmp_path_factory):
    """inspect + verify + fit + a tiny timed bench of the built-in default, all in one results file."""
    tmp = tmp_path_factory.mktemp("report")
    results = tmp / "results.jsonl"
    for argv in (["inspect", "qwen3-5-35b-a3b", "--ctx", "4096"], ["verify", "qwen3-5-35b-a3b", "--ctx", "4096"],
                 ["fit", "qwen3-5-35b-a3b", "--ctx", "4096", "-ctk", "f16", "-ctv", "f16", "--emulate"],
                 ["bench", "qwen3-5-35b-a3b", "-c", "4096", "-p", "16", "-n", "2", "-d", "0,32", "-r", "1", "-t", "2"]):
        assert main(argv + ["--results", str(results)]) == 0
    return results


def test_record_numbers_come_from_inspect_and_the_results(timed_results, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", str(timed_results), "--out-dir", str(out), "--compare", "qwen3-30b-a3b"]) == 0
    record = json.loads((out / "record.json").read_text())
    assert record["id"] == "kv-efficiency/qwen3-5-35b-a3b-hybrid-kv-4k"
    assert record["context_length"] == 4096
    assert record["kv_bytes_per_token"] == 20480 and record["full_gqa_kv_bytes_per_token"] == 81920
    assert record["kv_bytes_at_context"] == 20480 * 4096
    assert record["recurrent_state_bytes"] == 65_863_680
    assert record["measured_kv_bytes"] == 20480 * 4096  # llama.cpp's real allocation in the timed run
    bench = [r for r in lb.read_records(timed_results).records if isinstance(r, BenchRecord)]
    deepest = {r.test.kind: r for r in bench if r.test.depth == 32}
    assert record["measured_prefill_tok_s"] == round(deepest["pp"].avg_ts, 2)
    assert record["measured_decode_tok_s"] == round(deepest["tg"].avg_ts, 2)
    assert record == KvEfficiencyRecord.from_dict(record).to_dict()  # record.json holds typed kv_efficiency records
    assert "10 are full_attention (indices 3,7,...,39)" in record["kv_bytes_basis"]
    assert "20,480 B/token" in record["kv_bytes_basis"] and "4.0x reduction" in record["kv_bytes_basis"]
    assert "timed run" in record["methodology"] and "dry run" in record["methodology"]
    assert record["engine_id"].startswith("llama-cpp")
    for name in PLOTS:
        for ext in ("png", "svg"):
            path = out / f"{name}.{ext}"
            assert path.exists() and path.stat().st_size > 1000, path
    md = (out / "report.md").read_text()
    assert "![KV against context](kv_vs_context.png)" in md and "## Does it fit?" in md
    assert "16GiB card" in md and "24GiB card" in md


def test_untimed_run_has_null_measurements(tmp_path, capsys):
    results = tmp_path / "untimed.jsonl"
    assert main(["inspect", "qwen3-5-35b-a3b", "--results", str(results)]) == 0
    assert main(["verify", "qwen3-5-35b-a3b", "--results", str(results)]) == 0
    out = tmp_path / "rep"
    assert main(["report", str(results), "--out-dir", str(out)]) == 0
    record = json.loads((out / "record.json").read_text())
    assert record["measured_kv_bytes"] is None
    assert record["measured_prefill_tok_s"] is None and record["measured_decode_tok_s"] is None
    assert "measured_kv_bytes and the measured speeds are null" in record["methodology"]
    assert record["measured_kld_mean"] is None and "f16 K/V is the base" in record["methodology"]
    assert record["kv_bytes_at_context"] == 2_684_354_560
    assert (out / "kv_vs_context.png").stat().st_size > 1000
    assert (out / "theory_vs_measured.png").stat().st_size > 1000  # from the dry run


def test_report_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 1
    assert "no such results file" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["report", str(empty)]) == 1
    assert "holds no llamabench records" in capsys.readouterr().err


def test_the_plots_keep_legends_off_titles_give_every_row_its_bar_and_mark_the_trained_context(tmp_path,
                                                                                               monkeypatch):
    """Trap 13: the budget legend covered a panel title; MTP rows drew over the plain rows of the same label; the
    room line left out compute; the axis ran past the trained context unmarked."""
    from llamabench.reporting import plots

    results = tmp_path / "r.jsonl"
    assert main(["inspect", "qwen3-5-35b-a3b", "-c", "300000", "--results", str(results)]) == 0
    assert main(["fit", "qwen3-5-35b-a3b", "--vram", "16GiB,24GiB", "-ctk", "f16", "-ctv", "f16",
                 "--results", str(results)]) == 0
    figures = {}

    def keep(fig, out_dir, name):
        fig.canvas.draw()
        figures[name] = fig
        return []

    monkeypatch.setattr(plots, "_save", keep)
    lb.report(results, out_dir=tmp_path / "out")
    budget = figures["budget"]
    renderer = budget.canvas.get_renderer()
    legend = budget.legends[0].get_window_extent(renderer)
    for ax in budget.axes:
        assert not legend.overlaps(ax.title.get_window_extent(renderer))
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert len(labels) == len(set(labels)) and any(label.endswith(", MTP") for label in labels)
    texts = [t.get_text() for t in figures["kv_vs_context"].axes[0].texts]
    assert any("past the trained 256k" in t for t in texts)
    assert any("room left after weights, reserve and compute" in t for t in texts)
