"""bench --runtime llama-server, pure: its records (old ones still read), the command it starts, the report's
side-by-side table of llama-server and Llama() at the same depth."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from llamabench.core.errors import UsageError
from llamabench.jobs.bench.serve import command_params
from llamabench.llama import serving
from llamabench.records.bench import BenchRecord, ServerBench, ServerRequest
from llamabench.records.records import append, read_records
from llamabench.reporting.runtimes import comparison_md
from llamabench.settings.bench_tests import TestKind
from llamabench.settings.params import Params
from tests.pure.test_records import bench_record


def server_record(depth=0, kind=TestKind.TG, ts=8.0, concurrency=1) -> BenchRecord:
    base = bench_record(depth=depth, kind=kind, ts=ts)
    steps = 15 if kind is TestKind.TG else 16
    request = ServerRequest(int(steps / ts * 1e9), 50_000_000, 16 if kind is TestKind.PP else 1, 100.0,
                            16 if kind is TestKind.TG else 1, steps / ts * 1e3, depth, 10, 7)
    block = ServerBench("llama-server -m m.gguf -c 4096 -np 1", "http://127.0.0.1:1", concurrency, concurrency,
                        (request,) * concurrency)
    return replace(base, runtime="llama-server", server=block, allocations=None, memory=None)


def test_a_server_record_round_trips_and_an_old_record_reads_as_a_llama_context(tmp_path):
    path = tmp_path / "r.jsonl"
    record = append(path, server_record(concurrency=2))
    old = bench_record().to_dict()
    del old["runtime"], old["server"]  # written before llama-server records existed
    path.open("a").write(json.dumps(old) + "\n")
    back, legacy = read_records(path).records
    assert back == record and back.server.acceptance == 0.7 and back.concurrency == 2
    assert back.avg_ts == pytest.approx(16.0)  # the total of two parallel requests
    assert back.server.request_ts("tg", 16) == pytest.approx(8.0) and back.to_dict()["summary"]["ttft_ms"] == 50.0
    assert legacy.runtime == "llama-cpp-python" and legacy.server is None and legacy.concurrency == 1
    assert "llama-server x2 parallel" in back.series and "llama-server" not in legacy.series


def test_a_server_record_without_its_block_is_refused(tmp_path):
    data = server_record().to_dict()
    data["server"] = None
    path = Path(tmp_path / "r.jsonl")
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(Exception, match="llama-server block"):
        read_records(path)


def test_the_report_states_the_difference_at_the_same_depth():
    bench = [bench_record(depth=512, ts=10.0), server_record(depth=512, ts=8.0), server_record(depth=0, ts=9.0)]
    md = comparison_md(bench)
    assert "| tg16 @ d512 | 512 | 10.00 | 8.00 |" in md and "-20.0%" in md
    assert "| tg16 |" not in md  # measured by one runtime only
    assert comparison_md([bench_record()]) is None


def test_a_printed_command_is_read_and_completed(tmp_path):
    line = "llama-server -m qwen.gguf -c 32768 -ngl 99 -fa on -ctk q8_0 -ctv q8_0 -np 4 -kvu --cache-ram 8192"
    params, has_ctx = command_params(line, Params(n_threads=2))
    assert has_ctx and params.n_ctx == 32768 and params.type_k == "q8_0" and params.n_seq == 4 and params.kv_unified
    assert params.n_gpu_layers == 99 and params.n_threads == 2
    binary = tmp_path / "llama-server"
    argv = serving.command_argv("llama-server -c 4096", binary, model="m.gguf", repack=False)
    assert argv == [str(binary), "-m", "m.gguf", "-c", "4096", "-nr"]
    with pytest.raises(UsageError, match="--url"):
        serving.command_argv("llama-server -m m.gguf --port 8080", binary, model="m.gguf")
    with pytest.raises(UsageError, match="start with llama-server"):
        serving.command_argv("python -m http.server", binary, model="m.gguf")
    for threads in ("-t 4294967295", "-tb 2147483648", "--threads-draft 513", "-t many"):
        with pytest.raises(UsageError, match="threads"):
            serving.command_argv(f"llama-server {threads}", binary, model="m.gguf")
    assert serving.command_argv("llama-server -t -1 -tb 512", binary, model="m.gguf")[-4:] == ["-t", "-1", "-tb",
                                                                                                "512"]


def test_flags_of_a_bench_configuration():
    argv = serving.flags_of(Params(n_ctx=8192, n_seq=2, repack=False, n_threads=1, type_k="q8_0"), "m.gguf")
    assert argv[:6] == ["-m", "m.gguf", "-c", "8192", "-np", "2"] and argv[-1] == "-nr" and "q8_0" in argv


def test_server_options_only_with_the_server_runtime(tmp_path):
    import llamabench as lb

    gguf = tmp_path / "none.gguf"
    with pytest.raises(UsageError, match="only with runtime llama-server"):
        lb.bench(str(gguf), concurrency=2, dry_run=True)
    with pytest.raises(UsageError, match="not both"):
        lb.bench(str(gguf), runtime="llama-server", server_cmd="llama-server", url="http://x:1", dry_run=True)


def test_the_depth_line_shows_the_t_s_the_table_shows():
    """Door round 3, trap 8: the line printed per depth gave tokens over all repetitions' time, the table the mean of
    the repetitions' t/s: two client t/s for one test. Both are the table's now."""
    from llamabench.commands.bench import _rate
    from llamabench.render.bench import speed_table

    record = replace(server_record(ts=8.0, concurrency=2), samples_ns=(1_000_000_000, 3_000_000_000))
    shown = _rate(record).split(" t/s")[0]
    assert shown == f"{record.avg_ts:.2f}" and shown in speed_table([record], "md")
