"""Results files travel between machines: every value read from one is untrusted. A hostile label stays a
folder inside --out-dir, a senseless value is a broken record naming its line, a string reaches the terminal
escaped, a report folder is never left half written, and a projector's values are bounded."""

from __future__ import annotations

import copy
import errno
import json
import math
import os
import re
from pathlib import Path

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core import serial
from llamabench.core.errors import BadModelFile, LlamabenchError
from llamabench.jobs.twin.writer import TensorSpec, write_gguf
from llamabench.model.metadata import ModelMetadata
from llamabench.model.projector import projector_from_metadata
from llamabench.records import records
from llamabench.records.roofline import RooflineRecord
from llamabench.reporting.build import FOLDER_NAME_MAX, folder_name, report_folder
from llamabench.settings.params import Params
from tests.support import REPO

REAL = REPO / "reports" / "qwen3-5-35b-a3b" / "results.jsonl"
MODEL = "qwen3-5-35b-a3b"


def real_records() -> list[dict]:
    """The newest run of the tracked example: inspect, verify, fit, then pp and tg at depths 0 and 2048."""
    lines = [json.loads(line) for line in REAL.read_text().splitlines() if line.strip()]
    return lines[7:]


TG_DEEP = 6  # the index of the tg record at depth 2048 in real_records()


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def set_at(record: dict, dotted: str, value) -> dict:
    record = copy.deepcopy(record)
    *parents, last = dotted.split(".")
    node = record
    for key in parents:
        node = node[key]
    node[last] = value
    return record


def one_error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("llamabench: warning:")]
    assert len(err) == 1 and err[0].startswith("llamabench: error: "), err
    return err[0]


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


# 1: a label is one safe folder name ------------------------------------------------------------
HOSTILE_LABELS = ["../../escaped", "/tmp/absolute-label", ".", "..", "", "a\x00b", "x" * 300, "é" * 200,
                  "-rf", ".hidden", "a/b", "a\\b", "\x1b[2J", "con", "a-b"]


def test_a_label_becomes_one_safe_folder_name():
    names = [folder_name(label) for label in HOSTILE_LABELS]
    for label, name in zip(HOSTILE_LABELS, names):
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name), (label, name)
        assert name not in (".", "..") and len(name) <= FOLDER_NAME_MAX
    assert len(set(names)) == len(names)  # none collapse onto another
    assert folder_name("qwen3-5-35b-a3b") == "qwen3-5-35b-a3b"  # a clean label is kept as it is
    assert folder_name("a/b") != folder_name("a-b") and folder_name("a/b") != folder_name("a:b")


def test_a_link_out_of_the_parent_is_refused(tmp_path):
    (tmp_path / "parent").mkdir()
    (tmp_path / "parent" / "evil").symlink_to(tmp_path)
    with pytest.raises(LlamabenchError, match="outside"):
        report_folder(tmp_path / "parent", "evil")


def test_hostile_labels_stay_inside_the_out_dir(tmp_path, capsys):
    inspect = real_records()[0]
    rows = [inspect] + [set_at(inspect, "model.label", label) for label in HOSTILE_LABELS + [str(tmp_path / "abs")]]
    results = write(tmp_path / "results.jsonl", rows)
    out = tmp_path / "w" / "a" / "b" / "out"
    before = files_under(tmp_path) - {results}
    assert main(["report", str(results), "--out-dir", str(out)]) == 0
    created = files_under(tmp_path) - before - {results}
    assert created and all(p == out or out in p.parents or p in out.parents for p in created), sorted(created)
    folders = {p.name for p in out.iterdir()}
    assert len(folders) == len(rows) and MODEL in folders
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "abs").exists()
    assert "\x1b" not in capsys.readouterr().out


def test_a_single_hostile_label_stays_in_the_reports_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LLAMABENCH_REPORTS_DIR", str(tmp_path / "reports"))
    results = write(tmp_path / "results.jsonl", [set_at(real_records()[0], "model.label", "../../../escaped")])
    assert main(["report", str(results)]) == 0
    [folder] = (tmp_path / "reports").iterdir()
    assert folder.name.startswith("escaped-") and (folder / "record.json").is_file()
    assert not (tmp_path / "escaped").exists()


