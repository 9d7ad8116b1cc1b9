"""The command line: shared option spellings, one-line usage errors, plans. No llama.cpp runs here."""

from __future__ import annotations

import json

import pytest

from llamabench.cli import main
from llamabench.records.roofline import RooflineRecord


def test_dry_run_prints_the_plan(capsys):
    assert main(["bench", "qwen3-5-35b-a3b", "-c", "4096,8192", "-d", "0,1024", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 cells x 4 tests" in out and "pp512 @ d1024" in out


@pytest.mark.parametrize("argv", [
    ["inspect", "qwen3-30b-a3b", "-b", "256", "-ub", "128"],
    ["inspect", "qwen3-30b-a3b", "--batch-size", "256", "--ubatch-size", "128"],
    ["inspect", "qwen3-30b-a3b", "--n-batch", "256", "--n-ubatch", "128"],  # the old spellings stay as aliases
])
def test_batch_spellings_agree(argv, capsys):
    assert main(argv + ["-o", "json"]) == 0
    assert '"n_ubatch": 128' in capsys.readouterr().out


def test_json_is_an_output_format_everywhere(capsys):
    assert main(["inspect", "qwen3-30b-a3b", "--json"]) == 0
    as_flag = capsys.readouterr().out
    assert main(["inspect", "qwen3-30b-a3b", "-o", "json"]) == 0
    as_option = capsys.readouterr().out
    # the record's timestamp is the second it was made: the two runs may straddle a second
    assert _without_timestamp(as_option) == _without_timestamp(as_flag)


def _without_timestamp(report: str) -> dict:
    record = json.loads(report)
    assert record.pop("timestamp")
    return record


@pytest.mark.parametrize("argv, needle", [
    (["inspect"], "MODEL"),
    (["inspect", "qwen3-30b-a3b", "--nope"], "unrecognized arguments"),
    (["bench", "qwen3-30b-a3b", "-c", "4294967552"], "uint32"),
    (["bench", "qwen3-30b-a3b", "-b", "4294967296"], "larger than llama.cpp takes"),
    (["fit", "qwen3-30b-a3b", "--vram", "1e999"], "is not a size"),
    (["fit", "qwen3-30b-a3b", "--vram", "99999999999999"], "larger than any machine"),
    (["twin", "qwen3-30b-a3b", "--seed", "1"], "unrecognized arguments"),  # a twin's weights are all zero
    (["nosuchcommand"], "invalid choice"),
])
def test_usage_errors_are_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "usage:" not in err, err


@pytest.mark.parametrize("argv, needle", [
    (["--vram", "-3"], "must be positive"),
    (["--vram", "lots"], "is not a size"),
    (["--vram", "0"], "must be positive"),
    (["--reserve", "a bit"], "is not a size"),
    (["-ctk", "f16,q8_0", "-ctv", "f16,q8_0,q4_0"], "same length"),
])
def test_bad_fit_budgets_get_one_line(argv, needle, capsys):
    try:
        code = main(["fit", "qwen3-30b-a3b", *argv])
    except SystemExit as exc:  # argparse's usage error, one line
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow  # writes the full-size shape twin once
def test_roofline_for_a_card(capsys):
    assert main(["roofline", "qwen3-5-35b-a3b", "--card", "rtx-4090", "--ctx", "131072", "--json"]) == 0
    record = RooflineRecord.from_dict(json.loads(capsys.readouterr().out))
    depths = {r.n_depth: r for r in record.rows if r.n_gen}  # tg128 @ each depth
    assert sorted(depths) == [0, 8192, 16384, 32768, 65536, 131072]
    assert [r.test for r in record.rows[:2]] == ["pp512", "tg128"]  # llama-bench's defaults, pp then tg
    deep = depths[131072]
    middle = 131072 + 64  # tg128's middle token
    assert deep.kv_read_bytes == 20480 * middle  # 10 cached layers x 2,048 B per cell
    assert deep.full_gqa_bytes_per_token - deep.bytes_per_token == (81920 - 20480) * middle - deep.recurrent_bytes
    assert deep.avg_ts > 2 * deep.full_gqa_ts  # the hybrid layout's gain at 128k


def test_roofline_calibrates_with_calibrate_not_results(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["roofline", "qwen3-30b-a3b", "--card", "rtx-4090", "--results", str(tmp_path / "bench.jsonl")])
    assert exc.value.code == 2 and "--results" in capsys.readouterr().err
    assert not (tmp_path / "bench.jsonl").exists()  # nothing appended to the user's bench file
    assert main(["roofline", "qwen3-30b-a3b", "--calibrate", str(tmp_path / "none.jsonl")]) == 2
    assert "no such results file" in capsys.readouterr().err


def test_an_old_results_file_says_why_it_holds_nothing(tmp_path, capsys):
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"schema": "llamabench/bench-record/1", "key": "c4096|pp512"}) + "\n")
    assert main(["report", str(old), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "schema version 1" in err and "old.jsonl:1" in err


def test_json_carries_a_summary_for_scripts(capsys):
    assert main(["inspect", "qwen3-5-35b-a3b", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert (summary["kv_bytes_per_token"] == 20480 and summary["reduction"] == 4.0
            and summary["kv_bytes"] == 2560 * 2**20)
