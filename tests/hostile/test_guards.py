"""The doors hostile input comes through, each tested on its own: the output guard, the environment reader,
the plan expander, the metadata reader's bounds and the escaping of file strings.
"""

from __future__ import annotations

import os
import struct

import pytest

from llamabench.cli import main
from llamabench.core.errors import BadModelFile, CatalogError, UsageError
from llamabench.core.safe_text import escaped, escaped_tree
from llamabench.settings import sweep
from llamabench.world import outputs, paths
from llamabench.world.gguf_file import MAX_DECODED_ENTRIES, MAX_KEYS, read_metadata
from llamabench.world.outputs import OutputError

MODEL_ID = "qwen3-30b-a3b"


# the output guard ------------------------------------------------------------------------------
def test_an_input_is_never_an_output(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    outputs.note_input(model)
    with pytest.raises(OutputError, match="is an input of this run"):
        outputs.check_output(model)
    hard = tmp_path / "hard.gguf"  # the same file under another name
    os.link(model, hard)
    with pytest.raises(OutputError, match="is an input"):
        outputs.check_output(hard)


def test_a_deleted_input_does_not_block_a_new_file_on_its_inode(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    outputs.note_input(model)
    model.unlink()
    model.write_bytes(b"y")  # may reuse the inode: it is not the input any more, only if the path still holds it
    reused = tmp_path / "other.json"
    reused.write_bytes(b"z")
    assert outputs.check_output(reused) == reused


def test_a_file_with_no_newline_is_not_read_whole_to_find_records(tmp_path):
    big = tmp_path / "zeros.jsonl"
    with open(big, "wb") as f:
        f.truncate(8 << 30)  # 8 GiB of zeros, sparse: read whole it would not fit the memory bound
    with pytest.raises(OutputError, match="holds no llamabench records"):
        outputs.check_results_file(big)


@pytest.mark.parametrize("make, why", [
    (lambda p: p.symlink_to(p.with_name("target")), "symbolic link"),  # never through a link, even a dangling one
    (lambda p: os.mkfifo(p), "not a regular file"),  # a FIFO would block, and be replaced by a file
    (lambda p: p.mkdir(), "a folder"),
])
def test_links_fifos_and_folders_are_refused(tmp_path, make, why):
    target = tmp_path / "out"
    make(target)
    with pytest.raises(OutputError, match=why):
        outputs.check_output(target)


def test_an_output_under_a_regular_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        outputs.check_output(tmp_path / "f" / "sub" / "out.json")


def test_results_are_appended_only_to_records_or_an_empty_file(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(OutputError, match="holds no llamabench records"):
        outputs.check_results_file(notes)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert outputs.check_results_file(empty) == empty
    torn_first = tmp_path / "r.jsonl"  # a torn line before the records does not hide them
    torn_first.write_text('{"schem\n{"schema": "llamabench/inspect-record/2"}\n')
    assert outputs.check_results_file(torn_first) == torn_first


def test_write_atomically_leaves_the_old_file_when_it_fails(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    target.write_text("old")

    def full(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="No space left on device"):
        outputs.write_atomically(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_cli_refuses_to_write_a_twin_over_its_model(tmp_path, capsys):
    from llamabench.jobs.twin.build import write_twin
    from llamabench.world import catalog

    model = write_twin(catalog.get_entry(MODEL_ID).metadata, tmp_path / "m.gguf").path
    before = model.read_bytes()
    assert main(["twin", str(model), "--out", str(model)]) == 1
    assert "is an input of this run" in capsys.readouterr().err
    assert main(["inspect", str(model), "--results", str(model)]) == 1
    assert model.read_bytes() == before


# the environment ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf", "1e999"])
def test_a_bad_http_timeout_is_one_line_when_used_not_at_import(monkeypatch, value):
    monkeypatch.setenv("LLAMABENCH_HTTP_TIMEOUT", value)
    with pytest.raises(UsageError, match="LLAMABENCH_HTTP_TIMEOUT"):
        paths.http_timeout()
    assert main(["inspect", MODEL_ID, "-c", "4096"]) == 0  # a command that reads nothing remote works


def test_an_empty_cache_dir_is_an_error_not_the_working_directory(monkeypatch):
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", "")
    with pytest.raises(UsageError, match="set but empty"):
        paths.cache_dir()


def test_a_catalog_that_is_not_a_file_is_one_line(tmp_path, monkeypatch):
    os.mkfifo(tmp_path / "fifo")
    for value in (tmp_path, tmp_path / "fifo", tmp_path / "none.toml"):
        monkeypatch.setenv("LLAMABENCH_CATALOG", str(value))
        with pytest.raises(CatalogError):
            paths.catalog_override()


# the plan expander ---------------------------------------------------------------------------------
def test_ranges_are_counted_before_they_expand():
    with pytest.raises(UsageError, match="1,000,000,000 values"):
        sweep.parse_value("n_ctx", "1-1000000000+1", listed=True)
    assert len(sweep.parse_value("n_ctx", "1-1000000000*2", listed=True)) == 30  # a doubling range is short


def test_a_sweep_past_its_bound_gives_the_count():
    values = {"n_ctx": tuple(range(1, 101)), "n_batch": tuple(range(1, 101))}
    with pytest.raises(UsageError, match="10,000 .*100 n_ctx x 100 n_batch"):
        sweep.expand(values)


def test_fit_refuses_a_million_evaluations(capsys):
    code = main(["fit", MODEL_ID, "-c", "1024-1024000+1024", "--vram", ",".join(f"{g}GiB" for g in range(1, 1001))])
    err = capsys.readouterr().err
    assert code == 2 and "fit's evaluations" in err and "1,000 budgets" in err


@pytest.mark.parametrize("argv", [["--poll", "101"], ["--bw-eff", "5"], ["--mmproj", ""]])
def test_values_outside_their_documented_range(argv, capsys):
    command = {"--poll": "bench", "--bw-eff": "roofline", "--mmproj": "fit"}[argv[0]]
    try:
        code = main([command, MODEL_ID, *argv])
    except SystemExit as exc:  # argparse's own exit, one line (cli.OneLineParser)
        code = exc.code
    assert code == 2
    assert capsys.readouterr().err.count("\n") == 1


# the metadata reader's bounds ----------------------------------------------------------------------
def _gguf(path, entries: list[bytes], n_kv: int | None = None):
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries) if n_kv is None else n_kv) + b"".join(entries))
    return path


def _key(name: str) -> bytes:
    raw = name.encode()
    return struct.pack("<Q", len(raw)) + raw


def test_too_many_keys_are_refused_before_reading(tmp_path):
    path = _gguf(tmp_path / "k.gguf", [_key(f"k{i}") + struct.pack("<II", 4, i) for i in range(MAX_KEYS + 1)])
    with pytest.raises(BadModelFile, match="keys"):
        read_metadata(path)


def test_many_short_arrays_are_refused_before_they_are_decoded(tmp_path):
    n = MAX_DECODED_ENTRIES // 1000 + 1
    arrays = [_key(f"a{i}") + struct.pack("<IIQ", 9, 4, 1000) + b"\0" * 4000 for i in range(n)]
    with pytest.raises(BadModelFile, match="array"):
        read_metadata(_gguf(tmp_path / "a.gguf", arrays))


def test_proc_self_mem_is_one_line():
    with pytest.raises(BadModelFile, match="cannot be read|not a GGUF"):
        read_metadata("/proc/self/mem")


# escaping ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, shown", [
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # retitles the terminal
    ("ok\nall match", "ok\\x0aall match"),  # forges a line
    ("\u202eeman", "\\u202eeman"),  # reverses what the terminal shows
    ("a\ud800b", "a\\ud800b"),  # a lone surrogate (JSON "\\ud800"): no encoder could print or write it
    ("Qwen3.5 35B-A3B é", "Qwen3.5 35B-A3B é"),  # ordinary text as it is
])
def test_control_characters_are_escaped(raw, shown):
    assert escaped(raw) == shown
    assert escaped_tree({"k": [raw]}) == {"k": [shown]}
