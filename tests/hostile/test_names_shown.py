"""A user's file and folder names as the tool shows them (issue: a path that is not UTF-8 gave a traceback in
`report` and `demo`; newlines and ESC in file names were printed raw).

Real runs of the CLI in a child process, stdout and stderr read as strict UTF-8 (PYTHONIOENCODING=utf-8:strict:
a terminal's, where a lone surrogate cannot be printed): every name is one line, its control characters and
non-UTF-8 bytes escaped; a printed command still runs on the very file; the text files written are UTF-8.
"""

from __future__ import annotations

import ast
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from llamabench.core.safe_text import python_str, shell_word, shown_path

HOSTILE_NAME = "g\x1b[31m\nFORGED.gguf"  # an escape sequence, and a newline that would forge a line
NOT_UTF8_FOLDER = "d\udcffe"  # the bytes d\xffe from the file system, as Python holds them
SHOWN_NAME = "g\\x1b[31m\\x0aFORGED.gguf"


def llamabench(*argv: str, timeout: float = 120) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one real run; the streams must be UTF-8, and hold no raw control character
    (ESC, BEL) and no forged line, whatever the names in the run."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    env.pop("LLAMABENCH_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "llamabench.cli", *argv], capture_output=True, env=env,
                          timeout=timeout)
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")  # strict: raises on a raw \xff
    for name, text in (("stdout", out), ("stderr", err)):
        assert "Traceback" not in text, f"{name}: {text[-2000:]}"
        assert "\x1b" not in text and "\x07" not in text, f"a raw control character reached {name}"
        assert not any(line.startswith("FORGED") for line in text.splitlines()), f"a forged line reached {name}"
    return proc.returncode, out, err


def _linked(gemma: Path, folder: Path) -> Path:
    folder.mkdir()
    model = folder / HOSTILE_NAME
    model.symlink_to(gemma)
    return model


@pytest.fixture
def hostile_model(gemma, tmp_path) -> Path:
    """The real Gemma 3 270M (a link to it) named with ESC and a newline, in a UTF-8 folder."""
    return _linked(gemma, tmp_path / "models")


@pytest.fixture
def not_utf8_model(gemma, tmp_path) -> Path:
    """The same name in a folder whose name is not UTF-8."""
    return _linked(gemma, tmp_path / NOT_UTF8_FOLDER)


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _nameless_gguf(path: Path) -> Path:
    """A GGUF v3 header with the keys `inspect` needs and no general.name: its name is its path."""
    keys = [(_gguf_string("general.architecture"), struct.pack("<I", 8) + _gguf_string("llama"))]
    keys += [(_gguf_string(f"llama.{key}"), struct.pack("<II", 4, value)) for key, value in (
        ("block_count", 4), ("context_length", 4096), ("embedding_length", 256), ("attention.head_count", 4),
        ("attention.head_count_kv", 2))]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(keys)) + b"".join(k + v for k, v in keys))
    return path


@pytest.mark.parametrize("text", ["/tmp/pytest-of-root/pytest-3/test_fit0/model.gguf", "tiny.gguf",
                                  "hf://owner/repo/model-Q4_K_M.gguf", "-np", "10.0.0.2:50052,10.0.0.3:50052"])
def test_an_ordinary_path_is_printed_as_it_was(text):
    # the printed commands stay byte-identical for every plain path and flag
    assert shell_word(text) == text and python_str(text) == f'"{text}"' and shown_path(text) == text


def test_inspect_shows_the_name_escaped_on_one_line(hostile_model):
    code, out, _ = llamabench("inspect", str(hostile_model), "-c", "4096")
    assert code == 0
    assert out.splitlines()[0].endswith(f", from {shown_path(hostile_model)}")
    assert f"models/{SHOWN_NAME}" in out


def test_fit_prints_a_command_that_runs_on_the_very_file(not_utf8_model):
    code, out, _ = llamabench("fit", str(not_utf8_model), "-c", "4096", "--vram", "2GiB")
    assert code == 0
    word = re.search(r"llama-server -m (\$'(?:[^'\\]|\\.)*') -c 4096", out)[1]
    assert SHOWN_NAME in word  # readable: the same escapes as everywhere else
    shell = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True)
    assert shell.stdout == os.fsencode(not_utf8_model)  # bash reads back the file's own bytes


def test_the_llama_call_names_the_very_file(not_utf8_model):
    code, out, _ = llamabench("fit", str(not_utf8_model), "-c", "4096", "--vram", "2GiB",
                              "--runtime", "llama-cpp-python")
    assert code == 0
    literal = re.search(r"llama_cpp\.Llama\(model_path=(\"(?:[^\"\\]|\\.)*\"), n_ctx=", out)[1]
    assert os.fsencode(ast.literal_eval(literal)) == os.fsencode(not_utf8_model)


def test_verify_names_the_file_it_ran_escaped(hostile_model):
    code, out, _ = llamabench("verify", str(hostile_model), "-c", "2048")
    assert code == 0
    assert f"no_alloc dry run of {shown_path(hostile_model)}\n" in out  # the whole name on the line


def test_report_of_results_in_a_folder_that_is_not_utf8(not_utf8_model):
    results = not_utf8_model.parent / "results.jsonl"
    assert llamabench("inspect", str(not_utf8_model), "-c", "4096", "--results", str(results))[0] == 0
    json.loads(results.read_text(encoding="utf-8").splitlines()[0])  # the record: UTF-8 (ASCII) JSON
    out_dir = not_utf8_model.parent / "report"
    code, out, _ = llamabench("report", str(results), "--out-dir", str(out_dir))
    assert code == 0
    assert f"wrote 4 files to {shown_path(out_dir)}" in out
    report = (out_dir / "report.md").read_bytes().decode("utf-8")  # strict: valid UTF-8
    assert f"`{shown_path(results)}`" in report and "\x1b" not in report


def test_a_file_without_general_name_is_named_by_its_escaped_path(tmp_path):
    folder = tmp_path / NOT_UTF8_FOLDER
    folder.mkdir()
    model = _nameless_gguf(folder / HOSTILE_NAME)
    results = folder / "results.jsonl"
    code, out, _ = llamabench("inspect", str(model), "-c", "4096", "--results", str(results))
    assert code == 0 and out.startswith(f"{shown_path(model)} (llama), 4 layers")
    code, out, _ = llamabench("inspect", str(model), "-c", "4096", "-o", "json")
    assert code == 0 and json.loads(out)["model"]["path"] == str(model)  # JSON keeps the path exact
    code, _, _ = llamabench("report", str(results), "--out-dir", str(folder / "report"))
    assert code == 0
    assert (folder / "report" / "report.md").read_bytes().decode("utf-8").startswith(f"# {shown_path(model)}: ")


def test_demo_into_a_folder_that_is_not_utf8(not_utf8_model, tmp_path):
    out_dir = tmp_path / "out\udcff"
    code, out, err = llamabench("demo", str(not_utf8_model), "-c", "512", "--depths", "0", "-p", "16", "-n", "4",
                                "-r", "1", "--vram", "1GiB", "--out-dir", str(out_dir), timeout=300)
    assert code == 0, err
    assert f"tests recorded in {shown_path(out_dir / 'results.jsonl')}" in err
    assert f"files to {shown_path(out_dir)}" in out and f"open {shown_path(out_dir / 'report.md')}" in out
    (out_dir / "report.md").read_bytes().decode("utf-8")
