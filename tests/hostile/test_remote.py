"""Remote GGUF headers over HTTP range requests, hf:// paths, and split sets, against a local server."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from llamabench.cli import main
from llamabench.jobs.twin.build import write_twin
from llamabench.records.fit import FitRecord
from llamabench.records.inspect import InspectRecord
from llamabench.runtimes.llama_server import llama_server_command
from llamabench.world import catalog, remote
from llamabench.world.gguf_file import read_metadata
from tests.support import real_model
from tests.support.http_server import FileServer, write_big_header
from tests.support.twin_projector import write_projector
from tests.support.twin_split import write_split


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
    write_big_header(twin, root / "big-header.gguf")  # a header over the first range: several requests
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
    from llamabench.jobs.twin.shape import write_shape_twin

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
    ("/slow", "no complete answer within 1 s"),
    ("/closed/qwen35-twin.gguf", "cannot be reached"),
    ("/gzip/qwen35-twin.gguf", "compresses its ranges"),
])
def test_each_failure_is_one_line_naming_the_url(served, capsys, monkeypatch, path, needle):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_HTTP_TIMEOUT", "1")
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


def one_error(capsys, argv, needle: str, code: int = 1) -> str:
    """The one error line of a refused command, which must hold `needle`."""
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("llamabench: error:")]
    assert len(errors) == 1 and len(err) == 1 and needle in errors[0], err
    return errors[0]


@pytest.mark.parametrize("mode", ["trickle-status", "trickle-head", "trickle-body"])
def test_a_trickling_server_meets_one_deadline(served, capsys, monkeypatch, tmp_path, mode):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_HTTP_TIMEOUT", "1")
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    start = time.monotonic()
    line = one_error(capsys, ["inspect", f"{server.url}/{mode}/qwen35-twin.gguf"], "no complete answer within 1 s")
    assert time.monotonic() - start < 4 and server.url in line


def test_a_server_that_answers_one_byte_a_range_is_refused(served, capsys, tmp_path, monkeypatch):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    before = len(server.served.requests)
    one_error(capsys, ["inspect", f"{server.url}/onebyte/qwen35-twin.gguf"], "fewer bytes than asked")
    assert len(server.served.requests) - before == 1


@pytest.mark.parametrize("mode, needle", [
    ("huge-total", "over 1 PiB"),
    ("wrong-start", "where bytes 0- were asked"),
    ("star-total", "does not say how large the file is"),
    ("word-total", "Content-Range is not one llamabench reads"),
    ("negative-total", "Content-Range is not one llamabench reads"),
    ("no-content-range", "no Content-Range"),
])
def test_a_content_range_that_does_not_answer_the_range_is_refused(served, capsys, tmp_path, monkeypatch, mode,
                                                                    needle):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    one_error(capsys, ["inspect", f"{server.url}/{mode}/qwen35-twin.gguf"], needle)


def test_a_body_shorter_than_its_content_length_is_one_line(served, capsys, tmp_path, monkeypatch):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    one_error(capsys, ["inspect", f"{server.url}/short-body/qwen35-twin.gguf"], "the connection ended mid-answer")


@pytest.mark.parametrize("mode", ["changing", "changing-no-if-range", "changing-size", "changing-date"])
def test_a_file_that_changes_between_ranges_is_refused(served, capsys, tmp_path, monkeypatch, mode):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    before = len(server.served.requests)
    one_error(capsys, ["inspect", f"{server.url}/{mode}/big-header.gguf"], "changed on the server")
    later = server.served.requests[before + 1:]
    assert later and all(r.if_range == (None if mode in ("changing-size", "changing-date") else '"v0-%d"' % (
        (server.served.root / "big-header.gguf").stat().st_size)) for r in later)


def test_a_header_over_several_ranges_reads_as_the_file(served, capsys, tmp_path, monkeypatch):
    server, root = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    local = inspect_json(capsys, str(root / "big-header.gguf"))
    before = len(server.served.requests)
    assert inspect_json(capsys, f"{server.url}/files/big-header.gguf") == local
    assert len(server.served.requests) - before == 3  # 1, 2 and 4 MiB: the header is 3 MiB
    assert inspect_json(capsys, f"{server.url}/bigger/big-header.gguf") == local  # more than asked: cut


@pytest.mark.parametrize("path", [
    "hf://own/repo/../../x.gguf", "hf://own/repo/./x.gguf", "hf://own//repo/x.gguf", "hf://own/repo//x.gguf",
    "hf://own/repo/x.gguf@../../main", "hf://own/repo/%2e%2e/x.gguf", "hf://own/repo/..%2fx.gguf",
    "hf://own/repo/a\\..\\x.gguf", "hf://own/repo/x.gguf?download=1", "hf://own/repo/x.gguf#frag",
    "hf://own/repo/x.gguf@", "hf://../repo/x.gguf", "hf://own/re..po/x.gguf", "hf://own/repo/x\ny.gguf",
])
def test_hf_paths_that_leave_the_repository_are_refused(served, capsys, monkeypatch, tmp_path, path):
    server, _ = served
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_TOKEN", "secret-token-123")
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    before = len(server.served.requests)
    line = one_error(capsys, ["inspect", path], "hf://")
    assert len(server.served.requests) == before and "secret" not in line


def test_authorization_never_leaves_the_endpoint(served, capsys, monkeypatch, tmp_path):
    server, root = served
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_TOKEN", "secret-token-123")

    def followed(owner: str):
        """(the endpoint's requests, its /files/ requests after the redirect) of one hf:// read via OWNER."""
        monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path / owner))
        before = len(server.served.requests)
        assert main(["inspect", f"hf://{owner}/repo/qwen35-twin.gguf", "--json"]) == 0
        mine = server.served.requests[before:]
        asked = [r for r in mine if r.path.startswith(f"/{owner}/")]
        return asked, [r for r in mine if r not in asked]

    with FileServer(root) as other:
        server.served.other_url = other.url
        resolve, _ = followed("redirect-other")  # another port: another host
        assert other.served.requests and not other.served.authorized()
    assert resolve and all(r.authorization == "Bearer secret-token-123" for r in resolve)
    _, after = followed("redirect-localhost")  # the same server, under another host name
    assert after and not any(r.authorization for r in after)
    _, after = followed("redirect-same")  # the endpoint's own host: the token goes along
    assert after and all(r.authorization == "Bearer secret-token-123" for r in after)


