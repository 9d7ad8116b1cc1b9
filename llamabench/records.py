"""Records of inspect / verify / fit runs, appended to the same JSONL files as bench records.

Reports are built from these files alone, so every record carries its model, machine and versions.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from . import sysinfo, versions
from .bench.results import append_record

INSPECT_SCHEMA = "llamabench/inspect-record/1"
VERIFY_SCHEMA = "llamabench/verify-record/1"
FIT_SCHEMA = "llamabench/fit-record/1"


def model_block(label: str, name: str, architecture: str, path: str | None, is_twin: bool) -> dict:
    return {"label": label, "name": name, "architecture": architecture, "path": path, "is_twin": is_twin}


def write(path: Path | None, schema: str, model: dict, payload: dict) -> dict:
    record = {"schema": schema, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "model": model, **payload, "machine": sysinfo.machine_block(), "versions": versions.versions_block()}
    if path is not None:
        append_record(Path(path), record)
    return record
