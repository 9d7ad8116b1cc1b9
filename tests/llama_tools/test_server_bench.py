"""bench --runtime llama-server: llama.cpp's own llama-server (built by the tests' tool build) on the real Gemma 3
270M, through its HTTP API, depths 0, 256 and 1024, two parallel requests on two slots. The client's numbers are
checked against the server's own `timings` in each response: the prompt tokens it processed are the test's P
(the depth came from its prompt cache), the tokens it generated the test's N, and the client's t/s per request
within a sane factor of the server's."""

from __future__ import annotations

import os
import shlex

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core.errors import EngineError
from llamabench.llama import serving
from llamabench.llama.rpc import accepts
from llamabench.world.gguf_file import read_metadata

pytestmark = pytest.mark.slow
try:
    BINARY = serving.server_binary()
except EngineError as exc:
    BINARY, WHY = None, str(exc)
else:
    WHY = ""
needs_server = pytest.mark.skipif(BINARY is None, reason=f"no llama-server to bench: {WHY}")
P, N, DEPTHS = 64, 8, (0, 256, 1024)  # 256: inside Gemma 3's 512-token window, reused from a checkpoint


@pytest.fixture(scope="module")
def run(gemma, tmp_path_factory):
    if BINARY is None:
        pytest.skip(WHY)
    results = tmp_path_factory.mktemp("server") / "bench.jsonl"
    # -nr: this CPU reports AMX but faults in llama.cpp's repacked weights; one thread each, the cores are shared
    return lb.bench(str(gemma), runtime="llama-server", n_ctx=4096, n_seq=2, concurrency=2, n_depth=list(DEPTHS),
                    n_prompt=P, n_gen=N, repetitions=2, n_threads=1, repack=False, results=results), results


@needs_server
def test_every_test_measured_through_the_server_with_its_command(run):
    bench, _ = run
    assert [r.test.name for r in bench.records] == ["pp64", "tg8", "pp64 @ d256", "tg8 @ d256", "pp64 @ d1024",
                                                    "tg8 @ d1024"]
    for r in bench.records:
        assert r.ok, r.reason
        assert r.runtime == "llama-server" and r.concurrency == 2 and r.server.slots == 2
        argv = shlex.split(r.server.command)
        assert os.path.basename(argv[0]) == "llama-server" and "-nr" in argv
        assert argv[argv.index("-np") + 1] == "2" and argv[argv.index("-c") + 1] == "4096"
        assert len(r.server.requests) == 2 * 2  # two repetitions of two parallel requests
        assert "llama-server x2 parallel" in r.series
        # the table's size and params: the header's, as llama_model_size counts them (the server loaded the model)
        assert r.model.size_bytes == sum(t.n_bytes for t in read_metadata(r.model.path).tensors)
        assert r.model.n_params and 250e6 < r.model.n_params < 300e6


@needs_server
def test_numbers_agree_with_the_servers_own_timings(run):
    bench, _ = run
    for r in bench.records:
        kind, s = str(r.test.kind), r.server
        for q in s.requests:
            assert q.cache_n == r.test.depth, (r.test.name, q)  # the depth came from the prompt cache
            if kind == "pp":
                assert q.prompt_n == P and q.predicted_n == 1
                assert q.ttft_ns / 1e6 >= q.prompt_ms * 0.95  # the client's clock holds the server's prompt time
            else:
                assert q.prompt_n == 1 and q.predicted_n == N
        client, own = s.request_ts(kind, r.test.n_tokens), s.server_ts(kind)
        assert own and 0.33 < client / own < 1.5, (r.test.name, client, own)
        # two parallel requests: the total is more than one request's and at most two of them
        assert 0.8 * client < r.avg_ts < 2.6 * client, (r.test.name, r.avg_ts, client)
    pp0, pp1024 = bench.records[0], bench.records[4]
    assert pp1024.server.fill_ms and pp0.server.fill_ms is None


@needs_server
def test_a_pure_attention_model_at_a_shallow_depth_is_reused_whole(qwen, tmp_path):
    """Qwen2.5 rolls its cache back: every repetition at a depth finds the depth in the prompt cache, as Gemma 3's
    sliding window does from a checkpoint (the fill goes the checkpoint's offset past it, and again before each
    repetition)."""
    bench = lb.bench(str(qwen), runtime="llama-server", n_ctx=1024, n_depth=[256], n_prompt=32, n_gen=4,
                     repetitions=2, n_threads=1, repack=False, results=tmp_path / "bench.jsonl")
    assert all(r.ok for r in bench.records), [r.reason for r in bench.records]
    assert all(q.cache_n == 256 for r in bench.records for q in r.server.requests)