def test_a_redirect_body_is_never_read(served, capsys, tmp_path, monkeypatch):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    start = time.monotonic()
    assert main(["inspect", f"{server.url}/redirect-body/qwen35-twin.gguf"]) == 0
    assert time.monotonic() - start < 10


def secrets_in(folder: Path, *secrets: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in secrets)]


def test_credentials_in_a_url_are_used_but_never_shown_or_kept(served, capsys, tmp_path, monkeypatch):
    server, root = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    host = server.url.removeprefix("http://")
    url = f"http://user:password@{host}/files/qwen35-twin.gguf?token=tok-456&X-Amz-Signature=sig-789"
    before = len(server.served.requests)
    assert main(["inspect", url, "--json"]) == 0
    out, err = capsys.readouterr()
    assert server.served.requests[before].authorization.startswith("Basic ")  # used for the request itself
    assert f"http://user:***@{host}/files/qwen35-twin.gguf" in err
    assert json.loads(out)["inspection"]["source"] == f"http://user:***@{host}/files/qwen35-twin.gguf"
    for secret in ("password", "tok-456", "sig-789"):
        assert secret not in out + err
    assert not secrets_in(tmp_path, "password", "tok-456", "sig-789")
    line = one_error(capsys, ["inspect", f"http://user:password@{host}/files/missing.gguf?sig=sig-789"], "HTTP 404")
    assert "password" not in line and "sig-789" not in line and "user:***@" in line


def test_long_and_odd_file_names_get_safe_cached_names(served, capsys, tmp_path, monkeypatch):
    server, root = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    local = inspect_json(capsys, str(root / "qwen35-twin.gguf"))
    long = "a" * 300
    assert inspect_json(capsys, f"{server.url}/alias/{long}~qwen35-twin.gguf") == local
    assert inspect_json(capsys, f"{server.url}/alias/{long}~split/qwen35-twin-00001-of-00003.gguf") == local
    names = [p.name for p in (tmp_path / "remote").rglob("*.gguf")]
    assert names and all(len(n.encode()) < 120 for n in names)
    parts = sorted(n for n in names if "-of-00003" in n)
    assert len(parts) == 3 and len({p.removesuffix("-00001-of-00003.gguf").removesuffix("-00002-of-00003.gguf")
                                     .removesuffix("-00003-of-00003.gguf") for p in parts}) == 1
    assert remote.local_name("x-00002-of-00003.gguf") == "x-00002-of-00003.gguf"
    for odd in ("..", ".", "", ".hidden.gguf", "a\nb.gguf", "a\\b.gguf", "x" * 300 + "-00002-of-00003.gguf"):
        name = remote.local_name(odd)
        assert name not in (".", "..") and not name.startswith(".") and "/" not in name and name.isprintable()
        assert len(name.encode()) < 120 and name.endswith(".gguf")
    assert remote.local_name("x" * 300 + "-00002-of-00003.gguf").endswith("-00002-of-00003.gguf")


