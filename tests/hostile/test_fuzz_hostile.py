"""The second fuzz campaign: what a hostile user, a hostile server or a shared results file can do.

Each case is the CLI run as a user would run it, in its own process, under a wall-time and a memory
bound (tests/support/fuzz_harness.py). The classes, as the issue numbers them:
  1 shared results file: labels that name folders outside --out-dir   (tests/support/fuzz_results.py)
  2 user files: outputs onto inputs, links, FIFOs, device nodes, files that hold no records
  3 remote reads: trickling, 1-byte ranges, lying lengths, changing ETags, traversal, credentials
                                                                      (tests/support/fuzz_servers.py)
  4 memory: metadata key and array counts, sweeps and fits past their bounds
  5 ordinary conditions: read-only and full disks (small tmpfs mounts, as root), stdout on /dev/full,
    /proc/self/mem, malformed environment variables
  6 values read back: NaN, negative, infinite, huge and mistyped values in results files and
    projectors                                                        (tests/support/fuzz_results.py)
  7 terminal injection: escape sequences and forged lines in a model's strings
No case may end in a traceback, a signal death, a hang, memory past the bound, a silent wrong result,
a damaged input or a write outside the asked paths.
"""

from __future__ import annotations

import os
import stat
import struct
import subprocess
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from llamabench.jobs.twin.build import write_twin
from llamabench.world import catalog
from tests.support import fuzz_results, fuzz_servers
from tests.support.fuzz_harness import Case, Run, run_campaign, summary

pytestmark = pytest.mark.slow
MODEL_ID = "qwen3-30b-a3b"


# raw GGUF headers ------------------------------------------------------------------------------
def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def raw_gguf(path: Path, kv: list[bytes], n_tensors: int = 0, tensor_infos: bytes = b"",
             declared_kv: int | None = None):
    """A GGUF v3 header from encoded key/value entries (and tensor infos), written at once."""
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kv) if declared_kv is None else declared_kv))
        for entry in kv:
            f.write(entry)
        f.write(tensor_infos)
    return path


def kv_string(key: str, value: str) -> bytes:
    return _string(key) + struct.pack("<I", 8) + _string(value)


def kv_u32(key: str, value: int) -> bytes:
    return _string(key) + struct.pack("<II", 4, value)


def kv_u32_array(key: str, n: int) -> bytes:
    return _string(key) + struct.pack("<IIQ", 9, 4, n) + b"\0" * (4 * n)


def _model_keys() -> list[bytes]:
    return [kv_string("general.architecture", "llama"), kv_u32("llama.block_count", 4),
            kv_u32("llama.context_length", 4096), kv_u32("llama.embedding_length", 256),
            kv_u32("llama.attention.head_count", 4), kv_u32("llama.attention.head_count_kv", 2)]


