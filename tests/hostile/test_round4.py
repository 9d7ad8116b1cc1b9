"""Reliability round 4 (issue 46): the newest doors. A hostile server at --url (an endless error body, no context
size, token-less events for ever, a connection kept open after the last event, /props a byte a second), bad URLs
and server lines, a dry-run cache entry out of range, --ram as two cards, and the API's keywords of the wrong type:
each one clear line (LlamabenchError in the API), no traceback, no hang, no unbounded memory."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.jobs.fit.dry_run_cache import DryRunCache
from llamabench.records.records import read_records

PROPS = {"total_slots": 1, "default_generation_settings": {"n_ctx": 4096}, "model_path": "m.gguf"}
TOKEN = b'data: {"tokens": [5], "content": "a"}\n\n'
LAST = b'data: {"stop": true, "timings": {"prompt_n": 4, "prompt_ms": 1, "predicted_n": 2, "predicted_ms": 2}}\n\n'


def hostile(mode: str):  # noqa: C901 - one hostile server, a branch per mode
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _head(self, status: int, kind: str, length: int | None = None):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            if length is not None:
                self.send_header("Content-Length", str(length))
            self.end_headers()

        def do_GET(self):
            props = dict(PROPS, default_generation_settings={"n_ctx": 0}) if mode == "n_ctx-0" else PROPS
            body = json.dumps(props if self.path == "/props" else {"data": []}).encode()
            if mode == "props-trickle" and self.path == "/props":
                self._head(200, "application/json", len(body))
                for byte in body:  # a byte a second: every per-read timeout passes
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(1)
                return
            self._head(200, "application/json", len(body))
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                if mode == "error-endless":
                    self._head(500, "text/plain")
                    while True:
                        self.wfile.write(b"x" * 65536)
                self._head(200, "text/event-stream")
                if mode == "idle-events":
                    while True:
                        self.wfile.write(b"data: {}\n\n")
                self.wfile.write(TOKEN + TOKEN + LAST)
                self.wfile.flush()
                if mode == "open-after-stop":
                    time.sleep(3600)
            except OSError:
                return
    return Handler


@pytest.mark.parametrize("mode, says", [("error-endless", "HTTP 500"), ("n_ctx-0", "no context size"),
                                        ("idle-events", "events without a token"), ("open-after-stop", None),
                                        ("props-trickle", "no whole answer within the deadline")])
def test_a_hostile_server_ends_in_its_record_or_one_line(gemma, tmp_path, capsys, monkeypatch, mode, says):
    monkeypatch.setenv("LLAMABENCH_HTTP_TIMEOUT", "3")
    server = ThreadingHTTPServer(("127.0.0.1", 0), hostile(mode))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results = tmp_path / "r.jsonl"
    start = time.monotonic()
    try:
        code = main(["bench", str(gemma), "--runtime", "llama-server", "--url", f"http://127.0.0.1:{server.server_port}",
                     "-p", "4", "-n", "2", "-r", "1", "--results", str(results)])
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert "Traceback" not in err and code in (0, 1, 2, 3), err
    assert time.monotonic() - start < 60  # no hang
    text = err + "".join(r.reason or "" for r in (read_records(results).records if results.exists() else ()))
    if says is None:  # the answer ended at its last event: measured, not waited on
        assert code == 0 and all(r.ok for r in read_records(results).records), err
    else:
        assert says in text, text[-500:]


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://127.0.0.1:abc", "http://[::1"])
def test_a_url_that_cannot_be_one_is_one_line(url, capsys):
    assert main(["bench", "qwen3-5-35b-a3b", "--runtime", "llama-server", "--url", url, "-p", "8", "-n", "0"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"--url {url!r}" in err


@pytest.mark.parametrize("extra", [[], ["--dry-run"]])
def test_a_server_line_with_an_open_quote_is_one_line(extra, capsys):
    code = main(["bench", "qwen3-5-35b-a3b", "--runtime", "llama-server", "--server-cmd", "llama-server -c 'x",
                 *extra])
    err = capsys.readouterr().err
    assert code == 2 and "No closing quotation" in err and "Traceback" not in err


def test_ram_joined_by_plus_is_refused_not_summed():
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "qwen3-5-35b-a3b", "--ram", "9GiB+9GiB"])
    assert exit_.value.code == 2


@pytest.mark.parametrize("call, says", [
    (lambda: lb.fit("qwen3-5-35b-a3b", n_ctx=4096, mmproj=Path("/nonexistent.gguf")), "no such file"),
    (lambda: lb.fit("mo\x00del.gguf"), "NUL byte"),
    (lambda: lb.fit("qwen3-5-35b-a3b", n_ctx=4096, results=5), "results: a path"),
    (lambda: lb.bench("qwen3-5-35b-a3b", runtime="llama-server", server_cmd=5, dry_run=True), "server_cmd"),
    (lambda: lb.report(5), "results: a results file"),
    (lambda: lb.report([], compare=5), "compare: a list"),
    (lambda: read_records(5), "a results file is a path"),
])
def test_the_apis_keywords_of_the_wrong_type_are_llamabench_errors(call, says):
    with pytest.raises(lb.LlamabenchError, match=says):
        call()


def test_a_server_line_as_its_words_is_taken():
    run = lb.bench("qwen3-5-35b-a3b", runtime="llama-server", server_cmd=["llama-server", "-c", "4096"], dry_run=True)
    assert run.commands and "-c 4096" in run.commands[0]


@pytest.mark.parametrize("value", [10**400, -2**40, True], ids=["10**400", "-1TiB", "bool"])
def test_a_dry_run_cache_entry_out_of_range_is_not_trusted(tmp_path, monkeypatch, value):
    """A compute of 10**400 (an OverflowError once printed) or -1 TiB (a fit that 'fits' on a negative) is asked of
    llama.cpp again, not believed."""
    from llamabench.settings.params import Params
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path))
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    cache = DryRunCache(str(tmp_path / "m.gguf"), "emulated")
    settings = Params(n_ctx=4096)
    cache.entries[cache._name(settings)] = ["split", [value, 0, [], [], [0, 0]]]
    assert cache.get(settings) is None
    cache.entries[cache._name(settings)] = ["split", [1024, 0, [], [], [0, 0]]]
    assert cache.get(settings).card == 1024


# -hf: a hostile hub's listing -----------------------------------------------------------------------------------
ENTRY = '{"type": "file", "path": "dir/f%07d.bin", "size": 1, "oid": "0"}'


def hub(mode: str, seen: list | None = None):  # noqa: C901 - one hostile hub, a branch per mode
    """A hub's tree API gone wrong, by mode: one page of 3M entries, a page linking to itself, pages without end, an
    answer that is not a list; "two-pages": a good listing over two pages (page 2 has the GGUF)."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _page(self, body: bytes, link: str | None = None):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if link:
                self.send_header("Link", link)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if seen is not None:
                seen.append((self.path, self.headers.get("Authorization")))
            page = int(self.path.rpartition("page=")[2]) if "page=" in self.path else 1
            try:
                if mode == "huge-page":  # 3M entries, streamed: the client must stop long before the end
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b"[")
                    for i in range(3_000_000):
                        self.wfile.write(((ENTRY % i) + ",").encode())
                    self.wfile.write(b"{}]")
                elif mode == "self-page":
                    self._page(b"[]", f'<{self.path}>; rel="next"')
                elif mode == "endless-pages":
                    self._page(("[" + ENTRY % page + "]").encode(), f'</p?page={page + 1}>; rel="next"')
                elif mode == "other-host":
                    self._page(b"[]", '<http://203.0.113.1/p?page=2>; rel="next"')
                elif mode == "other-scheme":  # the same host over https: the token must not follow
                    self._page(b"[]", f'<https://{self.headers.get("Host")}/p?page=2>; rel="next"')
                elif mode == "not-a-list":
                    self._page(b'{"error": "x"}')
                elif mode == "two-pages":
                    files = ["README.md"] if page == 1 else ["Model-Q8_0.gguf"]
                    self._page(json.dumps([{"type": "file", "path": f, "size": 7} for f in files]).encode(),
                               '</p?page=2>; rel="next"' if page == 1 else None)
            except OSError:
                return
    return Handler