def test_redact():
    assert remote.redact("https://u:p@h/x.gguf?sig=1#f") == "https://u:***@h/x.gguf"
    assert remote.redact("https://tok@h/x.gguf") == "https://***@h/x.gguf"
    assert remote.redact("https://h/a@b.gguf") == "https://h/a@b.gguf"
    assert remote.redact("https://u:p@ss@h/x") == "https://u:***@h/x"
    assert remote.redact("http://h/a\nb") == "http://h/a\\x0ab"


def test_the_number_of_requests_is_bounded(served, capsys, tmp_path, monkeypatch):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(remote, "MAX_REQUESTS", 2)  # the 3 MiB header takes 3
    one_error(capsys, ["inspect", f"{server.url}/files/big-header.gguf"], "more than 2 requests")


def test_the_tensor_bound_is_the_split_sets_not_each_parts(tmp_path, monkeypatch):
    """30 parts of 65,536 tensors each ran past 60 s: the bound holds for the set, checked as parts are read."""
    from llamabench.core.errors import BadModelFile
    from llamabench.world import gguf_file

    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, tmp_path / "t.gguf").path
    parts = write_split(twin, tmp_path, 3)
    n_tensors = len(gguf_file.read_metadata(parts[0]).tensors)
    monkeypatch.setattr(gguf_file, "MAX_TENSORS", n_tensors - 1)  # the set holds one more than the bound
    read = []
    real = gguf_file._read_one
    monkeypatch.setattr(gguf_file, "_read_one", lambda p, **kw: (read.append(p), real(p, **kw))[1])
    with pytest.raises(BadModelFile, match="split.tensors.count|more than"):
        gguf_file.read_metadata(parts[0])
    assert len(read) <= 3


def test_the_key_and_array_bounds_are_the_split_sets_too(tmp_path, monkeypatch):
    """Parts of few tensors but many keys or long arrays each: the set's keys and entries are bounded as a whole."""
    from llamabench.core.errors import BadModelFile
    from llamabench.world import gguf_file

    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, tmp_path / "t.gguf").path
    parts = write_split(twin, tmp_path, 3)
    keys = sum(len(gguf_file._read_one(p, need_architecture=False).keys) for p in parts)
    for name, bound in (("MAX_KEYS", keys - 1), ("MAX_DECODED_ENTRIES", 10_000 * len(parts) - 1)):
        with monkeypatch.context() as patched:
            patched.setattr(gguf_file, name, bound)  # each part is within it; the set is not
            if name == "MAX_DECODED_ENTRIES":  # 10,000 decoded entries a part (each file alone decodes fewer)
                patched.setattr(gguf_file, "_array_entries", lambda keys: 10_000 if "split.no" in keys else 0)
            with pytest.raises(BadModelFile, match="metadata keys or"):
                gguf_file.read_metadata(parts[0])


@pytest.mark.parametrize("mode", ["trickle-status", "trickle-head", "trickle-body"])
def test_a_trickling_server_fails_on_the_low_speed_limit_before_the_deadline(served, capsys, monkeypatch, tmp_path,
                                                                              mode):
    """10 bytes a second is a stall, as curl's --speed-limit / --speed-time say: one line long before 120 s."""
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_HTTP_LOW_SPEED", "1024/2")
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    start = time.monotonic()
    line = one_error(capsys, ["inspect", f"{server.url}/{mode}/qwen35-twin.gguf"], "the server stalls")
    assert time.monotonic() - start < 8 and "fewer than 1,024 bytes arrived in 2 s" in line


