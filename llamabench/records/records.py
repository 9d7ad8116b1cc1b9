"""The results files: every kind of record by its schema, read back line by line, and appended.

Every record is a frozen dataclass that carries its model, machine and versions, so reports are
built from the files alone. `to_dict` writes the stored (and `-o json`) form, with a `schema` key
naming the kind and version; `from_dict` reads it back, and `from_dict(to_dict(x)) == x`.
`read_records` reads a file: a line that is not JSON (a torn write) or not a llamabench record is
passed over with a warning naming it, a record of another schema version too; a record of this
version that does not parse is an error naming its line.

A results file travels between machines, so everything in it is untrusted: its strings are escaped
(`safe_text`: no escape sequence or forged line reaches a terminal), its values are structured strictly
(`serial`: an int is an int, a float finite) and checked for sense (`record.check_values`, the one check of
range: sample times, token counts and speeds positive, byte counts from 0 to 2**60, contexts within llama.cpp's
uint32, KLD, PPL and rates within what llama-perplexity can print, a quality row of no chunk no measurement); a
record that fails is a broken record, an error naming its line.
"""


from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core import serial
from ..core.errors import LlamabenchError, UsageError
from ..core.safe_text import escaped, escaped_tree
from . import jsonl
from .bench import BenchRecord
from .fit import FitRecord
from .inspect import InspectRecord, VerifyRecord
from .quality import QualityRecord
from .record import SCHEMA_PREFIX, SCHEMA_VERSION, Record, RecordKind
from .roofline import RooflineRecord


class RecordRefused(LlamabenchError):
    """A record that its own reader would refuse: never written."""


RECORD_TYPES: dict[str, type[Record]] = {t.kind.schema: t for t in (InspectRecord, VerifyRecord, FitRecord,
                                                                       BenchRecord, RooflineRecord, QualityRecord)}
KIND_BY_NAME = {k.value: k for k in RecordKind}


def from_dict(data: dict) -> Record:
    """Any record from its stored form; ShapeError when it is not one of this version."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in RECORD_TYPES:
        raise serial.ShapeError(f"not a llamabench record of schema version {SCHEMA_VERSION}: {schema!r}")
    return RECORD_TYPES[schema].from_dict(data)


def _schema_kind(schema) -> tuple[RecordKind | None, str | None]:
    """(kind, version) of a schema string like 'llamabench/bench-record/2'; (None, None) if it is not ours."""
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        return None, None
    name, _, version = schema.removeprefix(SCHEMA_PREFIX).partition("/")
    return KIND_BY_NAME.get(name.removesuffix("-record")), version


@dataclass(frozen=True)
class ReadResult:
    records: tuple[Record, ...]
    warnings: tuple[str, ...] = ()  # one per line passed over, naming it

    @property
    def skipped(self) -> int:
        return len(self.warnings)


def read_records(path: Path) -> ReadResult:
    """The records of one results file, in order. Raises ResultsFileError for a broken record of this version."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"a results file is a path (a str or a pathlib.Path), not {type(path).__name__}")
    path = Path(path)
    records, warnings = [], []
    for number, value in jsonl.read_lines(path):
        where = f"{path}:{number}"
        if value is jsonl.NOT_JSON:
            warnings.append(f"{where}: not JSON (a torn write?), passed over")
            continue
        try:
            value = escaped_tree(value)  # every string printable: no escape sequence, no forged line
        except RecursionError:
            warnings.append(f"{where}: nested too deeply for a llamabench record, passed over")
            continue
        kind, version = _schema_kind(value.get("schema") if isinstance(value, dict) else None)
        if kind is None:
            warnings.append(f"{where}: not a llamabench record, passed over")
            continue
        if version != str(SCHEMA_VERSION):
            warnings.append(f"{where}: a {kind} record of schema version {version[:40]}; this llamabench reads version "
                            f"{SCHEMA_VERSION}: passed over")
            continue
        try:
            records.append(from_dict(value))
        except serial.ShapeError as exc:
            raise jsonl.ResultsFileError(f"{where}: broken {kind} record: {exc}",
                                         hint="fix or delete that line; the other records are intact") from None
    return ReadResult(tuple(records), tuple(warnings))


def append(path: Path, record: Record) -> Record:
    """Stamp the record with this machine and versions (where it has none) and append it; returns what was written.
    A record that would not read back (a number out of range, a contradiction) is refused before it is written:
    RecordRefused, and the file stays readable."""
    record = record.stamped()
    stored = serial.finite(record.to_dict())
    try:
        type(record).from_dict(json.loads(json.dumps(stored, default=str)))
    except serial.ShapeError as exc:
        raise RecordRefused(f"not written to {escaped(str(path))}: the record would not read back ({exc})") from None
    jsonl.append_line(Path(path), stored)
    return record


def save(results, record: Record) -> Record:
    """The record, appended to `results` where given (a path, or None), stamped either way. One its own reader
    would refuse is not written, and the command goes on: a warning says so (the result is still returned and
    printed)."""
    if not results:
        return record.stamped()
    try:
        return append(Path(results), record)
    except RecordRefused as exc:
        print(escaped(f"llamabench: warning: {exc}"), file=sys.stderr)
        return record.stamped()
