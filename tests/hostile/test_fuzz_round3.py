"""The third fuzz campaign (issue 33), through the same harness: each case the CLI, or the API as a programmer
calls it, in its own process under a wall-time and a memory bound (tests/support/fuzz_harness.py). Classes:
  1 devices and hosts: flags (-ts, --vram, --reserve, -mg, -sm, --rpc spellings)
  2 hostile --rpc hosts (tests/support/fake_rpc.py): closed, silent, garbage, stall after the memory report
  3 runtime flags: threads, slots, batches, caches and speculative decoding out of range or contradicting
  4 the Python API misused: wrong types, on/off words, empty and absurd values
  5 caches: the cache folder a file, a device, a link, world-writable
  6 paths and split sets: names with newlines, escapes and bytes that are not UTF-8, parts missing
(Signals have their own tests: tests/hostile/test_signals.py.) Good outcomes are an honest success or one
`llamabench: error:` line; the API's refusals must be a LlamabenchError, or a TypeError for a wrong call.
"""

from __future__ import annotations

import os
import shutil
from contextlib import ExitStack
from pathlib import Path

import pytest

from llamabench.llama import rpc
from tests.support.fake_rpc import FakeRpcHost, device_count, device_memory
from tests.support.fuzz_harness import Case, run_campaign, summary

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not rpc.available(), reason="llama-cpp-python was built without the RPC backend")]
CATALOG_ID = "qwen3-5-35b-a3b"
FIT = ["-c", "2048", "-ctk", "f16", "-ctv", "f16"]


def _device_cases(model: str, env: dict) -> list[Case]:
    one = dict(group="1 devices and hosts", env=env)
    flags = [["-ts", "nan,1", "--vram", "1GiB+1GiB"], ["-ts", "inf,1", "--vram", "1GiB+1GiB"],
             ["-ts", "-1,2", "--vram", "1GiB+1GiB"], ["-ts", "0,0", "--vram", "1GiB+1GiB"],
             ["-ts", "1e309,1", "--vram", "1GiB+1GiB"], ["--vram", "0"], ["--vram", "-1GiB"], ["--vram", "nanGiB"],
             ["--vram", "1GiB+"], ["--vram", "+"], ["--vram", "1e30GiB"], ["--reserve", "1180591620717411303424"],
             ["--reserve", "-5"], ["--vram", "1GiB", "-sm", "none", "-mg", "3"], ["--vram", "1GiB", "-sm", "row"],
             ["--vram", "1GiB", "-mg", "-1"], ["--rpc", "127.0.0.1:0"], ["--rpc", ":"], ["--rpc", "127.0.0.1:99999"],
             ["--rpc", "localhost:50052,127.0.0.1:50052"], ["--rpc", "a b:1"], ["--rpc", "[::1]:x"],
             ["--cpu-only", "--vram", "1GiB"], ["--cpu-only"], ["--ram", "0", "--cpu-only"]]
    cases = [Case(argv=["fit", model, *FIT, *f], **one) for f in flags]
    refused = [["-ts", "1e-50,1e-50", "--vram", "1GiB+1GiB"], ["-ts", "1e-50,0", "--vram", "1GiB+1GiB"],
               ["-ts", "nan,1", "--vram", "1GiB+1GiB"], ["--vram", "0.0000000001"], ["--vram", "0"],
               ["--rpc", "127.0.0.1:50052,0.0.0.0:50052"], ["--rpc", "127.0.0.1:50052,127.0.1.1:50052"],
               ["--cpu-only", "--ram", "64GiB", "-ts", "1"], ["--cpu-only", "--ram", "64GiB", "-sm", "none"],
               ["--cpu-only", "--ram", "64GiB", "-mg", "1"], ["--cpu-only", "--ram", "64GiB", "--reserve", "1GiB"],
               ["--cpu-only", "--ram", "64GiB", "--vram", "1GiB"]]
    cases += [Case(argv=["fit", model, *FIT, *f], must_fail=True, **one) for f in refused]  # refused, never silent
    cases += [Case(argv=["bench", model, "--dry-run", "-p", "8", "-n", "0", *f], **one)
              for f in (["-ts", "nan"], ["-mg", "9"], ["--rpc", "127.0.0.1:1"])]
    return cases


