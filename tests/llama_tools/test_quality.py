"""`quality` against its judge, llama-perplexity --kl-divergence-base / --kl-divergence, on the two real GGUFs: the
KLD (mean, p99, max), both PPLs and the same-top rate of q8_0 and q4_0 KV against f16, and of a requantized file
against its source; the refusals of what cannot be measured, each in one line; Ctrl-C keeps the chunks finished."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.world.texts import default_text
from tests.support.llama_server import tools_dir
from tests.support.offload_models import requantized

TOOLS = tools_dir()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(TOOLS is None or not (TOOLS / "llama-perplexity").is_file(),
                                 reason="llama-perplexity is not built: make tools (scripts/build_llama_tools.sh)")]
N_CTX, CHUNKS = 512, 2  # 510 scored tokens: llama-perplexity prints its statistics from 100
OPTIONS = ["-c", str(N_CTX), "-b", str(N_CTX), "--chunks", str(CHUNKS), "-nr"]
STATS = {"ppl": r"Mean PPL\(Q\)\s*:\s*([\d.]+)", "ppl_base": r"Mean PPL\(base\)\s*:\s*([\d.]+)",
         "kld_mean": r"Mean\s+KLD:\s*(-?[\d.]+)", "kld_max": r"Maximum KLD:\s*(-?[\d.]+)",
         "kld_p99": r"99\.0%\s+KLD:\s*(-?[\d.]+)", "same_top_p": r"Same top p:\s*([\d.]+)"}


def _perplexity(model, text, *extra) -> str:
    done = subprocess.run([str(TOOLS / "llama-perplexity"), "-m", str(model), "-f", str(text), *OPTIONS, *extra],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def _judged(model, text, base_file, *extra) -> dict[str, float]:
    said = _perplexity(model, text, "--kl-divergence-base", str(base_file), "--kl-divergence", *extra)
    return {name: float(re.search(pattern, said).group(1)) for name, pattern in STATS.items()}


def _assert_agrees(row, judge: dict[str, float]) -> None:
    for name in ("kld_mean", "kld_p99", "kld_max"):
        ours = getattr(row, name)
        assert abs(ours - judge[name]) <= max(0.05 * abs(judge[name]), 0.001), (name, ours, judge)
    for name in ("ppl", "ppl_base"):
        assert abs(getattr(row, name) / judge[name] - 1) <= 0.01, (name, getattr(row, name), judge)
    assert abs(row.same_top_p - judge["same_top_p"]) <= 1.0, (row.same_top_p, judge)
    assert row.chunks == CHUNKS and row.n_tokens_scored == CHUNKS * (N_CTX - 1 - N_CTX // 2) and row.reason is None


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "topics.txt"
    path.write_text(default_text().text, encoding="utf-8")
    return path


@pytest.mark.parametrize("which", ["gemma", "qwen"])
def test_kv_types_are_scored_as_llama_perplexity_scores_them(which, request, text, tmp_path):
    model = request.getfixturevalue(which)
    _perplexity(model, text, "--kl-divergence-base", str(tmp_path / "base.kld"))  # f16 KV
    record = lb.quality(model, n_ctx=N_CTX, n_batch=N_CTX, chunks=CHUNKS, repack=False, type_k="q8_0,q4_0",
                        type_v="q8_0,q4_0", results=tmp_path / "quality.jsonl")
    assert [(r.type_k, r.type_v, r.base) for r in record.rows] == [("q8_0", "q8_0", "f16 KV"),
                                                                   ("q4_0", "q4_0", "f16 KV")]
    for row in record.rows:
        _assert_agrees(row, _judged(model, text, tmp_path / "base.kld", "-ctk", row.type_k, "-ctv", row.type_v,
                                    "-fa", "on"))
    q8, q4 = record.rows
    assert 0 < q8.kld_mean < q4.kld_mean and q8.same_top_p > q4.same_top_p  # fewer bits, further from the base
    assert record.text.sha256 == default_text().sha256 and record.text.n_tokens > 100_000
    stored = lb.read_records(tmp_path / "quality.jsonl").records
    assert list(stored) == [record]
    if which == "gemma":  # fit shows it, the report draws it, and the lossy types' kv_efficiency records carry it
        fitted = lb.fit(model, n_ctx=N_CTX, vram="1GiB", type_k="q8_0,q4_0", type_v="q8_0,q4_0",
                        results=tmp_path / "quality.jsonl")  # fit reads what the file measured of this model
        assert [(q.type_k, q.row.kld_mean) for q in fitted.quality] == [("q8_0", q8.kld_mean), ("q4_0", q4.kld_mean)]
        unmeasured = lb.fit(model, n_ctx=N_CTX, vram="1GiB", type_k="q8_0", type_v="q8_0")
        (q,) = unmeasured.quality
        assert q.row is None and q.command == f"llamabench quality {model} -c {N_CTX} -ctk q8_0 -ctv q8_0"
        (model_report,) = lb.report(tmp_path / "quality.jsonl", out_dir=tmp_path / "report").models
        by_types = {(r.type_k, r.type_v): r for r in model_report.kv_efficiency}
        assert by_types[("f16", "f16")].measured_kld_mean is None
        assert by_types[("q8_0", "q8_0")].measured_kld_mean == q8.kld_mean
        assert by_types[("q4_0", "q4_0")].measured_quality_chunks == CHUNKS
        assert (tmp_path / "report" / "quality.png").stat().st_size > 1000


def test_a_requantized_file_is_scored_against_its_source(qwen, text, tmp_path):
    q4_0 = requantized(qwen, TOOLS)
    _perplexity(qwen, text, "--kl-divergence-base", str(tmp_path / "base.kld"))
    record = lb.quality(q4_0, base_model=qwen, n_ctx=N_CTX, n_batch=N_CTX, chunks=CHUNKS, repack=False)
    (row,) = record.rows
    assert row.label == "weights" and row.base == record.base_model.label
    _assert_agrees(row, _judged(q4_0, text, tmp_path / "base.kld"))
    assert row.kld_mean > 0.01 and row.ppl > row.ppl_base


@pytest.mark.parametrize("argv, needle", [
    (["--base-model", "{qwen}"], "has another vocabulary (151,936 tokens against 262,144)"),
    (["-c", "65536", "-f", "{short}"], "tokens long in this model's vocabulary; -c 65536 needs at least 65,536"),
    (["-ctv", "q8_0", "-fa", "off"], "a quantized V cache needs flash attention"),
    (["-ctk", "f16", "-ctv", "f16"], "nothing lossy to score"),
    (["-f", "{missing}"], "no such text file"),
    (["-c", "1"], "give 3 or more"),
    (["-c", "2"], "give 3 or more"),  # scores no token: llama-perplexity -c 2 prints "[1]-nan"
    (["--chunks", "0"], "--chunks"),
])
def test_what_cannot_be_measured_is_refused_in_one_line(gemma, qwen, tmp_path, capsys, argv, needle):
    short = tmp_path / "short.txt"
    short.write_text("A few words of text. " * 50)
    values = {"qwen": qwen, "short": short, "missing": tmp_path / "none.txt"}
    try:
        code = main(["quality", str(gemma), *[a.format(**values) for a in argv]])
    except SystemExit as exc:  # argparse's own refusals: exit 2
        code = exc.code
    err = capsys.readouterr().err
    assert code != 0 and needle in err and err.count("\n") == 1, err
    with pytest.raises(lb.LlamabenchError):
        lb.quality(gemma, type_k="f16", type_v="f16")


def test_ctrl_c_keeps_the_chunks_already_scored(gemma, tmp_path):
    results = tmp_path / "quality.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "llamabench", "quality", str(gemma), "-c", "256", "-b", "256",
                             "--chunks", "50", "-nr", "-ctk", "q8_0", "-ctv", "q8_0", "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
                            start_new_session=True,  # Ctrl-C's default, whatever this run inherited (a job started
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # with & ignores it)
    try:
        for line in proc.stderr:  # the first chunk scored, then Ctrl-C (to the group, as a terminal sends it)
            if "chunk 2/50 scored" in line:
                os.killpg(proc.pid, signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    (stored,) = [json.loads(line) for line in results.read_text().splitlines()]
    (row,) = stored["rows"]
    assert stored["interrupted"] and 2 <= row["chunks"] < 50 and row["kld_mean"] > 0
    assert row["reason"].startswith("interrupted after") and "interrupted" in out
