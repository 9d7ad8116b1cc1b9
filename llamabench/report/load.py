"""Read and merge result files (several runs, several machines) into one view per model. Pure I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..bench.results import SCHEMA as BENCH_SCHEMA
from ..bench.results import read_records
from ..errors import LlamabenchError
from ..records import FIT_SCHEMA, INSPECT_SCHEMA, VERIFY_SCHEMA


@dataclass
class ModelResults:
    label: str
    name: str = ""
    inspect: list[dict] = field(default_factory=list)
    verify: list[dict] = field(default_factory=list)
    fit: list[dict] = field(default_factory=list)
    bench: list[dict] = field(default_factory=list)

    @property
    def latest_inspect(self) -> dict | None:
        return self.inspect[-1] if self.inspect else None

    @property
    def latest_fit(self) -> dict | None:
        return self.fit[-1] if self.fit else None


def load_results(paths: list[Path]) -> dict[str, ModelResults]:
    models: dict[str, ModelResults] = {}
    for path in paths:
        if not Path(path).exists():
            raise LlamabenchError(f"{path}: no such results file")
        records = read_records(Path(path))
        if not records:
            raise LlamabenchError(f"{path}: holds no llamabench records")
        for record in records:
            model = record.get("model") or {}
            label = model.get("label")
            if not label:
                raise LlamabenchError(f"{path}: a record without a model label")
            entry = models.setdefault(label, ModelResults(label))
            entry.name = entry.name or model.get("name") or ""
            schema = record.get("schema")
            bucket = {INSPECT_SCHEMA: entry.inspect, VERIFY_SCHEMA: entry.verify, FIT_SCHEMA: entry.fit,
                      BENCH_SCHEMA: entry.bench}.get(schema)
            if bucket is None:
                raise LlamabenchError(f"{path}: unknown record schema {schema!r}")
            bucket.append(record)
    for entry in models.values():
        # several runs of the same test: keep the newest (merge by key, latest timestamp wins)
        latest: dict[str, dict] = {}
        for r in sorted(entry.bench, key=lambda r: r.get("timestamp", "")):
            latest[(r["key"], r.get("machine", {}).get("cpu"))] = r
        entry.bench = list(latest.values())
    return models