# 2: values read back ---------------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
BAD_VALUES = [("samples_ns", [0]), ("samples_ns", [-1852310947]), ("samples_ns", [NAN]), ("samples_ns", []),
              ("test.n_tokens", 0), ("test.depth", -1), ("test.depth", 2**40), ("roofline.mbu", NAN),
              ("roofline.achieved_gbps", -0.2), ("roofline.weights_bytes", 0),
              ("roofline.full_gqa_attention_flops", None),
              ("machine.memory_bandwidth.peak_gbps", INF), ("repetitions", 3.7), ("test.n_tokens", True),
              ("model.size_bytes", 10**400), ("model.name", [1, 2]), ("model.label", None), ("params.n_ctx", "4096"),
              ("allocations.kv_buffers_mib", [1]), ("allocations.kv_buffers_mib", {"CPU": -2560.0}), ("test", {}),
              ("test.kind", "xx"), ("params.flash_attn", 1), ("memory.rss_after_bytes", -5)]


def mutated(tmp_path: Path, dotted: str, value) -> Path:
    rows = real_records()
    if dotted == "samples_ns" and value == []:  # no samples and no reason: neither measured nor failed
        rows[TG_DEEP] = set_at(rows[TG_DEEP], "reason", None)
    rows[TG_DEEP] = set_at(rows[TG_DEEP], dotted, value)
    return write(tmp_path / "results.jsonl", rows)


@pytest.mark.parametrize("dotted, value", BAD_VALUES, ids=[f"{d}={v!r}"[:40] for d, v in BAD_VALUES])
def test_a_senseless_value_is_a_broken_record_naming_its_line(tmp_path, capsys, dotted, value):
    results = mutated(tmp_path, dotted, value)
    for argv in (["report", str(results), "--out-dir", str(tmp_path / "out")],
                 ["roofline", MODEL, "--calibrate", str(results)]):
        assert main(argv) == 1, argv
        line = one_error(capsys)
        assert f"{results}:{TG_DEEP + 1}: broken bench record" in line and len(line) < 1000, line
    assert not (tmp_path / "out").exists()


def test_bare_nan_and_infinity_in_the_json_are_refused(tmp_path, capsys):
    rows = real_records()
    results = write(tmp_path / "results.jsonl", rows)
    text = results.read_text().splitlines()
    text[TG_DEEP] = text[TG_DEEP].replace('"mbu": 0.', '"mbu": NaN, "x": 0.', 1)
    results.write_text("\n".join(text) + "\n")
    assert "NaN" in results.read_text()
    assert main(["roofline", MODEL, "--calibrate", str(results)]) == 1
    assert "got NaN @ $.roofline.mbu" in one_error(capsys)


def test_strict_kinds_at_the_serializer():
    for data, field in (({"n_ctx": 3.7}, "n_ctx"), ({"n_ctx": True}, "n_ctx"), ({"n_ctx": 2**63}, "n_ctx"),
                        ({"type_k": [1, 2]}, "type_k"), ({"flash_attn": "yes"}, "flash_attn"),
                        ({"tensor_split": "1,2"}, "tensor_split"), ({"tensor_split": [INF]}, "tensor_split")):
        with pytest.raises(serial.ShapeError, match=re.escape(f"$.{field}")):
            serial.from_dict(Params, data)
    assert serial.from_dict(Params, {"n_ctx": 4096, "tensor_split": [1, 2.5]}).tensor_split == (1.0, 2.5)


def test_an_infinite_compute_is_read_back():
    """--bandwidth without --tflops: attention compute is not limiting, stored as Infinity, read back as such."""
    record = lb.roofline(MODEL, bandwidth=900, n_ctx=4096)
    assert record.speed_model.machine.fp32 == math.inf
    data = json.loads(json.dumps(record.to_dict()))
    assert records.from_dict(data) == record
    with pytest.raises(serial.ShapeError, match="bandwidth"):
        records.from_dict(set_at(data, "speed_model.machine.bandwidth", INF))
    with pytest.raises(serial.ShapeError, match="must be positive"):
        records.from_dict(set_at(data, "speed_model.machine.bandwidth", -2e8))
    assert isinstance(records.from_dict(data), RooflineRecord)


