"""`llamabench bench` on real llama.cpp with twins: records, failures, kill and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from llamabench.cli import main
from llamabench.records import records

pytestmark = pytest.mark.slow  # real llama.cpp contexts, timed


def read_records(path) -> list[records.BenchRecord]:
    return list(records.read_records(path).records)


MIB = 2**20


def key(r: records.BenchRecord) -> tuple:
    return r.params, r.test


def bench(tmp_path, *argv, exit_code: int = 0) -> list[records.BenchRecord]:
    results = tmp_path / "results.jsonl"
    assert main(["bench", *argv, "--results", str(results), "-o", "jsonl"]) == exit_code
    return read_records(results)


def test_hybrid_record_matches_theory(tmp_path, capsys):
    got = bench(tmp_path, "qwen3-5-35b-a3b", "-c", "2048", "-p", "16", "-n", "2", "-d", "0,64", "-r", "2", "-t", "2")
    assert [r.test.name for r in got] == ["pp16", "tg2", "pp16 @ d64", "tg2 @ d64"]
    for r in got:
        assert r.ok, r.reason
        assert r.footprint.kv_bytes == 10 * 2 * 256 * 2 * 2 * 2048
        assert r.footprint.recurrent_state_bytes == 65_863_680
        assert r.kv_match and r.recurrent_match
        assert r.allocations.kv_caches[0].size_mib == 40.0
        assert r.allocations.recurrent[0].size_mib == 62.81
        assert len(r.samples_ns) == 2 and all(ns > 0 for ns in r.samples_ns)
        assert r.avg_ts > 0 and r.stddev_ts >= 0
        assert r.memory.rss_delta_bytes > 0
        assert r.memory.gpu_note  # no NVML here: said, not invented
        assert r.versions.llama_cpp_python and r.versions.gguf
        assert r.machine.cpu and r.machine.ram_bytes and r.machine.memory_bandwidth.peak_gbps > 0
        assert r.params.n_threads == 2 and r.model.is_twin
    out = capsys.readouterr().out
    printed = [records.BenchRecord.from_dict(json.loads(line)) for line in out.splitlines()]
    assert printed == got  # -o jsonl prints the records the file holds


def test_swa_record_matches_theory(tmp_path):
    # gpt-oss: 12 full layers grow with n_ctx (96 MiB at 4096), 12 SWA layers hold pad256(128 + 512) = 768 cells
    records = bench(tmp_path, "gpt-oss-20b", "-c", "4096", "-p", "16", "-n", "2", "-r", "1", "-t", "2")
    assert {r.status for r in records} == {"ok"}
    r = records[0]
    assert r.footprint.kv_bytes == 12 * 8 * 64 * 2 * 2 * 4096 + 12 * 8 * 64 * 2 * 2 * 768
    assert r.footprint.swa_kv_bytes == 12 * 8 * 64 * 2 * 2 * 768
    caches = r.allocations.kv_caches
    assert [(c.cells, c.layers) for c in caches] == [(4096, 12), (768, 12)]
    assert [c.size_mib for c in caches] == [96.0, 18.0]
    assert r.kv_match


def test_failures_are_recorded_and_the_sweep_goes_on(tmp_path):
    records = bench(tmp_path, "qwen3-30b-a3b", "-c", "16777216,1024", "-ctv", "f16,q8_0", "-fa", "off",
                    "-p", "16", "-n", "2", "-r", "1", "-t", "2", exit_code=1)  # exit 1: some tests failed
    by_cell = {}
    for r in records:
        by_cell.setdefault((r.params.n_ctx, r.params.type_v), []).append(r)
    assert len(records) == 8
    for (n_ctx, type_v), rs in by_cell.items():
        statuses = {r.status for r in rs}
        if type_v == "q8_0":
            assert statuses == {"failed"}
            assert all("quantized V cache requires flash_attn" in r.reason for r in rs)
            assert all(r.footprint is None and "needs flash attention" in r.theory_error for r in rs)
        elif n_ctx == 16777216:
            assert statuses == {"failed"}
            assert all("failed to allocate" in r.reason for r in rs), rs[0].reason
        else:
            assert statuses == {"ok"}  # the cell after the failures still ran


def test_killed_sweep_resumes_with_every_test_once(tmp_path):
    results = tmp_path / "killed.jsonl"
    argv = [sys.executable, "-m", "llamabench.cli", "bench", "qwen3-30b-a3b", "-c", "1024,1280,1536,1792",
            "-p", "16", "-n", "2", "-r", "1", "-t", "1", "--results", str(results), "-o", "jsonl"]
    env = dict(os.environ)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.time() + 1200  # however long a loaded machine takes; only a hung run meets it
    while time.time() < deadline and len(read_records(results)) < 3 and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = read_records(results)
    assert 3 <= len(before) < 8, "the kill should land mid-sweep"
    done = subprocess.run(argv + ["--resume"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    after = read_records(results)
    keys = [key(r) for r in after]
    assert len(keys) == 8 and len(set(keys)) == 8
    assert after[: len(before)] == before  # nothing lost or rewritten
    assert "already there (--resume)" in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_keeps_what_was_measured(tmp_path, signum):
    results = tmp_path / "interrupted.jsonl"
    # 40 contexts, 80 tests: the signal comes after the second record, long before the last, however fast or loaded
    # the machine (with 4 contexts a loaded machine saw the sweep end before the signal: exit 0, not 130)
    argv = [sys.executable, "-m", "llamabench.cli", "bench", "qwen3-30b-a3b", "-c", "1024-11008+256",
            "-p", "16", "-n", "2", "-r", "1", "-t", "1", "--results", str(results), "-o", "jsonl"]
    # a terminal's Ctrl-C: SIGINT at its default in the tool, whatever this runner inherited (a shell runs a
    # background job with SIGINT ignored, and Python then leaves it ignored: the bench would run to its end)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # wait for the second record however long a loaded machine takes (on a fresh machine the twin is written first);
    # the bound only keeps a hung run from hanging the suite
    deadline = time.time() + 1200
    while time.time() < deadline and len(read_records(results)) < 2 and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None and len(read_records(results)) >= 2, "the sweep ended, or wrote nothing, before Ctrl-C"
    proc.send_signal(signum)  # Ctrl-C, or a kill / the system's shutdown
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum
    assert err.strip().count("\n") == 0 and "interrupted" in err and "--resume" in err and "Traceback" not in err
    kept = read_records(results)
    assert 2 <= len(kept) < 80 and len({key(r) for r in kept}) == len(kept)


def test_two_caches_each_rounded_by_llama_cpp_still_match(tmp_path):
    """gpt-oss at -c 512, q8_0: llama.cpp prints each of its two caches as 6.38 MiB (6.375 each), 12.76 in all
    against the theory's 12.75: one rounding per printed line, not a MISMATCH (verify said +0.01 ok)."""
    records = bench(tmp_path, "gpt-oss-20b", "-c", "512", "-ctk", "q8_0", "-ctv", "q8_0", "-p", "8", "-n", "0",
                    "-r", "1", "-t", "2")
    r = records[0]
    assert [c.size_mib for c in r.allocations.kv_caches] == [6.38, 6.38] and r.kv_match
