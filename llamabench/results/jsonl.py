"""Append-only JSON Lines: one record per line, flushed and fsynced as soon as it exists.

A torn last line (a run killed mid-write) is closed off on the next append and skipped on read;
lines that are not JSON objects are skipped and counted, never fatal.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class ReadLines:
    objects: list[dict] = field(default_factory=list)
    skipped: int = 0  # lines that were not JSON objects (torn, binary, another format)


def read_lines(path: Path) -> ReadLines:
    """Every JSON object in the file, in order; anything else is counted in `skipped`."""
    out = ReadLines()
    if not path.exists():
        return out
    if not stat.S_ISREG(path.stat().st_mode):
        raise ResultsFileError(f"{path}: not a regular file")
    with open(path, "rb") as f:
        for raw in f:
            text = raw.strip()
            if not text:
                continue
            try:
                value = json.loads(text.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                out.skipped += 1
                continue
            if isinstance(value, dict):
                out.objects.append(value)
            else:
                out.skipped += 1
    return out