def _host_cases(model: str, env: dict, stack: ExitStack) -> list[Case]:
    card = stack.enter_context(rpc.emulated_card())
    lies = {"2^32 devices": device_count(2**32 - 1), "no device": device_count(0),
            "2^64 free": device_memory(2**64 - 1, 2**64 - 1), "free above total": device_memory(2**31, 2**30)}
    hosts = {**{name: stack.enter_context(FakeRpcHost(answered=1000, upstream=card, claims=claims))
                for name, claims in lies.items()},
             "silent": stack.enter_context(FakeRpcHost()),
             "garbage": stack.enter_context(FakeRpcHost(says=os.urandom(4096))),
             "hello-less": stack.enter_context(FakeRpcHost(says=b"\x00" * 64)),
             "stalls after its memory": stack.enter_context(FakeRpcHost(answered=3, upstream=card))}
    fast = {**env, "LLAMABENCH_RPC_TIMEOUT": "5"}
    cases = [Case(group="2 hostile --rpc hosts", argv=["fit", model, *FIT, "--rpc", h.endpoint, "--vram", "1GiB"],
                  env=fast, must_fail=True, wall_s=60) for h in hosts.values()]
    cases += [Case(group="2 hostile --rpc hosts", argv=["bench", model, "--rpc", h.endpoint, "-ngl", "99", "-p", "8",
                                                         "-n", "2", "-r", "1"], env=fast, must_fail=True, wall_s=60)
              for name, h in hosts.items() if name != "stalls after its memory"]
    closed = FakeRpcHost()
    closed.close()
    cases.append(Case(group="2 hostile --rpc hosts", argv=["fit", model, *FIT, "--rpc", closed.endpoint], env=fast,
                      must_fail=True))
    return cases


def _runtime_cases(model: str, env: dict) -> list[Case]:
    three = dict(group="3 runtime flags", env=env)
    bench = [["-t", "4294967295"], ["-t", "2147483648"], ["-t", "0"], ["-t", "-1"], ["-ub", "0"],
             ["-ub", "100000000"], ["-b", "0"], ["-c", "-1"], ["-c", "1T"], ["-d", "-5"], ["-p", "-1"],
             ["--poll", "101"], ["--prio", "9"], ["-C", "0xZZ"], ["-fa", "maybe"], ["--repack", "2"],
             ["-ctk", "q4_0", "-ctv", "q4_0", "-fa", "off"], ["--runtime", "vllm"]]
    cases = [Case(argv=["bench", model, "--dry-run", *f], **three) for f in bench]
    fit = [["-np", "0"], ["-np", "100000"], ["-cram", "-5"], ["-ctxcp", "-1"], ["--spec-draft-n-max", "0"],
           ["--spec-draft-n-max", "100000"], ["--spec-type", "draft-eagle3"], ["--spec-type", "draft-mtp"],
           ["-md", "/nonexistent.gguf"], ["-ngld", "-3"], ["--runtime", "llama-cpp-python", "-np", "4", "-kvu"],
           ["-ctkd", "q9_9"], ["-ub", "3"], ["-fa", "auto"], ["-c", "1M"], ["-c", "0"]]
    cases += [Case(argv=["fit", model, *FIT, "--vram", "1GiB", *f], **three) for f in fit]
    server = [f"llama-server {t}" for t in ("-t 4294967295", "-tb 2147483648", "--threads-draft 513", "-t many")]
    cases += [Case(argv=["bench", model, "--runtime", "llama-server", "--server-cmd", c, "-p", "8", "-n", "0"],
                   must_fail=True, **three) for c in server]
    return cases


API = """
import sys, pathlib, llamabench as lb
from llamabench.core.errors import LlamabenchError
G = {model!r}
try:
    {call}
except (LlamabenchError, TypeError) as exc:
    print("llamabench: error: " + type(exc).__name__ + ": " + str(exc).splitlines()[0][:300], file=sys.stderr)
    sys.exit(1)
"""


