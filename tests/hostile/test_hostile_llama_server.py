"""bench --url against a server that is not a sane llama-server (issue 33): /props that is not a JSON object, and
timings that no results file could hold (Infinity, negative counts). Each test fails in its record, the bench
ends without a traceback, and the results file reads back whole."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llamabench.cli import main
from llamabench.records.records import read_records

SANE_PROPS = {"total_slots": 1, "default_generation_settings": {"n_ctx": 4096}, "model_path": "m.gguf"}


def _handler(props_body: bytes, timings: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, body: bytes, kind: str = "application/json"):
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/props":
                self._send(props_body)
            else:
                self._send(json.dumps({"data": [{"meta": {"n_vocab": 1000}}]}).encode())

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if timings == "endless":  # tokens for ever, never the end of the answer
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    while True:
                        self.wfile.write(b'data: {"tokens": [5], "content": "a"}\n\n')
                except OSError:
                    return
            events = [b'data: {"tokens": [5], "content": "a"}\n\n', b'data: {"tokens": [6], "content": "b"}\n\n',
                      b'data: {"tokens": [7], "content": "c", "stop": true, "timings": ' + timings.encode() + b"}\n\n"]
            self._send(b"".join(events), "text/event-stream")
    return Handler


@pytest.mark.parametrize("props, timings, reason", [
    (b"[]", "{}", "not a JSON object"),
    (b"<html>hello</html>", "{}", "not JSON"),
    (json.dumps({"total_slots": "many"}).encode(), "{}", "not a number"),
    (json.dumps(SANE_PROPS).encode(), '{"prompt_n": 4, "prompt_ms": 1e309, "predicted_n": 3, "predicted_ms": 2}',
     "timings.prompt_ms is not a duration"),
    (json.dumps(SANE_PROPS).encode(), '{"prompt_n": -5, "prompt_ms": 1, "predicted_n": 3, "predicted_ms": 2}',
     "timings.prompt_n is not a token count"),
    (json.dumps(SANE_PROPS).encode(), "endless", "not llama-server"),
], ids=["props-array", "props-html", "props-slots", "infinite-ms", "negative-count", "endless-stream"])
def test_a_server_that_is_not_llama_server_fails_its_tests_and_the_file_reads_back(gemma, tmp_path, capsys, props,
                                                                                   timings, reason):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(props, timings))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results = tmp_path / "r.jsonl"
    try:
        code = main(["bench", str(gemma), "--runtime", "llama-server", "--url", f"http://127.0.0.1:{server.server_port}",
                     "-p", "4", "-n", "0", "-r", "1", "--results", str(results)])
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert "Traceback" not in err and code in (0, 1), err
    (record,) = read_records(results).records  # the file reads back: no Infinity, nothing negative
    assert record.reason and reason in record.reason, record.reason
