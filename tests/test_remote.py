"""Remote GGUF headers over HTTP range requests, hf:// paths, and split sets, against a local server."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import real_model
from http_server import FileServer
from llamabench import catalog
from llamabench.cli import main
from llamabench.fit.advice import llama_server_command
from llamabench.gguf_file import read_metadata
from llamabench.results.records import FitRecord, InspectRecord
from llamabench.twin.projector import write_projector
from llamabench.twin.build import write_twin
from llamabench.twin.split import write_split


def inspect_json(capsys, model: str, *extra):
    """`inspect --json` read back as its record: the inspection, less the path or URL given."""
    assert main(["inspect", model, "--json", "-c", "8192", *extra]) == 0
    record = InspectRecord.from_dict(json.loads(capsys.readouterr().out))
    return replace(record.inspection, source="")


def fit_json(capsys, argv) -> FitRecord:
    assert main(["fit", *argv, "--json"]) == 0
    return FitRecord.from_dict(json.loads(capsys.readouterr().out))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    twin = write_twin(catalog.get_entry("qwen3-5-35b-a3b").metadata, root / "qwen35-twin.gguf").path
    split_dir = root / "split"
    split_dir.mkdir()
    write_split(twin, split_dir, 3)
    cut = root / "cut.gguf"
    cut.write_bytes(twin.read_bytes()[:3000])
    with FileServer(root) as server:
        yield server, root


def test_inspect_url_equals_inspect_file(served, capsys):
    server, root = served
    local = inspect_json(capsys, str(root / "qwen35-twin.gguf"))
    assert inspect_json(capsys, f"{server.url}/files/qwen35-twin.gguf") == local
    split = inspect_json(capsys, f"{server.url}/files/split/qwen35-twin-00001-of-00003.gguf")
    assert split == local  # the split set reads as the one file it was cut from
    assert inspect_json(capsys, str(root / "split" / "qwen35-twin-00001-of-00003.gguf")) == local


def test_hf_path_through_a_local_endpoint(served, capsys, monkeypatch):
    server, root = served
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    local = inspect_json(capsys, str(root / "qwen35-twin.gguf"))
    assert inspect_json(capsys, "hf://someone/some-repo/qwen35-twin.gguf@main") == local


def test_only_the_header_of_a_large_file_is_read(served, capsys, tmp_path):
    server, root = served
    from llamabench.twin.shape import write_shape_twin

    big = write_shape_twin(catalog.get_entry("qwen3-5-35b-a3b").metadata, root / "big.gguf")  # 19.6 GB, sparse
    before = server.served.bytes_sent
    assert main(["inspect", f"{server.url}/files/big.gguf", "-o", "json"]) == 0
    read = server.served.bytes_sent - before
    assert read < 0.02 * big.stat().st_size, read
    assert "fetched" in capsys.readouterr().err
    big.unlink()


@pytest.mark.parametrize("path, needle", [
    ("/norange/qwen35-twin.gguf", "ignores HTTP range requests"),
    ("/loop", "redirect loop"),
    ("/secret/x.gguf", "HTTP 401"),
    ("/files/missing.gguf", "HTTP 404"),
    ("/files/cut.gguf", "truncated"),
    ("/slow", "no answer within"),
])
def test_each_failure_is_one_line_naming_the_url(served, capsys, monkeypatch, path, needle):
    server, _ = served
    monkeypatch.setattr("llamabench.remote.TIMEOUT_S", 1.0)
    assert main(["inspect", server.url + path]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("llamabench: error:")]
    assert len(errors) == 1 and needle in errors[0] and server.url in errors[0], err


def test_a_missing_part_is_named(tmp_path, capsys):
    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, tmp_path / "t.gguf").path
    parts = write_split(twin, tmp_path, 3)
    parts[1].unlink()
    assert main(["inspect", str(parts[0])]) == 1
    err = capsys.readouterr().err
    assert "part 2 of 3 is missing" in err and parts[1].name in err and err.count("\n") == 1


def test_bench_says_it_needs_the_file(served, capsys):
    server, _ = served
    assert main(["bench", f"{server.url}/files/qwen35-twin.gguf", "-c", "512"]) == 2
    assert "download" in capsys.readouterr().err


@pytest.mark.slow
def test_real_gguf_over_http_fits_and_verifies(capsys, tmp_path):
    path, why = real_model.fetch()
    if path is None:
        pytest.skip(why)
    (tmp_path / path.name).symlink_to(path)
    with FileServer(tmp_path) as server:
        url = f"{server.url}/files/{path.name}"
        assert inspect_json(capsys, url) == inspect_json(capsys, str(path))
        remote_fit = fit_json(capsys, [url, "--ctx", "8192", "--vram", "2GiB"])
        local_fit = fit_json(capsys, [str(path), "--ctx", "8192", "--vram", "2GiB"])
        assert remote_fit.rows == local_fit.rows  # weights, KV, compute (llama.cpp's dry run of the header)
        assert main(["verify", url, "--ctx", "8192"]) == 0  # a dry run reads no tensor data
        assert server.served.bytes_sent < 0.05 * path.stat().st_size


def test_fit_with_a_projector_on_the_card_and_in_ram(served, capsys, tmp_path):
    server, root = served
    proj = write_projector(root / "mmproj.gguf")  # real clip metadata, zero tensors
    on_card = fit_json(capsys, ["qwen3-30b-a3b", "--ctx", "4096", "--vram", "24GiB", "-ctk", "f16", "-ctv", "f16",
                                "--mmproj", f"{server.url}/files/mmproj.gguf"])
    weights = read_metadata(proj).weights_bytes
    part = on_card.rows[0].parts.projector
    # the weights from the tensor infos, plus one image's estimate: 16 heads x 4096^2 f32 scores + activations
    assert part == weights + 16 * 4096 * 4096 * 4 + 4096 * (3 * 1152 + 4304) * 4
    best = on_card.fit.recommended("24GiB", 4096)
    assert "--mmproj" in llama_server_command(on_card.fit, best) and "mmproj" in on_card.fit.basis
    in_ram = fit_json(capsys, ["qwen3-30b-a3b", "--ctx", "4096", "--vram", "24GiB", "-ctk", "f16", "-ctv", "f16",
                               "--mmproj", str(proj), "--no-mmproj-offload"])
    assert in_ram.rows[0].parts.projector == 0
    assert in_ram.rows[0].parts.total == on_card.rows[0].parts.total - part


def test_fit_a_catalog_quant_from_its_published_location(served, capsys, monkeypatch):
    server, root = served
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata,
                      root / "Qwen3-30B-A3B-abliterated.Q4_K_M.gguf").path  # stands in for the published file
    record = fit_json(capsys, ["qwen3-30b-a3b", "--quant", "Q4_K_M", "--remote", "--ctx", "4096", "--vram", "1GiB"])
    assert "the GGUF's tensor infos" in record.fit.basis["weights"]
    assert fit_json(capsys, [str(twin), "--ctx", "4096", "--vram", "1GiB"]).rows == record.rows


def test_a_split_set_fits_as_the_single_file(tmp_path, capsys):
    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, tmp_path / "t.gguf").path
    first = write_split(twin, tmp_path, 3)[0]
    rows = []
    for model in (str(twin), str(first)):
        rows.append(fit_json(capsys, [model, "--ctx", "4096", "--vram", "1GiB", "-ngl", "20,99"]).rows)
    assert rows[0] == rows[1]
    assert main(["verify", str(first), "--ctx", "4096"]) == 0  # llama.cpp loads the set
