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


def _handler(props_body: bytes, timings: str, models: bytes = b""):
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
                self._send(models or json.dumps({"data": [{"meta": {"n_vocab": 1000}}]}).encode())

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
            tokens = [] if timings.startswith("no-tokens") else [b'data: {"tokens": [5], "content": "a"}\n\n',
                                                                  b'data: {"tokens": [6], "content": "b"}\n\n']
            last = b'data: {"stop": true, "timings": ' + timings.removeprefix("no-tokens").encode() + b"}\n\n"
            events = [*tokens, last]
            self._send(b"".join(events), "text/event-stream")
    return Handler


SANE = json.dumps(SANE_PROPS).encode()
GOOD = '{"prompt_n": 4, "prompt_ms": 1, "predicted_n": 3, "predicted_ms": 2}'


@pytest.mark.parametrize("props, timings, models, depth, reason", [
    (b"[]", "{}", b"", "0", "not a JSON object"),
    (b"<html>hello</html>", "{}", b"", "0", "not JSON"),
    (json.dumps({"total_slots": "many"}).encode(), "{}", b"", "0", "not a number"),
    (SANE, '{"prompt_n": 4, "prompt_ms": 1e309, "predicted_n": 3, "predicted_ms": 2}', b"", "0",
     "timings.prompt_ms is not a duration"),
    (SANE, '{"prompt_n": -5, "prompt_ms": 1, "predicted_n": 3, "predicted_ms": 2}', b"", "0",
     "timings.prompt_n is not a token count"),
    (SANE, "endless", b"", "0", "not llama-server"),
    (SANE, '{"prompt_n": 4, "prompt_ms": "x", "predicted_n": 3, "predicted_ms": 2}', b"", "64",
     "timings.prompt_ms is not a duration"),  # the fill at depth reads it first
    (SANE, "no-tokens" + GOOD, b"", "0", "streamed no token"),
    (SANE, GOOD.replace('"prompt_n": 4', '"prompt_n": 4, "x": 0'), b'{"data": [{"meta": {"n_vocab": 1e999}}]}', "0",
     None),  # an absurd vocabulary is passed over: the tests run
], ids=["props-array", "props-html", "props-slots", "infinite-ms", "negative-count", "endless-stream", "fill-ms",
        "no-token", "vocab-infinite"])
def test_a_server_that_is_not_llama_server_fails_its_tests_and_the_file_reads_back(gemma, tmp_path, capsys, props,
                                                                                   timings, models, depth, reason):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(props, timings, models))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results = tmp_path / "r.jsonl"
    try:
        code = main(["bench", str(gemma), "--runtime", "llama-server", "--url", f"http://127.0.0.1:{server.server_port}",
                     "-p", "4", "-n", "0", "-r", "1", "-d", depth, "--results", str(results)])
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert "Traceback" not in err and code in (0, 1), err
    (record,) = read_records(results).records  # the file reads back: no Infinity, nothing negative
    if reason is None:
        assert record.reason is None or "vocab" not in record.reason, record.reason
    else:
        assert record.reason and reason in record.reason, record.reason


def test_a_measurement_the_file_could_not_hold_is_kept_as_a_failed_test(tmp_path):
    """A refused record does not end the sweep: it is written as a failed test that says why."""
    from dataclasses import replace

    from llamabench.jobs.bench.record import save_measurement as _save_measurement
    from tests.pure.test_records import bench_record

    path = tmp_path / "r.jsonl"
    kept = _save_measurement(path, replace(bench_record(), samples_ns=(-5,)))
    (back,) = read_records(path).records
    assert back == kept and not back.ok and "not recordable" in back.reason
