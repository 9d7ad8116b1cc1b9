"""Append-only JSON Lines results: one record per test, flushed to disk as soon as it exists."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import LlamabenchError

SCHEMA = "llamabench/bench-record/1"


def append_record(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
    with open(path, "a+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":  # a torn line from a killed run: close it off
                line = "\n" + line
        f.write(line.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def read_records(path: Path) -> list[dict]:
    """Every complete record; a torn last line (a kill mid-write) is ignored."""
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                raise LlamabenchError(f"{path}:{number}: not a llamabench record")
            records.append(record)
    return records


def recorded_keys(path: Path, model_label: str) -> set[str]:
    return {r.get("key") for r in read_records(path) if r.get("model", {}).get("label") == model_label}
