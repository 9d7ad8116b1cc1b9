"""Append-only JSON Lines: one record per line, flushed and fsynced as soon as it exists.

A torn last line (a run killed mid-write) is closed off on the next append; `read_lines` hands every
line over with its number, and `records.read_records` decides what to do with it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Iterator

from ..world.outputs import OutputError, check_results_file


class ResultsFileError(OutputError):
    """A results file that cannot be written or read."""


def check_destination(path: Path) -> None:
    """Fail before any measurement when `path` cannot take appended records (outputs.check_results_file)."""
    try:
        check_results_file(path)
    except OutputError as exc:
        raise ResultsFileError(str(exc), hint=exc.hint) from None


def append_line(path: Path, record: dict) -> None:
    check_destination(path)
    line = json.dumps(record, separators=(",", ":"), default=str, allow_nan=False) + "\n"  # made finite by append
    try:
        _append(path, line)
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot append a record ({exc.strerror})") from None


def _append(path: Path, line: str) -> None:
    """Append one line, or leave the file as it was: a full disk leaves no torn record and no new empty file.
    The file is locked while it is written, so that undoing a failed write never touches another run's records."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, created = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), True
    except FileExistsError:
        fd, created = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK), False  # never a link
    with os.fdopen(fd, "a+b") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ResultsFileError(f"{path}: not a regular file (results are appended to a JSON Lines file)")
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = f.seek(0, os.SEEK_END)
        try:
            if size > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # a torn line from a killed run: close it off
                    line = "\n" + line
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        except OSError:
            _undo(path, fd, size, created)
            raise


def _undo(path: Path, fd: int, size: int, created: bool) -> None:
    """Back to `size` (under the lock, nobody else wrote since); a file this append created and that holds
    nothing else is removed."""
    try:
        if created and size == 0:
            path.unlink()
        else:
            os.ftruncate(fd, size)
    except OSError:
        pass


NOT_JSON = object()  # a line that is not JSON: a torn write, binary, another format


def read_lines(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, parsed JSON value or NOT_JSON) for every non-empty line, in order."""
    if not path.exists():
        return
    if not stat.S_ISREG(path.stat().st_mode):
        raise ResultsFileError(f"{path}: not a regular file")
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            text = raw.strip()
            if not text:
                continue
            try:
                yield number, json.loads(text.decode("utf-8"))
            except (ValueError, RecursionError):  # not UTF-8, not JSON, an integer past 4300 digits
                yield number, NOT_JSON