# the mounts: a read-only and a full filesystem ---------------------------------------------------
def _mount_tmpfs(stack: ExitStack, where: Path, size: str, *, read_only: bool = False) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                      capture_output=True).returncode != 0:
        return False
    stack.callback(subprocess.run, ["umount", "-l", str(where)], capture_output=True)
    if read_only:
        (where / "cache").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)
    else:  # fill it to the last block
        with open(where / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
    return True


def no_escape(run: Run) -> str | None:
    for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        if "\x1b" in text or "\x07" in text:
            return f"a raw escape character reached {name}"
        if any(line.strip().startswith("FORGED") for line in text.splitlines()):
            return f"a forged line reached {name}"
    return None


def _sandbox(tmp: Path, name: str) -> Path:
    folder = tmp / "w" / name
    folder.mkdir(parents=True)
    return folder


def _user_file_cases(tmp: Path, env: dict, twin: Path) -> tuple[list[Case], Path]:
    """2: the user's own files; and the results file the later classes read."""
    w = _sandbox(tmp, "files")
    model = w / "model.gguf"
    model.write_bytes(twin.read_bytes())
    hard = w / "hard.gguf"
    os.link(model, hard)
    records = w / "records.jsonl"
    subprocess.run([os.sys.executable, "-m", "llamabench.cli", "inspect", MODEL_ID, "--results", str(records)],
                   env={**os.environ, **env}, check=True, capture_output=True)
    link_records = w / "link-records.jsonl"
    link_records.symlink_to(records)
    notes = w / "notes.txt"
    notes.write_text("my notes, not records\n")
    link_notes = w / "link-notes.jsonl"
    link_notes.symlink_to(notes)
    fifo = w / "fifo"
    os.mkfifo(fifo)
    link_model = w / "link.gguf"
    link_model.symlink_to(model)
    device = w / "null-device"
    if os.geteuid() == 0:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    inputs = tuple(p for p in (model, hard, records, link_records, notes, link_notes, fifo, link_model, device)
                   if os.path.lexists(p))
    user = dict(group="2 user files", env=env, cwd=w, inputs=inputs, watch=w, wall_s=60)
    cases = [
        Case(argv=["twin", str(model), "--out", str(model)], must_fail=True, **user),
        Case(argv=["twin", str(model), "--out", str(hard)], must_fail=True, **user),
        Case(argv=["twin", str(model), "--out", "model.gguf"], must_fail=True, **user),
        Case(argv=["twin", str(link_model), "--out", str(model)], must_fail=True, **user),
        Case(argv=["twin", MODEL_ID, "--out", str(link_model)], must_fail=True, **user),
        Case(argv=["twin", MODEL_ID, "--out", str(fifo)], must_fail=True, **user),
        Case(argv=["twin", MODEL_ID, "--out", str(records)], must_fail=True, **user),
        Case(argv=["inspect", str(model), "--results", str(model)], must_fail=True, **user),
        Case(argv=["inspect", MODEL_ID, "--results", str(model)], must_fail=True, **user),
        Case(argv=["roofline", MODEL_ID, "--bandwidth", "100", "--results", str(model)], must_fail=True, **user),
        Case(argv=["inspect", MODEL_ID, "--results", str(link_records)], must_fail=True, **user),
        Case(argv=["inspect", MODEL_ID, "--results", str(notes)], must_fail=True, **user),
        Case(argv=["bench", MODEL_ID, "--resume", "--results", str(link_notes), "-c", "512", "-p", "8", "-n", "0",
                   "-r", "1"], must_fail=True, **user),
        Case(argv=["bench", MODEL_ID, "--resume", "--results", str(notes), "-c", "512", "-p", "8", "-n", "0",
                   "-r", "1"], must_fail=True, **user),
        Case(argv=["inspect", MODEL_ID, "--results", str(fifo)], must_fail=True, **user),
        Case(argv=["report", str(records), "--out-dir", str(w / "records.jsonl")], must_fail=True, **user),
    ]
    w_ok, w_twin = _sandbox(tmp, "files-written"), _sandbox(tmp, "twin-written")  # cases that write: a folder each
    empty = w_ok / "empty.jsonl"
    empty.write_text("")
    cases += [Case(group="2 user files", argv=["inspect", MODEL_ID, "--results", str(empty)], env=env, cwd=w_ok,
                   watch=w_ok, allowed=(empty,)),
              Case(group="2 user files", argv=["twin", MODEL_ID, "--out", str(w_twin / "new-twin.gguf")], env=env,
                   cwd=w_twin, watch=w_twin, allowed=(w_twin / "new-twin.gguf",))]
    if os.path.lexists(device):
        cases += [Case(argv=["twin", MODEL_ID, "--out", str(device)], must_fail=True, **user),
                  Case(argv=["inspect", MODEL_ID, "--results", str(device)], must_fail=True, **user)]
    w_report = _sandbox(tmp, "report-onto-input")
    input_copy = w_report / "record.json"  # a results file named like the report's own record.json
    input_copy.write_bytes(records.read_bytes())
    cases.append(Case(group="2 user files", argv=["report", str(input_copy), "--out-dir", str(w_report)], env=env,
                      inputs=(input_copy,), watch=w_report, must_fail=True))
    return cases, records


def _memory_cases(tmp: Path, env: dict) -> list[Case]:
    """4: memory."""
    w = _sandbox(tmp, "memory")
    arrays = raw_gguf(w / "arrays.gguf", _model_keys() + [kv_u32_array(f"x.arr{i}", 1000) for i in range(1000)])
    many_keys = raw_gguf(w / "keys.gguf", _model_keys() + [kv_u32(f"k{i:07d}", i) for i in range(1_000_000)])
    some_keys = raw_gguf(w / "some-keys.gguf", _model_keys() + [kv_u32(f"k{i:07d}", i) for i in range(15_000)])
    claims = raw_gguf(w / "claims.gguf", _model_keys(), declared_kv=2**40)
    tensor_info = _string("t") + struct.pack("<IQIQ", 1, 32, 0, 0)
    tensors = raw_gguf(w / "tensors.gguf", _model_keys(), n_tensors=200_000, tensor_infos=tensor_info * 200_000)
    long_name = raw_gguf(w / "long-name.gguf", [kv_string("general.name", "n" * (16 << 20))] + _model_keys())
    mem = dict(group="4 memory", env=env, cwd=w, watch=w, rss_bytes=1536 * 2**20, memory_error=True, wall_s=90)
    cases = [Case(argv=["inspect", str(p)], inputs=(p,), **mem) for p in (arrays, many_keys, some_keys, claims,
                                                                           tensors, long_name)]
    cases += [Case(argv=["inspect", str(p), "--json"], inputs=(p,), **mem) for p in (arrays, many_keys)]
    cases += [
        Case(argv=["bench", MODEL_ID, "--dry-run", "-c", "1-1000000000+1"], must_fail=True, **mem),
        Case(argv=["bench", MODEL_ID, "--dry-run", "-c", "1024-2048+1", "-b", "1-1024+1"], must_fail=True, **mem),
        Case(argv=["bench", MODEL_ID, "--dry-run", "-c", "4096", "-d", "0-100000000+1"], must_fail=True, **mem),
        Case(argv=["bench", MODEL_ID, "--dry-run", "-c", "4096", "-p", "1-4000+1", "-d", "0-4000+1"], must_fail=True,
             **mem),
        Case(argv=["bench", MODEL_ID, "--dry-run", "-c", ",".join(["4096"] * 20_000)], must_fail=True, **mem),
        Case(argv=["bench", MODEL_ID, "--dry-run", "-c", "1-64*2", "-ctk", "f16,q8_0,q4_0", "-fa", "on,off"], **mem),
        Case(argv=["fit", MODEL_ID, "-c", "1024-1024000+1024", "--vram", ",".join(f"{g}GiB" for g in range(1, 1001))],
             must_fail=True, **mem),
        Case(argv=["fit", MODEL_ID, "-c", "1024-1024000+1024"], must_fail=True, **mem),
        Case(argv=["inspect", MODEL_ID, "-c", "1-1000000000*2"], **mem),
    ]
    return cases


def _condition_cases(tmp: Path, stack: ExitStack, env: dict, twin: Path, records: Path) -> list[Case]:
    """5: ordinary conditions."""
    cases: list[Case] = []
    w = _sandbox(tmp, "conditions")
    a_file = w / "a-file"
    a_file.write_text("x")
    cond = dict(group="5 ordinary conditions", cwd=w, watch=w, wall_s=90)
    ro = tmp / "ro-mount"
    if _mount_tmpfs(stack, ro, "1m", read_only=True):
        cases += [Case(argv=argv, env={**env, "LLAMABENCH_CACHE_DIR": str(ro / "cache")}, **cond)
                  for argv in (["inspect", MODEL_ID], ["verify", MODEL_ID, "--ctx", "2048"],
                               ["twin", MODEL_ID, "--out", str(ro / "cache" / "t.gguf")])]
        cases += [Case(argv=["inspect", MODEL_ID], env={**env, "LLAMABENCH_CACHE_DIR": None, "HOME": str(ro)}, **cond),
                  Case(argv=["verify", MODEL_ID, "--ctx", "2048"], env={**env, "LLAMABENCH_CACHE_DIR": None,
                                                                        "HOME": str(ro)}, **cond),
                  Case(argv=["inspect", MODEL_ID, "--results", str(ro / "r.jsonl")], env=env, must_fail=True, **cond),
                  Case(argv=["report", str(records), "--out-dir", str(ro / "report")], env=env, must_fail=True,
                       **cond)]
    full = tmp / "full-mount"
    if _mount_tmpfs(stack, full, "2m"):  # the cases run side by side: each names what it must not leave
        on_full = dict(cond, watch=None)
        cases += [Case(argv=["twin", MODEL_ID, "--out", str(full / "t.gguf")], env=env, must_fail=True,
                       forbidden=(full / "t.gguf",), **on_full),
                  Case(argv=["inspect", MODEL_ID, "--results", str(full / "r.jsonl")], env=env, must_fail=True,
                       forbidden=(full / "r.jsonl",), **on_full),
                  Case(argv=["report", str(records), "--out-dir", str(full / "report")], env=env, must_fail=True,
                       forbidden=(full / "report" / "record.json", full / "report" / "report.md"), **on_full),
                  Case(argv=["verify", MODEL_ID, "--ctx", "2048"], env={**env, "LLAMABENCH_CACHE_DIR": str(full)},
                       **on_full)]
    else:
        print("fuzz: the read-only and full filesystem cases need root and tmpfs mounts: passed over")
    cases += [
        Case(argv=["twin", MODEL_ID, "--out", str(a_file / "t.gguf")], env=env, must_fail=True, **cond),
        Case(argv=["inspect", MODEL_ID, "--results", str(a_file / "r.jsonl")], env=env, must_fail=True, **cond),
        Case(argv=["report", str(records), "--out-dir", str(a_file / "sub")], env=env, must_fail=True, **cond),
        Case(argv=["inspect", MODEL_ID], env=env, stdout_path="/dev/full", must_fail=True, **cond),
        Case(argv=["inspect", MODEL_ID, "--json"], env=env, stdout_path="/dev/full", must_fail=True, **cond),
        Case(argv=["fit", MODEL_ID, "--help"], env=env, stdout_path="/dev/full", **dict(cond, check=None)),
        Case(argv=["inspect", "/proc/self/mem"], env=env, must_fail=True, **cond),
        Case(argv=["inspect", "/proc/self/environ"], env=env, must_fail=True, **cond),
        Case(argv=["inspect", "/dev/urandom"], env=env, must_fail=True, **cond),
    ]
    for value in ("abc", "-1", "0", "nan", "inf", "1e999", "", " "):
        cases.append(Case(argv=["inspect", MODEL_ID], env={**env, "LLAMABENCH_HTTP_TIMEOUT": value}, **cond))
        cases.append(Case(argv=["inspect", "https://127.0.0.1:9/x.gguf"], env={**env, "LLAMABENCH_HTTP_TIMEOUT": value},
                          must_fail=True, **cond))
    binary = w / "binary.toml"
    binary.write_bytes(bytes(range(256)) * 64)
    catalog_fifo = w / "catalog-fifo"
    os.mkfifo(catalog_fifo)
    for value in (str(binary), str(w), str(catalog_fifo), str(w / "none.toml"), str(a_file), "/dev/zero"):
        cases.append(Case(argv=["inspect", MODEL_ID], env={**env, "LLAMABENCH_CATALOG": value}, must_fail=True,
                          inputs=(catalog_fifo,), **cond))
        cases.append(Case(argv=["inspect", str(twin)], env={**env, "LLAMABENCH_CATALOG": value}, inputs=(catalog_fifo,),
                          **cond))
    cases += [Case(argv=["inspect", MODEL_ID], env={**env, "LLAMABENCH_CACHE_DIR": ""}, **cond),  # needs no cache
              Case(argv=["verify", MODEL_ID, "--ctx", "2048"], env={**env, "LLAMABENCH_CACHE_DIR": ""}, must_fail=True,
                   **cond),
              Case(argv=["verify", MODEL_ID, "--ctx", "2048"], env={**env, "LLAMABENCH_CACHE_DIR": str(a_file)},
                   must_fail=True, **cond),
              Case(argv=["report", str(records)], env={**env, "LLAMABENCH_REPORTS_DIR": ""}, must_fail=True, **cond)]
    return cases


def _terminal_cases(tmp: Path, env: dict, entry) -> list[Case]:
    """7: terminal injection."""
    cases: list[Case] = []
    w = _sandbox(tmp, "terminal")
    evil_names = ["\x1b]0;pwned\x07\x1b[2J", "ok\nFORGED: all match", "\u202eeman", "a\rFORGED\x1b[K"]
    written = tuple(w / f"r{i}.jsonl" for i in range(len(evil_names)))
    for i, name in enumerate(evil_names):
        evil = write_twin(replace(entry.metadata, name=name), w / f"evil{i}.gguf").path
        term = dict(group="7 terminal injection", env=env, cwd=w, watch=w, inputs=(evil,), check=no_escape,
                    allowed=written, wall_s=90)
        cases += [Case(argv=["inspect", str(evil)], **term),
                  Case(argv=["inspect", str(evil), "-o", "md"], **term),
                  Case(argv=["inspect", str(evil), "--results", str(w / f"r{i}.jsonl")], **term)]
        if i == 0:
            cases += [Case(argv=["verify", str(evil), "--ctx", "2048"], **term),
                      Case(argv=["fit", str(evil), "-c", "4096", "--vram", "1GiB"], **term)]
    evil_key = raw_gguf(w / "evil-key.gguf", _model_keys() + [kv_u32("llama.\x1b[2Jrope", 1),
                                                               kv_string("general.architecture\x1b]0;x\x07", "x")])
    evil_arch = raw_gguf(w / "evil-arch.gguf", [kv_string("general.architecture", "llama\x1b[2J")] + _model_keys()[1:])
    cases += [Case(group="7 terminal injection", argv=["inspect", str(p)], env=env, cwd=w, inputs=(p,),
                   check=no_escape) for p in (evil_key, evil_arch)]
    return cases


def own_cases(tmp: Path, stack: ExitStack) -> list[Case]:
    cache = tmp / "cache"
    env = {"LLAMABENCH_CACHE_DIR": str(cache), "LLAMABENCH_REPORTS_DIR": str(tmp / "reports")}
    entry = catalog.get_entry(MODEL_ID)
    twin = write_twin(entry.metadata, tmp / "twin.gguf").path
    cases, records = _user_file_cases(tmp, env, twin)
    cases += _memory_cases(tmp, env)
    cases += _condition_cases(tmp, stack, env, twin, records)
    cases += _terminal_cases(tmp, env, entry)
    return cases


def test_fuzz_hostile(tmp_path):
    with ExitStack() as stack:
        cases = own_cases(tmp_path, stack)
        servers = tmp_path / "servers"
        servers.mkdir()
        cases += fuzz_servers.cases(servers, stack)
        results = tmp_path / "results"
        results.mkdir()
        cases += fuzz_results.cases(results, stack)
        counts, per_group, bad = run_campaign(cases)
    print("\nfuzz (hostile): " + summary(counts, per_group))
    assert not bad, summary(counts, per_group) + "\n" + "\n".join(f"{g} {k}: {d}" for g, k, d in bad[:15])
