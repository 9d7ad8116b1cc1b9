"""One fuzz case, run as a user would run it: the CLI in its own process, under a wall-time and a memory bound.

Shared by the fuzz campaigns (`test_fuzz.py`, `test_fuzz_hostile.py`). A case ends in one of two good ways,
an honest success (exit 0) or one `llamabench: error:` line and a non-zero exit, and in none of the bad
ones: a traceback, a death by signal, a hang, memory past the bound, a silent wrong result (a case that
must fail exits 0, or its own check says what is wrong), a damaged input (bytes, kind or link of a file
the case names as an input changed), or a write outside the asked paths (a file appeared, vanished or
changed in the case's watched folder outside the paths it may write, or a forbidden path exists after).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

GOOD = ("honest success", "one-line error", "failed in its records")
BAD = ("traceback", "signal death", "hang", "over memory", "not one line", "wrong result", "damaged input",
       "written outside", "security")


@dataclass(frozen=True)
class Run:
    """What a case's process did."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class Case:
    group: str  # the class the case belongs to
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to (or, with value None, removed from) the environment
    cwd: Path | None = None
    inputs: tuple[Path, ...] = ()  # must be as they were: bytes, kind, link target
    watch: Path | None = None  # a folder in which nothing may change outside `allowed`
    allowed: tuple[Path, ...] = ()  # paths (files or folders) the case may write in `watch`
    forbidden: tuple[Path, ...] = ()  # paths that must not exist after the run
    must_fail: bool = False  # an exit 0 is a silent wrong result
    check: Callable[[Run], str | None] | None = None  # returns what is wrong, or None
    stdout_path: str | None = None  # stdout goes to this file (e.g. /dev/full), else it is captured
    wall_s: float = 60
    rss_bytes: int = 2 * 2**30
    memory_error: bool = False  # a refusal by memory (MemoryError) is the wrong outcome too
    code: str | None = None  # Python run with `python -c` instead of the CLI (the API, as a programmer calls it)

    def command(self) -> list[str]:
        return [sys.executable, "-c", self.code] if self.code else [sys.executable, "-m", "llamabench.cli", *self.argv]

    def label(self) -> str:
        if self.code:
            calls = [line.strip() for line in self.code.splitlines() if "lb." in line] or [self.code.strip()]
            return f"[{self.group}] python -c {calls[0]!r}"[:300]
        env = " ".join(f"{k}={v!r}" for k, v in self.env.items()
                       if k not in ("LLAMABENCH_CACHE_DIR", "LLAMABENCH_REPORTS_DIR"))
        return f"[{self.group}] {env + ' ' if env else ''}{' '.join(self.argv)}"[:300]


