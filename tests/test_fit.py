"""`llamabench fit` on twins: margins, the max-context search against real allocations, bad budgets."""

from __future__ import annotations

import json

import pytest

from llamabench import catalog
from llamabench.cli import main
from llamabench.llama.engine import Session
from llamabench.footprint import CacheSettings
from llamabench.twin.build import write_twin

pytestmark = pytest.mark.slow  # llama.cpp dry runs and real contexts

MIB = 2**20


@pytest.fixture(scope="module")
def twin_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("fit") / "qwen3-30b-a3b-twin.gguf"
    write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, path)
    return path


def fit_json(capsys, *argv) -> dict:
    assert main(["fit", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_fits_by_a_margin_and_misses_by_a_margin(twin_path, capsys):
    # KV alone at 32768 f16 is 3 GiB for this geometry (98,304 B/token)
    data = fit_json(capsys, str(twin_path), "--vram", "8GiB,2GiB", "--ctx", "32768", "-ctk", "f16", "-ctv", "f16")
    by_budget = {}
    for row in data["rows"]:
        by_budget.setdefault(row["budget"], []).append(row)
    big = by_budget["8GiB"][0]
    assert big["fits"] and big["total_bytes"] < 8 * 2**30 - 3 * 2**30  # fits with more than 3 GiB to spare
    assert big["parts"]["kv"] == 98304 * 32768
    small = by_budget["2GiB"][0]
    assert small["placement"] == {"kind": "all", "value": 0}
    assert not small["fits"] and small["short_by_bytes"] > 2**30  # misses: KV alone is over the budget
    recs = {r["budget"]: r for r in data["recommendations"]}
    assert recs["8GiB"]["fits"] and "-c 32768" in recs["8GiB"]["llama_cpp"]
    assert recs["8GiB"]["row"]["placement"]["kind"] == "all"
    assert recs["2GiB"]["row"]["placement"]["kind"] != "all"  # only fewer layers on the card fit


def _allocated_bytes(path, n_ctx: int) -> int:
    with Session(str(path), CacheSettings(n_ctx=n_ctx), extra_bufts=False, n_threads=1) as s:
        a = s.allocations
        mib = (sum(a.model_buffers_mib.values()) + a.kv_mib + a.recurrent_mib + sum(a.compute_buffers_mib.values())
               + sum(a.output_buffers_mib.values()))
    return round(mib * MIB)


def test_max_context_search_agrees_with_real_allocations(twin_path, capsys):
    budget = 300 * MIB
    data = fit_json(capsys, str(twin_path), "--verify", "--ram", "300MiB", "--ctx", "2048", "-ctk", "f16", "-ctv", "f16")
    assert data["verify"]["ok"], data["verify"]
    found = data["rows"][0]["max_n_ctx"]
    assert found > 2048
    assert _allocated_bytes(twin_path, found) <= budget  # llama.cpp's own buffers at the found n_ctx
    assert _allocated_bytes(twin_path, found + 256) > budget  # one step above is over


def test_builtin_default_verdict_for_16_and_24_gb(capsys):
    assert main(["fit", "qwen3-5-35b-a3b"]) == 0
    out = capsys.readouterr().out
    assert "16GiB (budget 16.00 GiB) at n_ctx 131072" in out and "24GiB (budget 24.00 GiB) at n_ctx 131072" in out
    for label in ("weights", "KV", "recurrent", "compute", "reserve"):
        assert f"  {label}" in out
    assert "published Q4_K_M" in out and "dry run" in out and "512 MiB" in out
    assert "--n-cpu-moe" in out  # 16 GB needs experts in RAM for 21 GB of weights


def test_refused_cache_types_are_notes_not_a_crash(twin_path, capsys):
    # q8_0 / q4_0 V need flash attention: said once each, and the f16 rows stand
    assert main(["fit", str(twin_path), "--ctx", "4096", "-fa", "off", "--vram", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "note: q8_0/q8_0: a quantized V cache (q8_0) needs flash attention" in out and "f16/f16" in out
