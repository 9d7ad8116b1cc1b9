"""Append-only JSON Lines: one record per line, flushed and fsynced as soon as it exists.

A torn last line (a run killed mid-write) is closed off on the next append; `read_lines` hands every
line over with its number, and `records.read_records` decides what to do with it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Iterator

from ..errors import LlamabenchError


class ResultsFileError(LlamabenchError):
    """A results file that cannot be written or read."""


def check_destination(path: Path) -> None:
    """Fail before any measurement when `path` cannot take appended records."""
    if path.exists():
        if not stat.S_ISREG(path.stat().st_mode):
            raise ResultsFileError(f"{path}: not a regular file (results are appended to a JSON Lines file)")
        if not os.access(path, os.W_OK):
            raise ResultsFileError(f"{path}: not writable")
        return
    for folder in (path.parent, *path.parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ResultsFileError(f"{path}: {folder} is not a folder")
            if not os.access(folder, os.W_OK):
                raise ResultsFileError(f"{path}: the folder {folder} is not writable")
            return


def append_line(path: Path, record: dict) -> None:
    check_destination(path)
    line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
    try:
        _append(path, line)
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot append a record ({exc.strerror})") from None


def _append(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":  # a torn line from a killed run: close it off
                line = "\n" + line
        f.write(line.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


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
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                yield number, NOT_JSON
