"""Typed records of inspect / verify / fit / bench, stored one per line in the results files.

Every record carries its model, machine and versions, so reports are built from the files alone.
`to_dict` writes the stored (and `--json`) form; `from_dict` reads it back; `read_records` reads a
file and skips, with a count, every line it does not understand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import ClassVar
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path

from ..footprint import CacheSettings
from ..llama.alloc_log import Allocations
from . import jsonl


class RecordKind(StrEnum):
    INSPECT = "llamabench/inspect-record/1"
    VERIFY = "llamabench/verify-record/1"
    FIT = "llamabench/fit-record/1"
    BENCH = "llamabench/bench-record/1"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ModelRef:
    label: str  # source.ModelSource.label: what results, --resume and reports key on
    name: str
    architecture: str
    path: str | None  # the file llama.cpp loaded (or the GGUF that was read)
    is_twin: bool  # llama.cpp ran a geometry twin, not the model itself
    desc: str | None = None  # llama_model_desc, where a context was created
    size_bytes: int | None = None  # llama_model_size
    n_params: int | None = None

    @classmethod
    def from_dict(cls, data: dict) -> "ModelRef":
        return cls(str(data["label"]), str(data.get("name") or ""), str(data.get("architecture") or ""),
                   data.get("path"), bool(data.get("is_twin")), data.get("desc"), data.get("size_bytes"),
                   data.get("n_params"))


def series_label(machine: dict, backend: str | None = None) -> str:
    """The name of one machine's series in tables and plots: host, CPU or GPU, backend."""
    host = machine.get("host") or "?"
    gpu = machine.get("gpu")
    device = gpu[0]["name"] if gpu else machine.get("cpu") or "?"
    return f"{host} ({device}{', ' + backend if backend else ''})"


@dataclass
class Record:
    model: ModelRef
    timestamp: str = field(default_factory=now, kw_only=True)
    machine: dict = field(default_factory=dict, kw_only=True)
    versions: dict = field(default_factory=dict, kw_only=True)

    kind: ClassVar[RecordKind] = RecordKind.INSPECT  # set per class; a class attribute, not a field

    def _payload(self) -> dict:
        raise NotImplementedError

    def to_dict(self) -> dict:
        return {"schema": str(self.kind), "timestamp": self.timestamp, "model": asdict(self.model),
                **self._payload(), "machine": self.machine, "versions": self.versions}

    @staticmethod
    def _envelope(data: dict) -> dict:
        return {"model": ModelRef.from_dict(data["model"]), "timestamp": str(data.get("timestamp", "")),
                "machine": dict(data.get("machine") or {}), "versions": dict(data.get("versions") or {})}

    @property
    def host(self) -> str:
        return series_label(self.machine)

    def stamp(self) -> "Record":
        """Fill machine and versions for a record about to be written on this machine."""
        from .. import sysinfo, versions

        self.machine = self.machine or sysinfo.machine_block()
        self.versions = self.versions or versions.versions_block()
        return self


@dataclass
class InspectRecord(Record):
    inspection: dict = field(default_factory=dict)  # inspection.Inspection.to_dict(): `inspect --json`
    kv_curve: list = field(default_factory=list)  # [n_ctx, kv_bytes, recurrent_bytes, full_gqa_kv_bytes]
    kind: ClassVar[RecordKind] = RecordKind.INSPECT

    def _payload(self) -> dict:
        return {"inspection": self.inspection, "kv_curve": self.kv_curve}

    @classmethod
    def from_dict(cls, data: dict) -> "InspectRecord":
        return cls(inspection=dict(data["inspection"]), kv_curve=list(data.get("kv_curve") or []),
                   **cls._envelope(data))


@dataclass
class VerifyRecord(Record):
    ok: bool = False
    settings: CacheSettings = field(default_factory=CacheSettings)  # n_ctx as llama.cpp rounded it
    theory: dict = field(default_factory=dict)
    allocations: Allocations = field(default_factory=Allocations)
    checks: list = field(default_factory=list)
    method: str = "llama.cpp no_alloc dry run (sizes, nothing timed)"
    kind: ClassVar[RecordKind] = RecordKind.VERIFY

    def _payload(self) -> dict:
        return {"ok": self.ok, "settings": asdict(self.settings), "theory": self.theory,
                "llama_cpp": self.allocations.to_dict(), "method": self.method, "checks": self.checks}

    @classmethod
    def from_dict(cls, data: dict) -> "VerifyRecord":
        return cls(ok=bool(data["ok"]), settings=CacheSettings(**data["settings"]), theory=dict(data["theory"]),
                   allocations=Allocations.from_dict(data["llama_cpp"]), checks=list(data.get("checks") or []),
                   method=str(data.get("method", "")), **cls._envelope(data))