@needs_server
def test_resume_skips_what_the_file_holds_and_dry_run_prints_the_command(run, gemma, capsys):
    _, results = run
    argv = ["bench", str(gemma), "--runtime", "llama-server", "-c", "4096", "-np", "2", "--concurrency", "2",
            "-d", "0,1024", "-p", str(P), "-n", str(N), "-r", "2", "-t", "1", "-nr", "1", "--results", str(results)]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "runtime llama-server" in out and "-np 2" in out and " -nr" in out
    assert main([*argv, "--resume"]) == 0  # nothing left to measure: no server is started
    assert "4 already there (--resume)" in capsys.readouterr().err


@needs_server
def test_a_printed_command_is_started_and_stopped_whatever_ends_the_bench(gemma, tmp_path):
    command = f"llama-server -m {gemma} -c 2048 -np 1 -t 1 -nr"
    bench = lb.bench(str(gemma), runtime="llama-server", server_cmd=command, n_depth=[0], n_prompt=32, n_gen=4,
                     repetitions=1, results=tmp_path / "r.jsonl")
    (pp, tg) = bench.records
    assert pp.ok and tg.ok and pp.params.n_ctx == 2048 and pp.params.n_seq == 1 and not pp.params.repack
    assert shlex.split(pp.server.command)[1:5] == ["-m", str(gemma), "-c", "2048"]
    assert pp.server.requests[0].prompt_n == 32 and tg.server.requests[0].predicted_n == 4
    argv = serving.command_argv(command, BINARY, model=str(gemma))
    with pytest.raises(RuntimeError):
        with serving.started(argv) as server:
            port = int(server.url.rsplit(":", 1)[1])
            assert accepts(port)
            raise RuntimeError("the bench ends by an error")
    assert not accepts(port)
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)


@needs_server
def test_the_servers_allocations_are_recorded_beside_the_theory(run):
    """The server the bench started logs what it allocated (-lv 4): each record holds it, and the theory of the
    context llama-server creates (2 slots) agrees to the printed 0.01 MiB."""
    bench, _ = run
    for r in bench.records:
        assert r.allocations is not None and r.allocations.kv_mib > 0
        assert r.kv_match, (r.footprint.kv_bytes, r.allocations.kv_mib)


@needs_server
def test_speculative_decoding_side_by_side_on_an_mtp_twin(tmp_path):
    """--spec-type none,draft-mtp on a tiny qwen35moe twin with an MTP layer: two servers, side by side; with MTP
    the server's draft counts are recorded (its acceptance), and its allocations hold the MTP context's KV and the
    rollback planes, as the theory says. The twin's weights are zero: its speed and acceptance mean nothing."""
    from llamabench.jobs.twin.generic import write_from_metadata
    from tests.support import every_arch

    twin = write_from_metadata(every_arch.metadata("qwen35moe"), tmp_path / "mtp.gguf").path
    bench = lb.bench(str(twin), runtime="llama-server", spec_type=["none", "draft-mtp"], n_depth=[0, 128],
                     n_prompt=32, n_gen=16, repetitions=1, n_threads=2, repack=False, results=tmp_path / "b.jsonl")
    by_spec = {s: [r for r in bench.records if r.params.spec_type == s] for s in ("none", "draft-mtp")}
    assert all(len(rows) == 4 and all(r.ok for r in rows) for rows in by_spec.values())
    mtp_tg = [r for r in by_spec["draft-mtp"] if r.test.kind == "tg"]
    assert all(r.server.acceptance is not None and "--spec-type draft-mtp" in r.server.command for r in mtp_tg)
    assert all(r.server.acceptance is None for r in by_spec["none"] if r.test.kind == "tg")
    plain, mtp = by_spec["none"][0], by_spec["draft-mtp"][0]
    assert mtp.allocations.kv_mib > plain.allocations.kv_mib and mtp.kv_match and plain.kv_match
    assert mtp.footprint.recurrent_state_bytes == 4 * plain.footprint.recurrent_state_bytes  # 1 + 3 planes
    assert mtp.recurrent_match and plain.recurrent_match
