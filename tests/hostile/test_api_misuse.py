"""The Python API as a programmer misuses it (issue 33): every failure is a LlamabenchError, or a TypeError for a
wrong call; on/off keywords are parsed, never taken by truthiness."""

from __future__ import annotations

from pathlib import Path

import pytest

import llamabench as lb
from llamabench.core.errors import UsageError
from llamabench.jobs.arguments import flag


@pytest.mark.parametrize("value, meant", [
    (True, True), (False, False), ("on", True), ("off", False),  # "off" is off, not a non-empty string
    ("false", False), (0, False), (1, True),
])
def test_on_off_keywords_are_parsed_not_taken_by_truthiness(value, meant):
    assert flag("cpu_only", value) is meant


@pytest.mark.parametrize("value", ["maybe", 2, 0.5, None, [], object()])
def test_anything_else_is_a_usage_error(value):
    with pytest.raises(UsageError, match="is not on or off"):
        flag("verify", value)


def test_dry_run_off_as_a_string_plans_and_off_means_off():
    plan = lb.bench("qwen3-30b-a3b", n_prompt=16, n_gen=0, dry_run="on")
    assert plan.dry_run and plan.records == ()


def test_a_path_is_a_model():
    assert lb.inspect(Path("qwen3-30b-a3b"), n_ctx=4096).kv_bytes > 0  # not an AttributeError


@pytest.mark.parametrize("model", [42, None, b"qwen3-30b-a3b", ["a.gguf"]])
def test_a_model_of_the_wrong_type_is_a_type_error(model):
    with pytest.raises(TypeError, match="model must be a str or a path"):
        lb.inspect(model)


def test_an_empty_list_of_cards_is_a_usage_error_not_a_value_error():
    with pytest.raises(UsageError, match="vram: empty list"):
        lb.fit("qwen3-30b-a3b", vram=[])


def test_a_reserve_larger_than_any_machine_is_refused():
    from llamabench.settings.budget import reserve
    with pytest.raises(UsageError, match="larger than any machine"):
        reserve(2**70)  # it would write a record that cannot be read back


def test_from_dict_of_garbage_is_a_llamabench_error():
    from llamabench.records.records import from_dict
    with pytest.raises(lb.LlamabenchError):
        from_dict({"schema": "llamabench/fit-record/2", "fit": 7})
    for record_type in (lb.FitRecord, lb.BenchRecord, lb.InspectRecord, lb.VerifyRecord, lb.RooflineRecord):
        for garbage in (None, [], "x", 7):
            with pytest.raises(lb.LlamabenchError):
                record_type.from_dict(garbage)


def test_a_record_that_would_not_read_back_is_never_written(tmp_path):
    """Whatever door a senseless number comes through, the results file stays readable: append refuses it."""
    from dataclasses import replace

    from llamabench.records.records import RecordRefused, append, read_records
    from tests.pure.test_records import bench_record

    path = tmp_path / "r.jsonl"
    good = append(path, bench_record())
    with pytest.raises(RecordRefused, match="would not read back"):
        append(path, replace(bench_record(), samples_ns=(-5,)))
    assert read_records(path).records == (good,)


def run(capsys, argv):
    from llamabench.cli import main
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_roofline_json_has_no_infinity(capsys):
    code, out, _ = run(capsys, ["roofline", "qwen3-5-35b-a3b", "--bandwidth", "900", "-c", "8192", "-o", "json"])
    assert code == 0 and "Infinity" not in out and "NaN" not in out  # a bandwidth alone: no compute bound


def test_a_results_file_holds_no_infinity_and_reads_back(tmp_path):
    from llamabench.records.records import read_records

    path = tmp_path / "r.jsonl"
    lb.roofline("qwen3-5-35b-a3b", bandwidth=900, n_ctx=8192, results=path)
    text = path.read_text()
    assert "Infinity" not in text and "NaN" not in text
    (record,) = read_records(path).records
    assert record.speed_model.machine.fp32 == float("inf")  # null reads back as the unbounded compute it stands for


@pytest.mark.parametrize("threads", ["2147483648", "4294967295", "513"])
def test_threads_past_ggmls_limit_are_refused_before_a_child_crashes(capsys, threads):
    code, _, err = run(capsys, ["bench", "qwen3-30b-a3b", "-t", threads, "--dry-run"])
    assert code == 2 and "GGML_MAX_N_THREADS" in err


@pytest.mark.parametrize("extra", [["--vram", "24GiB"], ["--reserve", "1GiB"], ["-ts", "1"], ["-sm", "none"],
                                   ["-mg", "1"], ["-md", "qwen3-5-35b-a3b", "-ngld", "5"]])
def test_cpu_only_refuses_card_options_it_would_ignore(capsys, extra):
    code, _, err = run(capsys, ["fit", "qwen3-5-35b-a3b", "--cpu-only", "--ram", "64GiB", "-c", "8192", *extra])
    assert code == 2 and "--cpu-only uses no card" in err


@pytest.mark.parametrize("extra", [["-ngld", "0"], ["-devd", "none"]])
def test_cpu_only_takes_the_draft_flags_that_keep_it_in_ram(capsys, extra):
    code, _, err = run(capsys, ["fit", "qwen3-5-35b-a3b", "--cpu-only", "--ram", "64GiB", "-c", "8192", "--runtime",
                                "llama-server", "-md", "qwen3-5-35b-a3b", *extra])
    assert code == 0, err


def test_a_file_name_with_a_newline_and_an_escape_is_one_escaped_line(capsys, tmp_path):
    name = str(tmp_path / "a\nb\x1b[31m.gguf")
    code, _, err = run(capsys, ["inspect", name])
    assert code == 1 and err.count("\n") == 1 and "\x1b" not in err and "a\\x0ab\\x1b[31m.gguf" in err


def test_a_path_that_is_not_utf8_is_one_line(capsys, tmp_path):
    path = tmp_path / "a\udcffb.jsonl"  # the bytes a\xffb from the file system
    path.write_text("x")
    code, _, err = run(capsys, ["report", str(path)])
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("split", ["nan,1", "inf,1", "1e-50,1e-50", "1e-50,0", "-1,2", "0,0"])
def test_a_split_llama_cpp_would_not_read_is_refused(capsys, split):
    code, _, err = run(capsys, ["fit", "qwen3-5-35b-a3b", "--vram", "24GiB+24GiB", "-ts", split, "-c", "8192"])
    assert code == 2 and "-ts" in err


@pytest.mark.parametrize("size", ["0.0000000001", "0", "-1GiB", "nan", "inf"])
def test_a_card_of_no_size_is_refused(capsys, size):
    code, _, err = run(capsys, ["fit", "qwen3-5-35b-a3b", "--vram", size, "-c", "8192"])
    assert code == 2 and "--vram" in err


def test_a_card_smaller_than_its_reserve_is_recorded_as_over(gemma, tmp_path):
    """A budget below 0 after the reserve is a fact of the card, not a broken record: the verified fit is written
    and reads back (the record check before writing must not refuse it)."""
    from llamabench.records.records import read_records

    path = tmp_path / "r.jsonl"
    record = lb.fit(str(gemma), vram="256MiB", reserve="300MiB", n_gpu_layers=[0], n_ctx=[2048], type_k="f16",
                    type_v="f16", verify=True, emulate=True, results=path)
    (back,) = read_records(path).records
    assert back.verify.placements[0].budget < 0 and back == record