def _api_cases(model: str, env: dict) -> list[Case]:
    calls = ["lb.inspect(None)", "lb.inspect(123)", "lb.inspect(pathlib.Path(G))", "lb.inspect(G, n_ctx='lots')",
             "lb.inspect(G, n_ctx=-5)", "lb.inspect(G, n_ctx=2**70)", "lb.inspect(G, type_k=5)",
             "lb.inspect(G, no_such_param=1)", "lb.inspect(G, n_seq=float('nan'))", "lb.inspect([G, G])",
             "lb.fit(G, vram=[])", "lb.fit(G, vram='abc')", "lb.fit(G, vram=float('nan'))", "lb.fit(G, vram=-1)",
             "lb.fit(G, reserve=2**70, vram='1GiB')", "lb.fit(G, cpu_only='maybe')", "lb.fit(G, verify='off', "
             "vram='1GiB', n_ctx=2048)", "lb.fit(G, n_ctx=[], vram='1GiB')", "lb.fit(G, vram={'a': 1})",
             "lb.fit(G, tensor_split='nan,1', vram='1GiB+1GiB')", "lb.fit(G, progress=5, vram='1GiB', n_ctx=2048)",
             "lb.bench(G, dry_run='perhaps')", "lb.bench(G, n_depth=[-1], dry_run=True)",
             "lb.bench(G, repetitions=0, dry_run=True)", "lb.bench(G, n_prompt='x', dry_run=True)",
             "lb.roofline(G, bandwidth=-1)", "lb.roofline(G, bandwidth=float('inf'))", "lb.roofline(G, card=7)",
             "lb.verify(G, n_ctx=0.5)", "lb.verify_matrix(None)", "lb.report([])", "lb.report(42)",
             "lb.read_records('/nonexistent')", "lb.FitRecord.from_dict({'fit': 3})",
             "lb.InspectRecord.from_dict([])", "lb.FitRecord.from_dict(None)",
             "lb.FitRecord.from_dict([])", "lb.BenchRecord.from_dict('x')", "lb.Params(n_ctx='x')"]
    return [Case(group="4 the API misused", argv=[], code=API.format(model=model, call=c), env=env) for c in calls]


def _cache_cases(model: str, env: dict, tmp: Path) -> list[Case]:
    a_file = tmp / "cache-file"
    a_file.write_text("not a folder")
    open_dir = tmp / "cache-0777"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    link = tmp / "cache-link"
    link.symlink_to(tmp / "cache-target")
    (tmp / "cache-target").mkdir()
    five = dict(group="5 caches")
    cases = []
    for cache in (a_file, open_dir, link, Path("/dev/null"), tmp / "missing" / "deeper"):
        e = {**env, "LLAMABENCH_CACHE_DIR": str(cache)}
        cases += [Case(argv=["fit", model, *FIT, "--vram", "1GiB"], env=e, **five),
                  Case(argv=["inspect", CATALOG_ID, "-c", "4096"], env=e, **five)]
    return cases


def _path_cases(model: str, env: dict, tmp: Path) -> list[Case]:
    six = dict(group="6 paths and split sets", env=env)
    odd = []
    for name in ("new\nline.gguf", "esc\x1b[2J.gguf", "tab\t.gguf", " lead.gguf"):
        p = tmp / name
        shutil.copyfile(model, p)
        odd.append(str(p))
    raw = os.fsencode(str(tmp)) + b"/bad-\xff\xfe.gguf"
    with open(raw, "wb") as f, open(model, "rb") as src:
        f.write(src.read())
    odd.append(os.fsdecode(raw))
    cases = [Case(argv=[cmd, p, *extra], inputs=(Path(p),), **six) for p in odd
             for cmd, extra in (("inspect", ["-c", "4096"]), ("fit", [*FIT, "--vram", "1GiB"]))]
    part = tmp / "split-00001-of-09999.gguf"
    shutil.copyfile(model, part)
    cases += [Case(argv=["inspect", str(part)], **six),  # a whole file, named like a part: llama.cpp reads split.count
              Case(argv=["inspect", str(tmp / "split-00002-of-00002.gguf")], must_fail=True, **six),
              Case(argv=["report", os.fsdecode(raw)], must_fail=True, **six),
              Case(argv=["inspect", str(tmp)], must_fail=True, **six)]
    return cases


def test_fuzz_round3(tmp_path, gemma):
    env = {"LLAMABENCH_CACHE_DIR": str(tmp_path / "cache"), "LLAMABENCH_REPORTS_DIR": str(tmp_path / "reports")}
    model = str(gemma)
    with ExitStack() as stack:
        cases = (_device_cases(model, env) + _host_cases(model, env, stack) + _runtime_cases(model, env)
                 + _api_cases(model, env) + _cache_cases(model, env, tmp_path) + _path_cases(model, env, tmp_path))
        counts, per_group, bad = run_campaign(cases)
    print("\nfuzz (round 3): " + summary(counts, per_group))
    assert not bad, summary(counts, per_group) + "\n" + "\n".join(f"{g} {k}: {d}" for g, k, d in bad[:20])