def test_a_healthy_server_is_not_a_stall(served, capsys, monkeypatch, tmp_path):
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_HTTP_LOW_SPEED", "1024/2")
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    assert main(["inspect", f"{server.url}/files/qwen35-twin.gguf", "-c", "4096"]) == 0


def test_hf_repo_with_a_quant_reads_the_file_llama_cpp_would_load(tmp_path, capsys, monkeypatch):
    """Trap 2: `-hf OWNER/REPO:QUANT`, llama.cpp's habit, gave "argument -h/--help: ignored explicit argument 'f'"."""
    import shutil

    twin = write_twin(catalog.get_entry("qwen3-5-35b-a3b").metadata, tmp_path / "twin.gguf").path
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("Model-Q8_0.gguf", "Model-Q4_K_M.gguf", "mmproj-Model-Q4_K_M.gguf"):
        shutil.copyfile(twin, root / name)
    with FileServer(root) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        for argv, chosen in ((["-hf", "someone/some-repo"], "Model-Q4_K_M.gguf"),  # llama.cpp's default tag
                             (["-hf", "someone/some-repo:q8_0"], "Model-Q8_0.gguf"),  # any case
                             (["hf://someone/some-repo:Q4_K_M"], "Model-Q4_K_M.gguf")):  # the API's spelling
            assert main(["inspect", *argv, "--json"]) == 0
            model = json.loads(capsys.readouterr().out)["model"]
            assert (model["path"] or "").endswith(f"/{chosen}"), (argv, model)
        line = one_error(capsys, ["inspect", "-hf", "someone/some-repo:IQ4_XS"], "no GGUF for IQ4_XS")
        assert "Model-Q8_0.gguf" in line  # what the repository holds, said


def test_a_hub_that_never_answers_the_listing_is_one_line_within_the_deadline(capsys, monkeypatch):
    """-hf lists the repository through huggingface_hub, which waits for ever: the listing has the HTTP deadline."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts (the kernel does), never answers
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listener.getsockname()[1]}")
        monkeypatch.setenv("LLAMABENCH_HTTP_TIMEOUT", "2")
        started = time.monotonic()
        line = one_error(capsys, ["inspect", "-hf", "someone/some-repo"], "were not listed in 2 s")
        assert time.monotonic() - started < 15 and "LLAMABENCH_HTTP_TIMEOUT" in line
    finally:
        listener.close()


def test_llama_cpps_pick_of_a_repository_file():
    from llamabench.world.hf_repo import best_model_file

    files = ["README.md", "mmproj-M-Q4_K_M.gguf", "M-Q6_K-00002-of-00002.gguf", "M-Q6_K-00001-of-00002.gguf",
             "M-Q8_0.gguf", "imatrix-Q4_K_M.gguf"]
    assert best_model_file(files, "Q6_K") == "M-Q6_K-00001-of-00002.gguf"  # a split set: its first part
    assert best_model_file(files, "") == "M-Q8_0.gguf"  # no Q4_K_M model: Q8_0
    assert best_model_file(files, "Q4_K_M") is None  # sidecars are no model
    assert best_model_file(["a.gguf", "b.gguf"], "") == "a.gguf"


def test_the_remote_header_cache_trusts_only_what_the_user_owns(served, capsys, tmp_path, monkeypatch):
    """Folders 0700 and files 0600 under umask 000; a link planted at the cached copy is refused, never followed;
    a FIFO at its metadata is refused, never opened (reading it would hang)."""
    server, _ = served
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    url = f"{server.url}/files/qwen35-twin.gguf"
    old = os.umask(0)
    try:
        inspect_json(capsys, url)
    finally:
        os.umask(old)
    (copy,) = (tmp_path / "cache" / "remote").rglob("qwen35-twin.gguf")
    meta = copy.with_name(copy.name + ".json")
    assert [stat.S_IMODE(p.stat().st_mode) for p in (copy.parent.parent, copy.parent)] == [0o700, 0o700]
    assert [stat.S_IMODE(p.stat().st_mode) for p in (copy, meta)] == [0o600, 0o600]
    meta.unlink()
    os.mkfifo(meta)
    one_error(capsys, ["inspect", url], "is not a regular file")
    meta.unlink()
    victim = tmp_path / "notes"
    victim.write_text("keep")
    copy.unlink()
    copy.symlink_to(victim)
    one_error(capsys, ["inspect", url], "is a symbolic link")
    assert victim.read_text() == "keep"
