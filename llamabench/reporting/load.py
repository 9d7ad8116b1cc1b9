"""Read and merge result files (several runs, several machines) into one view per model label."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import LlamabenchError
from ..records.bench import BenchRecord
from ..records.fit import FitRecord
from ..records.inspect import InspectRecord, VerifyRecord
from ..records.quality import QualityRecord, QualityRow
from ..records.record import Record
from ..records.records import read_records
from ..records.roofline import RooflineRecord
from ..world.outputs import note_input


@dataclass
class ModelResults:
    label: str
    name: str = ""
    inspect: list[InspectRecord] = field(default_factory=list)
    verify: list[VerifyRecord] = field(default_factory=list)
    fit: list[FitRecord] = field(default_factory=list)
    bench: list[BenchRecord] = field(default_factory=list)
    quality: list[QualityRecord] = field(default_factory=list)

    @property
    def quality_rows(self) -> list[tuple[QualityRow, QualityRecord]]:
        """Every measured quality row, the newest per context, KV types and base, with its record (its text)."""
        latest: dict = {}
        for record in sorted(self.quality, key=lambda r: r.timestamp):
            for row in record.rows:
                if row.ok:
                    latest[(row.n_ctx, row.type_k, row.type_v, row.base)] = (row, record)
        return sorted(latest.values(), key=lambda pair: (pair[0].base, pair[0].type_k, pair[0].type_v,
                                                         pair[0].n_ctx))

    @property
    def latest_inspect(self) -> InspectRecord | None:
        return self.inspect[-1] if self.inspect else None

    @property
    def latest_fit(self) -> FitRecord | None:
        return self.fit[-1] if self.fit else None

    def add(self, record: Record) -> None:
        if isinstance(record, RooflineRecord):
            return  # predictions: nothing a report is built from
        bucket = {InspectRecord: self.inspect, VerifyRecord: self.verify, FitRecord: self.fit,
                  BenchRecord: self.bench, QualityRecord: self.quality}[type(record)]
        bucket.append(record)

    def deduplicate(self) -> None:
        """Several runs of the same thing: the newest wins, per machine (records of one kind, one key)."""

        def newest(records: list, key) -> list:
            latest: dict = {}
            for r in sorted(records, key=lambda r: r.timestamp):
                latest[key(r)] = r
            return sorted(latest.values(), key=lambda r: r.timestamp)

        def inspected(r: InspectRecord):
            p = r.footprint.params
            return r.footprint.shape.n_ctx, p.type_k, p.type_v

        self.inspect = newest(self.inspect, inspected)
        self.verify = newest(self.verify, lambda r: (r.params, r.host))
        self.fit = newest(self.fit, lambda r: r.host)
        self.bench = newest(self.bench, lambda r: (r.params, r.test, r.series))


def load_results(paths: list[Path]) -> tuple[dict[str, ModelResults], list[str]]:
    """The records of every file, grouped by model label; and a warning per line passed over."""
    models: dict[str, ModelResults] = {}
    warnings: list[str] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise LlamabenchError(f"{path}: no such results file")
        note_input(path)  # an input of the report: none of its files may be written over it
        read = read_records(path)
        warnings += read.warnings
        if not read.records:
            passed_over = f" ({read.warnings[0]}; {read.skipped} line(s) passed over)" if read.warnings else ""
            raise LlamabenchError(f"{path}: holds no llamabench records{passed_over}")
        for record in read.records:
            entry = models.setdefault(record.model.label, ModelResults(record.model.label))
            entry.name = entry.name or record.model.name
            entry.add(record)
    for entry in models.values():
        entry.deduplicate()
    return models, warnings