def test_calibration_on_a_deeper_faster_run_stays_positive(tmp_path, capsys):
    rows = real_records()
    rows[TG_DEEP] = set_at(rows[TG_DEEP], "samples_ns", [1000, 1000])  # 16M t/s at depth 2048
    assert main(["roofline", MODEL, "--calibrate", str(write(tmp_path / "r.jsonl", rows))]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\bnan\b|-\d[\d.,]* (t/s|GB/s)|\s-\d[\d.]*\s", out, re.I), out


# 3: strings reach the terminal escaped ---------------------------------------------------------
def test_escape_sequences_and_forged_lines_are_escaped(tmp_path, capsys):
    rows = [set_at(set_at(r, "model.name", "Q\x1b]0;title\x07\x1b[2J"), "model.label", "m\nFORGED all match")
            for r in real_records()]
    results = write(tmp_path / "results.jsonl", rows)
    read = lb.read_records(results)
    assert read.records[0].model.name == "Q\\x1b]0;title\\x07\\x1b[2J"
    assert main(["report", str(results), "--out-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert not any(line.startswith("FORGED") for line in out.out.splitlines())
    assert "\x1b" not in (tmp_path / "out" / "report.md").read_text()


def test_an_escape_in_the_schema_version_is_escaped_in_the_warning(tmp_path):
    rows = real_records()[:1] + [set_at(real_records()[0], "schema", "llamabench/inspect-record/9\x1b[2J")]
    read = lb.read_records(write(tmp_path / "r.jsonl", rows))
    assert read.skipped == 1 and "\x1b" not in read.warnings[0] and "\\x1b" in read.warnings[0]


# 4: a report folder is written whole or not at all ---------------------------------------------
def test_an_out_dir_under_a_regular_file_is_one_line(tmp_path, capsys):
    results = write(tmp_path / "r.jsonl", real_records()[:1])
    (tmp_path / "file").write_text("x")
    assert main(["report", str(results), "--out-dir", str(tmp_path / "file" / "out")]) == 1
    assert str(tmp_path / "file" / "out") in one_error(capsys)


def test_a_full_disk_leaves_the_old_file_and_no_temporary(tmp_path, capsys, monkeypatch):
    results = write(tmp_path / "r.jsonl", real_records()[:1])
    out = tmp_path / "out"
    out.mkdir()
    (out / "record.json").write_text("OLD")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert main(["report", str(results), "--out-dir", str(out)]) == 1
    line = one_error(capsys)
    assert "No space left on device" in line and str(out / "record.json") in line
    monkeypatch.undo()
    assert (out / "record.json").read_text() == "OLD"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_a_report_is_never_written_over_its_results_file(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    results = write(out / "record.json", real_records()[:1])
    before = results.read_bytes()
    assert main(["report", str(results), "--out-dir", str(out)]) == 1
    assert "input" in one_error(capsys)
    assert results.read_bytes() == before


def test_a_plot_that_cannot_be_written_is_one_line(tmp_path, capsys, monkeypatch):
    results = write(tmp_path / "r.jsonl", real_records()[:1])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "kv_vs_context.png").mkdir()  # a folder where the plot goes
    assert main(["report", str(results), "--out-dir", str(tmp_path / "out")]) == 1
    assert "kv_vs_context.png" in one_error(capsys)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


# 5: projectors ---------------------------------------------------------------------------------
def projector(path: Path, **vision) -> Path:
    values = {"image_size": 896, "patch_size": 14, "embedding_length": 64, "feed_forward_length": 128,
              "block_count": 1, "attention.head_count": 4} | vision
    keys = {"general.architecture": "clip", "clip.has_vision_encoder": True,
            **{f"clip.vision.{k}": v for k, v in values.items() if v is not None}}
    write_gguf(path, "clip", keys, [TensorSpec("v.post_ln.weight", (64,), "f32", "zeros")])
    return path


def clip(**keys) -> ModelMetadata:
    values = {"image_size": 896, "patch_size": 14, "embedding_length": 1152, "feed_forward_length": 4304,
              "attention.head_count": 16} | keys
    return ModelMetadata("p.gguf", "clip", {f"clip.vision.{k}": v for k, v in values.items()})


@pytest.mark.parametrize("keys", [{"patch_size": 32, "image_size": 16}, {"image_size": 4294967295},
                                  {"image_size": 16385}, {"patch_size": 0}, {"attention.head_count": 0},
                                  {"attention.head_count": 10**6}, {"embedding_length": 2**40},
                                  {"feed_forward_length": -1}, {"image_size": None}, {"patch_size": 1.5},
                                  {"image_size": True}])
def test_a_projector_out_of_range_is_refused(keys):
    with pytest.raises(BadModelFile):
        projector_from_metadata(clip(**keys))


def test_a_real_projector_is_estimated():
    p = projector_from_metadata(clip())
    assert p.n_patches == 64**2 and p.compute_bytes > 0


def test_fit_refuses_a_projector_of_no_patch_in_one_line(tmp_path, capsys):
    path = projector(tmp_path / "p.gguf", image_size=16, patch_size=32)
    assert main(["fit", MODEL, "-c", "4096", "-ctk", "f16", "-ctv", "f16", "--mmproj", str(path)]) == 1
    assert "patch_size 32 is larger than clip.vision.image_size 16" in one_error(capsys)
    path = projector(tmp_path / "q.gguf", image_size=4294967295)
    assert main(["fit", MODEL, "-c", "4096", "-ctk", "f16", "-ctv", "f16", "--mmproj", str(path)]) == 1
    assert "image_size from 1 to 8,192" in one_error(capsys)
