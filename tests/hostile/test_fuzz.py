"""Fuzzing the command line: mutated GGUF headers (a twin, a metadata-only file, the real Gemma 3 270M) and
abused arguments, each run as a user would run it, in its own process (tests/support/fuzz_harness.py).

Every case must end in one of two ways: an honest success (exit 0), or one `llamabench: error:` line
and a non-zero exit. Never a traceback, never a death by signal, never a hang (wall-time bound),
never over the memory bound (the process tree's RSS, polled).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from llamabench.jobs.twin.build import write_twin
from llamabench.jobs.twin.writer import write_gguf
from llamabench.world import catalog
from tests.support import real_model
from tests.support.fuzz_harness import Case, run_campaign, summary

pytestmark = pytest.mark.slow

WALL_S = 90  # per case
RSS_BYTES = 3 * 2**30  # per case, the whole process tree
SEED = 20261203


def mutate(data: bytearray, rng: random.Random, header_end: int) -> bytearray:
    out = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:  # flip a few bytes in the header
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(8, header_end)] ^= 1 << rng.randrange(8)
    elif kind == 1:  # an extreme integer at a random place
        pos = rng.randrange(8, header_end - 8)
        value = rng.choice([0, 1, 2**31 - 1, 2**32 - 1, 2**40, 2**63, 2**64 - 1])
        out[pos:pos + 8] = value.to_bytes(8, "little")
    elif kind == 2:  # the tensor or key count
        pos = rng.choice([8, 16])
        out[pos:pos + 8] = rng.choice([0, 2**40, 2**64 - 1, 7]).to_bytes(8, "little")
    elif kind == 3:  # cut
        del out[rng.randrange(4, header_end):]
    else:  # a random run of bytes
        pos = rng.randrange(8, header_end - 16)
        out[pos:pos + 16] = bytes(rng.randrange(256) for _ in range(16))
    return out


def header_end_of(path: Path) -> int:
    from llamabench.world.gguf_file import read_metadata

    return min(t.offset for t in read_metadata(path).tensors) if read_metadata(path).tensors else path.stat().st_size


def mutated_files(base: Path, out_dir: Path, n: int, rng: random.Random, *, sparse_to: int | None = None) -> list[Path]:
    """n mutations of base's header; the data region stays a hole (llama.cpp's dry run never reads it)."""
    header_end = header_end_of(base) if sparse_to else base.stat().st_size
    head = bytearray(base.read_bytes()[:header_end] if sparse_to else base.read_bytes())
    files = []
    for i in range(n):
        path = out_dir / f"{base.stem}-m{i}.gguf"
        data = mutate(head, rng, min(header_end, len(head)))
        with open(path, "wb") as f:
            f.write(data)
            if sparse_to and len(data) == len(head):
                f.truncate(sparse_to)
        files.append(path)
    return files


ABUSE = [
    ["inspect"], ["inspect", ""], ["inspect", "/dev/null"], ["inspect", "/dev/zero"], ["inspect", "/"],
    ["inspect", "qwen3-30b-a3b", "-c", "-1"], ["inspect", "qwen3-30b-a3b", "-c", "99999999999"],
    ["inspect", "qwen3-30b-a3b", "--n-seq", "0"], ["inspect", "qwen3-30b-a3b", "--n-seq", "300"],
    ["inspect", "qwen3-30b-a3b", "-ctk", "q3_k"], ["inspect", "qwen3-30b-a3b", "-b", "0"],
    ["inspect", "qwen3-30b-a3b", "-ub", "4294967296"], ["inspect", "qwen3-30b-a3b", "-fa", "maybe"],
    ["fit", "qwen3-30b-a3b", "--vram", "1e999"], ["fit", "qwen3-30b-a3b", "--vram", "-1"],
    ["fit", "qwen3-30b-a3b", "--reserve", "1e999"], ["fit", "qwen3-30b-a3b", "-c", "1099511627776"],
    ["fit", "qwen3-30b-a3b", "-c", "0"], ["fit", "qwen3-30b-a3b", "--ram", "lots"],
    ["fit", "llama-3-1-8b", "--n-cpu-moe", "3"], ["bench", "qwen3-30b-a3b", "-c", "4294967552"],
    ["bench", "qwen3-30b-a3b", "-p", "0", "-n", "0"], ["bench", "qwen3-30b-a3b", "-r", "0"],
    ["bench", "qwen3-30b-a3b", "--cpu-mask", "0xZZ"], ["twin", "qwen3-30b-a3b", "--seed", "-1"],
    ["twin", "qwen3-30b-a3b", "--out", "/"], ["report"], ["report", "/nonexistent.jsonl"], ["report", "/dev/null"],
    ["roofline", "qwen3-30b-a3b", "--card", "rtx-9999"], ["roofline", "qwen3-30b-a3b"],
    ["verify", "qwen3-30b-a3b", "--ctx", "4294967295"], ["demo", "no-such-model"], ["nosuchcommand"],
]


def abuse_with_files(tmp: Path) -> list[list[str]]:
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    binary = tmp / "binary.jsonl"
    binary.write_bytes(bytes(range(256)) * 8)
    latin = tmp / "latin.jsonl"
    latin.write_bytes("caf\xe9\n".encode("latin-1"))
    shape = tmp / "shape.jsonl"
    shape.write_text('{"schema": "llamabench/bench-record/1", "key": 1}\n[1, 2]\n')
    a_file = tmp / "a-file"
    a_file.write_text("x")
    return [["inspect", str(fifo)], ["report", str(fifo)], ["report", str(binary)], ["report", str(latin)],
            ["report", str(shape)], ["bench", "qwen3-30b-a3b", "--results", str(tmp), "-c", "512"],
            ["bench", "qwen3-30b-a3b", "--results", str(fifo), "-c", "512"],
            ["bench", "qwen3-30b-a3b", "--results", str(a_file / "below.jsonl"), "-c", "512"],
            ["bench", "qwen3-30b-a3b", "--results", str(binary), "--resume", "-c", "512", "-p", "8", "-n", "0",
             "-r", "1"],
            ["inspect", "qwen3-30b-a3b", "--results", str(tmp)], ["report", str(binary), "--out-dir", str(a_file)]]


def test_fuzz_the_command_line(tmp_path):
    rng = random.Random(SEED)
    env = {"LLAMABENCH_CACHE_DIR": str(tmp_path / "cache")}
    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, tmp_path / "twin.gguf").path
    meta_only = tmp_path / "meta.gguf"
    write_gguf(meta_only, "qwen35moe", {"general.architecture": "qwen35moe", **{
        f"qwen35moe.{k}": v for k, v in dict(block_count=40, context_length=262144, embedding_length=2048,
                                             full_attention_interval=4).items()},
        "qwen35moe.attention.head_count": 16, "qwen35moe.attention.head_count_kv": 2,
        "qwen35moe.attention.key_length": 256, "qwen35moe.attention.value_length": 256,
        "qwen35moe.ssm.conv_kernel": 4, "qwen35moe.ssm.state_size": 128, "qwen35moe.ssm.group_count": 16,
        "qwen35moe.ssm.time_step_rank": 32, "qwen35moe.ssm.inner_size": 4096}, [])
    cases: list[list[str]] = []
    mutants = tmp_path / "mutants"
    mutants.mkdir()
    for path in mutated_files(meta_only, mutants, 160, rng):
        cases.append(["inspect", str(path), "--json"])
    twin_mutants = mutated_files(twin, mutants, 60, rng, sparse_to=twin.stat().st_size)
    cases += [["inspect", str(p)] for p in twin_mutants[:40]]
    cases += [["verify", str(p), "--ctx", "4096"] for p in twin_mutants[40:]]
    gemma, _ = real_model.fetch()
    if gemma is not None:
        gemma_mutants = mutated_files(gemma, mutants, 30, rng, sparse_to=gemma.stat().st_size)
        cases += [["inspect", str(p)] for p in gemma_mutants[:15]]
        cases += [["verify", str(p), "--ctx", "2048"] for p in gemma_mutants[15:]]
    cases += ABUSE + abuse_with_files(tmp_path)
    counts, per_group, bad = run_campaign([Case("command line", argv, env=env, wall_s=WALL_S, rss_bytes=RSS_BYTES)
                                           for argv in cases])
    print(f"\nfuzz: {summary(counts, per_group)}")
    assert not bad, summary(counts, per_group) + "\n" + "\n".join(f"{k}: {d}" for _, k, d in bad[:10])
    assert counts["one-line error"] > len(cases) // 2  # the mutations do break files
    shutil.rmtree(mutants)