def _fingerprint(path: Path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        return ("file", st.st_size, st.st_mtime_ns, st.st_ino, _digest(path))
    return (stat.S_IFMT(st.st_mode), st.st_ino)


def _digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return "unreadable"
    return h.hexdigest()


def _tree(root: Path, allowed: tuple[Path, ...]) -> dict[str, tuple]:
    allowed_s = [str(a) for a in allowed]
    out = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            p = os.path.join(folder, name)
            if any(p == a or p.startswith(a + os.sep) for a in allowed_s):
                continue
            st = os.lstat(p)
            out[p] = (stat.S_IFMT(st.st_mode), st.st_size if not stat.S_ISDIR(st.st_mode) else 0, st.st_mtime_ns)
    return out


def _environment(case: Case) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in case.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _drain(proc: subprocess.Popen, stdout: bool) -> tuple[dict[str, bytes], list[threading.Thread]]:
    """Reads the process's stderr (and its stdout, where captured) in threads, into the dict returned."""
    captured: dict[str, bytes] = {}

    def drain(name, stream):
        captured[name] = stream.read()

    threads = [threading.Thread(target=drain, args=("stderr", proc.stderr), daemon=True)]
    if stdout:
        threads.append(threading.Thread(target=drain, args=("stdout", proc.stdout), daemon=True))
    for t in threads:
        t.start()
    return captured, threads


def _watch(proc: subprocess.Popen, case: Case, start: float) -> tuple[int, tuple[str, str] | None]:
    """(peak memory of the process tree, the outcome where it was killed: over memory or a hang)."""
    peak, outcome = 0, None
    while proc.poll() is None:
        try:
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        if peak > case.rss_bytes:
            outcome = ("over memory", f"{peak / 2**30:.1f} GiB: {case.label()}")
        elif time.monotonic() - start > case.wall_s:
            outcome = ("hang", case.label())
        if outcome:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
            proc.wait()
            break
        time.sleep(0.02)
    return peak, outcome


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, detail) of one case."""
    env = _environment(case)
    before_inputs = {p: _fingerprint(p) for p in case.inputs}
    before_tree = _tree(case.watch, case.allowed) if case.watch else {}
    out_file = open(case.stdout_path, "w") if case.stdout_path else None  # noqa: SIM115
    start = time.monotonic()
    proc = subprocess.Popen(case.command(),
                            stdout=out_file or subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, cwd=case.cwd, start_new_session=True)
    captured, threads = _drain(proc, not out_file)
    peak, outcome = _watch(proc, case, start)
    for t in threads:
        t.join(timeout=10)
    if out_file:
        out_file.close()
    if outcome:
        return outcome
    err = captured.get("stderr", b"").decode("utf-8", "replace")
    run = Run(proc.returncode, captured.get("stdout", b"").decode("utf-8", "replace"), err)
    return _judge(case, run, peak, before_inputs, before_tree)


def _judge(case: Case, run: Run, peak: int, before_inputs: dict, before_tree: dict) -> tuple[str, str]:
    """(outcome, detail) of a case whose process ended by itself."""
    err = run.stderr
    for p, fp in before_inputs.items():
        if _fingerprint(p) != fp:
            return "damaged input", f"{p}: {case.label()}"
    if case.watch:
        after = _tree(case.watch, case.allowed)
        changed = sorted(set(after.items()) ^ set(before_tree.items()))
        if changed:
            return "written outside", f"{changed[0][0]}: {case.label()}"
    for p in case.forbidden:
        if os.path.lexists(p):
            return "written outside", f"{p} exists: {case.label()}"
    if "Traceback" in err:
        return "traceback", f"{case.label()}\n{err[-600:]}"
    if run.returncode < 0:
        return "signal death", f"{run.returncode}: {case.label()}"
    if peak > case.rss_bytes:
        return "over memory", f"{peak / 2**30:.1f} GiB: {case.label()}"
    if case.check:
        wrong = case.check(run)
        if wrong:
            return "wrong result", f"{wrong}: {case.label()}"
    errors = [line for line in err.splitlines() if line.strip() and not line.startswith("llamabench: warning:")
              and not line.startswith("llamabench: fetched ")]
    if run.returncode == 0:
        if case.must_fail:
            return "wrong result", f"exit 0 where it must refuse: {case.label()}"
        return "honest success", ""
    return _one_line(case, run, errors) or ("not one line", f"{case.label()}\n{err[-600:]}")


def _one_line(case: Case, run: Run, errors: list[str]) -> tuple[str, str] | None:
    """The outcome of a failure said in one line: `llamabench: error: ...`, or bench's summary of tests that each
    failed in their record (the results file readable); None for anything else."""
    if len(errors) != 1:
        return None
    if re.fullmatch(r"\d+ tests? recorded in .*, \d+ failed", errors[0]) and run.returncode == 1:
        return "failed in its records", errors[0]
    if errors[0].startswith("llamabench: error:") and len(errors[0]) < 1000:
        if case.memory_error and any(w in errors[0] for w in ("MemoryError", "out of memory", "Cannot allocate")):
            return "over memory", f"{errors[0]}: {case.label()}"
        return "one-line error", errors[0]
    return None


def run_campaign(cases: list[Case], workers: int = 2) -> tuple[Counter, Counter, list[tuple[str, str, str]]]:
    """(outcomes, outcomes per group, the bad ones as (group, outcome, detail))."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = list(pool.map(run_case, cases))
    counts = Counter(kind for kind, _ in outcomes)
    per_group = Counter((case.group, kind) for case, (kind, _) in zip(cases, outcomes))
    bad = [(case.group, kind, detail) for case, (kind, detail) in zip(cases, outcomes) if kind not in GOOD]
    return counts, per_group, bad


def summary(counts: Counter, per_group: Counter) -> str:
    lines = [f"{sum(counts.values())} cases: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))]
    for group in sorted({g for g, _ in per_group}):
        lines.append(f"  {group}: " + ", ".join(f"{k} {n}" for (g, k), n in sorted(per_group.items()) if g == group))
    return "\n".join(lines)