def _hub_server(mode: str, seen: list | None = None):
    server = ThreadingHTTPServer(("127.0.0.1", 0), hub(mode, seen))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_hub_listing_is_read_as_llama_cpp_reads_it_one_page_and_its_token_stays_on_the_host(monkeypatch):
    """llama.cpp's -hf reads one page of the listing (common/hf-cache.cpp:293): so does llamabench, and the file it
    sizes is the one llama.cpp loads; the second page is never asked for."""
    from llamabench.world.hf_repo import repo_listing

    seen: list = []
    server = _hub_server("two-pages", seen)
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("HF_TOKEN", "hf_secret")
        listing = repo_listing("someone/some-repo", None, "hf://someone/some-repo")
        assert listing.sizes == {"README.md": 7} and listing.more_pages
        assert [p for p, _ in seen] == ["/api/models/someone/some-repo/tree/main?recursive=true"]
        assert {a for _, a in seen} == {"Bearer hf_secret"}
    finally:
        server.shutdown()


@pytest.mark.parametrize("mode, says", [("huge-page", "over 32 MiB"), ("self-page", "later pages"),
                                        ("endless-pages", "later pages"), ("other-host", "later pages"),
                                        ("other-scheme", "later pages"), ("not-a-list", "not a list of files")])
def test_a_hostile_hub_listing_is_one_line(mode, says, capsys, monkeypatch):
    """-hf on a hub whose listing would not end or not fit: one line, one page asked (no next page followed, on this
    host or another), no thread left asking for pages."""
    seen: list = []
    server = _hub_server(mode, seen)
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("LLAMABENCH_HTTP_TIMEOUT", "3")
        assert main(["inspect", "-hf", "someone/some-repo"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
        time.sleep(0.5)
        assert len(seen) == 1  # nothing asks the hub for another page
    finally:
        server.shutdown()


def test_hf_hub_offline_is_honoured(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["inspect", "-hf", "someone/some-repo"]) == 1
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err
