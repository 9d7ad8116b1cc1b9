"""Records read back from a results file (issue 54) are checked for range as well as type, in one place
(records.record.check_values, which every kind's from_dict runs): a KLD below what llama-perplexity's arithmetic can
give or past any logits', a PPL or rate out of its range, statistics of no chunk scored, a byte count past any
machine, a speed of 0. Such a record is a broken record, one line naming its line in the file the user gave, and
never shown as a measurement. roofline --calibrate reads a file of a bounded size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamabench.cli import main
from llamabench.core import serial
from llamabench.jobs.roofline.job import CALIBRATE_MAX_BYTES
from llamabench.model.metadata import ModelRef
from llamabench.records import jsonl
from llamabench.records.quality import QualityRecord, QualityRow, ScoredTextRef
from llamabench.records.records import read_records
from llamabench.settings.params import Params
from tests.support import REPO
from tests.support.fuzz_results import set_at

REAL = REPO / "reports" / "qwen3-5-35b-a3b" / "results.jsonl"  # the tracked example: inspect, verify, fit, bench
MODEL = "qwen3-5-35b-a3b"


def real(kind: str) -> dict:
    """The example's first record of this kind, as stored."""
    records = map(json.loads, REAL.read_text().splitlines())
    return next(r for r in records if r["schema"].startswith(f"llamabench/{kind}-"))


def quality() -> dict:
    """A measured q8_0/q8_0 row of the example's model at 4096, one chunk, as stored."""
    bench = real("bench")
    row = QualityRow(4096, "q8_0", "q8_0", "f16 KV", 1, 1, 0.0074, 0.0001, 0.043, 0.35, 7.47, 0.1, 7.48, 0.1, 96.1, 0.2,
                     2047)
    record = QualityRecord(model=serial.from_dict(ModelRef, bench["model"]), params=Params(n_ctx=4096),
                           text=ScoredTextRef("pydoc_data.topics (Python 3.11)", "ab" * 32, 465126, 112660),
                           rows=(row,))
    return {**record.to_dict(), "machine": bench["machine"], "versions": bench["versions"]}


def write(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("field, value", [
    ("kld_mean", -5.0),  # shown by fit as "KLD -5.0000"
    ("kld_mean", 1e308),  # a 309-digit KLD: a finite float, and no KLD
    ("kld_max", 1e6),  # logits a million nats apart: an overflow, not a measurement
    ("kld_p99", -1.0),
    ("kld_mean_unc", -0.1),
    ("ppl", 0.0),  # exp(mean NLL) of NLLs >= 0 is at least 1
    ("ppl_base", 0.5),
    ("same_top_p", 150.0),  # a percentage
    ("same_top_unc", -1.0),
    ("chunks", 0),  # statistics of no chunk scored, presented as a measurement
    ("n_tokens_scored", 0),
    ("n_tokens_scored", 10**6),  # one chunk of 4096 scores 2047
    ("chunks_planned", 0),  # one chunk scored of none planned
    ("ppl", None),  # a measured row with half its statistics
    ("kld_mean", 0.5),  # a mean above the maximum 0.35
])
def test_a_quality_row_out_of_range_is_a_broken_record(tmp_path, field, value):
    path = write(tmp_path / "q.jsonl", quality(), set_at(quality(), f"rows.0.{field}", value))
    with pytest.raises(jsonl.ResultsFileError, match=r"q\.jsonl:2: broken quality record"):
        read_records(path)


@pytest.mark.parametrize("field, value", [
    ("kld_mean", -1e-7),  # a hair below zero: llama-perplexity's compact base allows it
    ("kld_p99", 0.0),
    ("ppl_base", 0.9999),  # the base's top token a uint16 step above log p = 0
    ("same_top_p", 100.0),
])
def test_what_llama_perplexity_can_print_reads_back(tmp_path, field, value):
    path = write(tmp_path / "q.jsonl", set_at(quality(), f"rows.0.{field}", value))
    (record,) = read_records(path).records
    assert getattr(record.rows[0], field) == value


def test_an_unmeasured_row_is_no_measurement_and_reads_back(tmp_path):
    failed = {"n_ctx": 65536, "type_k": "q8_0", "type_v": "q8_0", "base": "f16 KV", "reason": "out of memory"}
    (record,) = read_records(write(tmp_path / "q.jsonl", set_at(quality(), "rows", [failed]))).records
    assert not record.rows[0].ok and record.rows[0].chunks == 0


def fit_quality(capsys, results: Path) -> tuple[int, str, list[str]]:
    code = main(["fit", MODEL, "--vram", "24GiB", "-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0", "--results",
                 str(results)])
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if not line.startswith("llamabench: warning:")]


def test_fit_shows_a_measured_row_and_refuses_a_senseless_one(tmp_path, capsys):
    """fit shows the quality of its lossy KV types from the results file it was given: the measured row as it is, and
    for a row out of range one line naming the line, not "KLD -5.0000"."""
    code, out, err = fit_quality(capsys, write(tmp_path / "good.jsonl", quality()))
    assert code == 0 and "KLD 0.0074" in out, out
    code, out, err = fit_quality(capsys, write(tmp_path / "bad.jsonl", set_at(quality(), "rows.0.kld_mean", -5.0)))
    assert code == 1 and "KLD -5" not in out
    assert len(err) == 1 and "bad.jsonl:1: broken quality record" in err[0] and "kld_mean" in err[0], err


@pytest.mark.parametrize("kind, dotted, value", [
    ("bench", "memory.rss_after_bytes", 2**61),  # more bytes than any machine holds
    ("bench", "memory.rss_before_bytes", 2**62),
    ("fit", "fit.rows.0.parts.kv", 2**61),  # a placement's part: bytes, though not named so
    ("fit", "fit.rows.0.host.weights", 2**61),
    ("fit", "fit.rows.0.decode_ts", 0.0),  # a predicted speed of 0 t/s
])
def test_a_byte_count_or_a_speed_out_of_range_is_a_broken_record(tmp_path, kind, dotted, value):
    path = write(tmp_path / "r.jsonl", real(kind), set_at(real(kind), dotted, value))
    with pytest.raises(jsonl.ResultsFileError, match=rf"r\.jsonl:2: broken {kind} record"):
        read_records(path)


def test_calibrate_refuses_a_file_past_its_cap_by_its_size(tmp_path, capsys):
    """A 192 MB results file was read for minutes (every record structured and checked, about 5 MB a second here):
    a file past the cap is one line before anything is read (a sparse file: no byte of it is)."""
    big = tmp_path / "bench.jsonl"
    with open(big, "wb") as f:
        f.truncate(CALIBRATE_MAX_BYTES + 1)
    assert main(["roofline", MODEL, "--calibrate", str(big)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "is more than --calibrate reads (64 MiB" in err[0], err
    with pytest.raises(SystemExit):
        main(["roofline", "--help"])
    assert "--calibrate reads a results file of 64 MiB at most" in capsys.readouterr().out