@dataclass
class FitRecord(Record):
    fit: "FitResult" = None  # noqa: F821 - fit.result.FitResult
    verify: dict | None = None
    kind: ClassVar[RecordKind] = RecordKind.FIT

    def _payload(self) -> dict:
        return {"fit": self.fit.to_dict(), "verify": self.verify}

    @classmethod
    def from_dict(cls, data: dict) -> "FitRecord":
        from ..fit.result import FitResult

        return cls(fit=FitResult.from_dict(data["fit"]), verify=data.get("verify"), **cls._envelope(data))


@dataclass
class BenchRecord(Record):
    key: str = ""
    status: str = "ok"  # "ok" or "failed"
    reason: str | None = None
    test: str = ""  # llama-bench's name: pp512, tg128 @ d32768
    params: dict = field(default_factory=dict)  # the cell's fields + kind, n_tokens, depth, repetitions
    samples_ns: list = field(default_factory=list)
    samples_ts: list = field(default_factory=list)
    avg_ts: float | None = None
    stddev_ts: float | None = None
    allocations: Allocations | None = None
    theory: dict = field(default_factory=dict)
    diff: dict | None = None
    memory: dict | None = None
    roofline: dict | None = None  # bytes per token of this test, achieved bandwidth, MBU (bench.runner)
    kind: ClassVar[RecordKind] = RecordKind.BENCH

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cell(self):
        from ..bench.plan import Cell

        return Cell.from_dict(self.params)

    @property
    def backend(self) -> str:
        return "GPU" if self.params.get("n_gpu_layers") else "CPU"

    @property
    def series(self) -> str:
        return series_label(self.machine, self.backend)

    def _payload(self) -> dict:
        return {"key": self.key, "status": self.status, "reason": self.reason, "test": self.test,
                "params": self.params, "samples_ns": self.samples_ns, "samples_ts": self.samples_ts,
                "avg_ts": self.avg_ts, "stddev_ts": self.stddev_ts,
                "llama_cpp": self.allocations.to_dict() if self.allocations else None, "theory": self.theory,
                "diff": self.diff, "memory": self.memory, "roofline": self.roofline}

    @classmethod
    def from_dict(cls, data: dict) -> "BenchRecord":
        alloc = data.get("llama_cpp")
        return cls(key=str(data["key"]), status=str(data["status"]), reason=data.get("reason"),
                   test=str(data["test"]), params=dict(data["params"]), samples_ns=list(data.get("samples_ns") or []),
                   samples_ts=list(data.get("samples_ts") or []), avg_ts=data.get("avg_ts"),
                   stddev_ts=data.get("stddev_ts"), allocations=Allocations.from_dict(alloc) if alloc else None,
                   theory=dict(data.get("theory") or {}), diff=data.get("diff"), memory=data.get("memory"),
                   roofline=data.get("roofline"),
                   **cls._envelope(data))


RECORD_TYPES: dict[str, type[Record]] = {str(k): t for k, t in ((RecordKind.INSPECT, InspectRecord),
                                                               (RecordKind.VERIFY, VerifyRecord),
                                                               (RecordKind.FIT, FitRecord),
                                                               (RecordKind.BENCH, BenchRecord))}


def from_dict(data: dict) -> Record:
    return RECORD_TYPES[data["schema"]].from_dict(data)


@dataclass
class ReadResult:
    records: list[Record]
    skipped: int  # lines that were not records of a known kind and shape


def read_records(path: Path) -> ReadResult:
    """The records of one results file; lines not understood are skipped and counted."""
    lines = jsonl.read_lines(Path(path))
    records, skipped = [], lines.skipped
    for data in lines.objects:
        try:
            records.append(from_dict(data))
        except (KeyError, TypeError, ValueError, AttributeError):
            skipped += 1
    return ReadResult(records, skipped)


def append(path: Path, record: Record) -> Record:
    jsonl.append_line(Path(path), record.stamp().to_dict())
    return record
