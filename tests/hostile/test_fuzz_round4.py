"""The fourth fuzz campaign (issue 46), through the same harness: each case the CLI, or the API as a programmer
calls it, in its own process under a wall-time and a memory bound (tests/support/fuzz_harness.py). Classes:
  1 --url spellings: ports out of range or not numbers, brackets left open, other schemes
  2 --server-cmd lines that do not split (with and without --dry-run), --ram spelt as cards
  3 hostile servers at --url: an endless error body, no context size, token-less events, a connection kept open
    after the last event, /props a byte a second
  4 the API misused with this round's keywords: paths of every type, NUL bytes, lists where one value goes
  5 hostile hubs at -hf: one listing page of 3M entries (under 400 MiB of memory), a page linking to itself, pages
    without end, a next page on another host, a listing that is no list
Good outcomes are an honest success or one `llamabench: error:` line (a failed test in its record, for a server);
the API's refusals must be a LlamabenchError, or a TypeError for a wrong call.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from http.server import ThreadingHTTPServer

import pytest

from tests.hostile.test_fuzz_round3 import API
from tests.hostile.test_round4 import _hub_server, hostile
from tests.support.fuzz_harness import Case, run_campaign, summary

pytestmark = pytest.mark.slow
CATALOG_ID = "qwen3-5-35b-a3b"


def _url_cases(env: dict) -> list[Case]:
    one = dict(group="1 --url spellings", env=env, must_fail=True)
    urls = ["http://127.0.0.1:99999", "http://127.0.0.1:abc", "http://[::1", "ftp://127.0.0.1:8080", "http://:8080",
            "http://127.0.0.1:0", "127.0.0.1:8080", "http://127.0.0.1:-1", ""]
    return [Case(argv=["bench", CATALOG_ID, "--runtime", "llama-server", "--url", u, "-p", "8", "-n", "0"], **one)
            for u in urls]


def _line_cases(model: str, env: dict) -> list[Case]:
    two = dict(group="2 server lines and --ram", env=env, must_fail=True)
    lines = ["llama-server -c 'x", 'llama-server -c "x', "llama-server \\", "llama-server -m 'a b", "'"]
    cases = [Case(argv=["bench", CATALOG_ID, "--runtime", "llama-server", "--server-cmd", c, *extra], **two)
             for c in lines for extra in ([], ["--dry-run"])]
    cases += [Case(argv=["fit", model, "-c", "2048", "--ram", r], **two)
              for r in ("9GiB+9GiB", "rtx-4090", "+", "apple-m4-pro-24gb")]
    return cases


def _server_cases(model: str, env: dict, stack: ExitStack) -> list[Case]:
    cases = []
    for mode in ("error-endless", "n_ctx-0", "idle-events", "open-after-stop", "props-trickle"):
        server = ThreadingHTTPServer(("127.0.0.1", 0), hostile(mode))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        stack.callback(server.shutdown)
        cases.append(Case(group="3 hostile --url servers", argv=[
            "bench", model, "--runtime", "llama-server", "--url", f"http://127.0.0.1:{server.server_port}", "-p", "4",
            "-n", "2", "-r", "1"], env={**env, "LLAMABENCH_HTTP_TIMEOUT": "3"}, wall_s=60,
            must_fail=mode != "open-after-stop"))
    return cases


def _api_cases(model: str, env: dict) -> list[Case]:
    calls = ["lb.fit(G, mmproj=pathlib.Path('/nonexistent.gguf'), vram='1GiB', n_ctx=2048)",
             "lb.fit(G, model_draft=pathlib.Path('/nonexistent.gguf'), vram='1GiB', n_ctx=2048)",
             "lb.fit('mo\\x00del.gguf')", "lb.inspect(G, results=5)", "lb.fit(G, results=5, vram='1GiB')",
             "lb.fit(G, results=b'r.jsonl', vram='1GiB')", "lb.report(5)", "lb.report([], compare=5)",
             "lb.report([pathlib.Path('/nonexistent.jsonl')])", "lb.report(['a\\x00b'])", "lb.read_records(5)",
             "lb.read_records(None)", "lb.bench(G, runtime='llama-server', server_cmd=5, dry_run=True)",
             "lb.bench(G, runtime='llama-server', server_cmd=['llama-server', 5], dry_run=True)",
             "lb.bench(G, runtime='llama-server', url=5, dry_run=True)",
             "lb.bench(G, runtime='llama-server', url='http://[::1', dry_run=True)",
             "lb.quality(G, text_file=5)", "lb.roofline(G, card='rtx-4090', calibrate=5)"]
    return [Case(group="4 the API misused", argv=[], code=API.format(model=model, call=c), env=env, must_fail=True)
            for c in calls]


def _hub_cases(env: dict, stack: ExitStack) -> list[Case]:
    cases = []
    for mode in ("huge-page", "self-page", "endless-pages", "other-host", "not-a-list"):
        server = _hub_server(mode)
        stack.callback(server.shutdown)
        cases.append(Case(group="5 hostile hubs", argv=["inspect", "-hf", "someone/some-repo"],
                          env={**env, "HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
                               "LLAMABENCH_HTTP_TIMEOUT": "3"}, must_fail=True, rss_bytes=400 * 2**20,
                          memory_error=True))
    return cases


def test_fuzz_round4(tmp_path, gemma):
    env = {"LLAMABENCH_CACHE_DIR": str(tmp_path / "cache"), "LLAMABENCH_REPORTS_DIR": str(tmp_path / "reports")}
    model = str(gemma)
    with ExitStack() as stack:
        cases = (_url_cases(env) + _line_cases(model, env) + _server_cases(model, env, stack)
                 + _api_cases(model, env) + _hub_cases(env, stack))
        counts, per_group, bad = run_campaign(cases)
    print("\nfuzz (round 4): " + summary(counts, per_group))
    assert not bad, summary(counts, per_group) + "\n" + "\n".join(f"{g} {k}: {d}" for g, k, d in bad[:20])
