"""Typed records of inspect / verify / fit / bench / roofline: what the API returns and the results files hold.

Every record is a frozen dataclass that carries its model, machine and versions, so reports are
built from the files alone. `to_dict` writes the stored (and `-o json`) form, with a `schema` key
naming the kind and version; `from_dict` reads it back, and `from_dict(to_dict(x)) == x`.
`read_records` reads a file: a line that is not JSON (a torn write) or not a llamabench record is
passed over with a warning naming it, a record of another schema version too; a record of this
version that does not parse is an error naming its line.

A results file travels between machines, so everything in it is untrusted: its strings are escaped
(`safe_text`: no escape sequence or forged line reaches a terminal), its values are structured strictly
(`serial`: an int is an int, a float finite) and checked for sense (`check_values`: sample times, token
counts and speeds positive, byte counts not negative, contexts within llama.cpp's uint32); a record that
fails is a broken record, an error naming its line.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import ClassVar

from ..core import serial, stats
from ..core.errors import LlamabenchError
from ..core.safe_text import escaped, escaped_tree
from ..core.units import MIB
from ..jobs.bench.measure import Measurement, Memory, Roofline, ServerBench
from ..jobs.fit.advice import run_line
from ..jobs.fit.result import FitResult
from ..jobs.fit.verify import FitVerification
from ..jobs.quality.lookup import KvQuality
from ..jobs.quality.result import QualityRow, ScoredTextRef
from ..jobs.roofline.job import RooflineRow
from ..llama.devices import without_endpoint
from ..memory.allocations import PRINTED_TOLERANCE_BYTES, Allocations, bytes_equal, printed_equal
from ..memory.footprint import Footprint, KvPoint, pad
from ..memory.inspection import Inspection
from ..memory.speed import SpeedModel
from ..memory.verification import Check, all_ok
from ..model.metadata import ModelRef
from ..settings.bench_tests import BenchTest
from ..settings.params import Params
from ..world.sysinfo import Machine, this_machine
from ..world.versions import Versions, these_versions
from . import jsonl

SCHEMA_VERSION = 2
SCHEMA_PREFIX = "llamabench/"


class RecordKind(StrEnum):
    INSPECT = "inspect"
    VERIFY = "verify"
    FIT = "fit"
    BENCH = "bench"
    ROOFLINE = "roofline"
    QUALITY = "quality"

    @property
    def schema(self) -> str:
        return f"{SCHEMA_PREFIX}{self.value}-record/{SCHEMA_VERSION}"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True, kw_only=True)
class Record:
    model: ModelRef
    timestamp: str = field(default_factory=now)
    machine: Machine = field(default_factory=Machine)
    versions: Versions = field(default_factory=Versions)

    kind: ClassVar[RecordKind]

    def to_dict(self) -> dict:
        """The stored form: the schema, every field, and a `summary` of derived values for scripts (`jq .summary`),
        which from_dict passes over: it is computed from the fields."""
        data = {"schema": self.kind.schema, **serial.to_dict(self)}
        summary = self.summary()
        return data | {"summary": summary} if summary else data

    def summary(self) -> dict:
        return {}

    def inconsistency(self) -> str | None:
        """What in this record contradicts itself (read back from a file), or None."""
        return None

    @classmethod
    def from_dict(cls, data: dict):
        if not isinstance(data, dict):
            raise serial.ShapeError(f"{cls.__name__}: a record is a JSON object, not {type(data).__name__}")
        if data.get("schema") != cls.kind.schema:
            raise serial.ShapeError(f"{cls.__name__}: schema {data.get('schema')!r} is not {cls.kind.schema!r}")
        record = serial.from_dict(cls, {k: v for k, v in data.items() if k not in ("schema", "summary")})
        check_values(record)
        return record

    @property
    def host(self) -> str:
        return self.machine.series()

    def stamped(self) -> "Record":
        """This record with this machine's block and versions, where it has none yet."""
        return dataclasses.replace(self, machine=self.machine if self.machine.host else this_machine(),
                                   versions=self.versions if self.versions.llama_cpp_python else these_versions())


@dataclass(frozen=True, kw_only=True)
class InspectRecord(Record):
    """The layout and the theoretical footprint of one model under one set of parameters (`inspect`)."""

    inspection: Inspection
    kv_curve: tuple[KvPoint, ...] = ()
    kind: ClassVar[RecordKind] = RecordKind.INSPECT

    @property
    def footprint(self) -> Footprint:
        return self.inspection.footprint

    @property
    def kv_bytes_per_token(self) -> int:
        return self.inspection.footprint.kv_bytes_per_token

    @property
    def kv_bytes(self) -> int:
        return self.inspection.footprint.kv_bytes

    @property
    def recurrent_state_bytes(self) -> int:
        return self.inspection.footprint.recurrent_state_bytes

    def summary(self) -> dict:
        fp, ins = self.footprint, self.inspection
        return {"n_ctx": fp.shape.n_ctx, "kv_bytes_per_token": fp.kv_bytes_per_token,
                "full_gqa_kv_bytes_per_token": fp.full_gqa_kv_bytes_per_token,
                "reduction": None if fp.reduction is None else round(fp.reduction, 4), "kv_bytes": fp.kv_bytes,
                "swa_kv_bytes": fp.swa_kv_bytes, "recurrent_state_bytes": fp.recurrent_state_bytes,
                "n_ctx_train": ins.geometry.n_ctx_train, "beyond_trained_context": ins.beyond_trained_context,
                "published_kv_matches": ins.published_kv_matches}


@dataclass(frozen=True, kw_only=True)
class VerifyRecord(Record):
    """Theory against llama.cpp's own sizes from a no_alloc dry run (`verify`)."""

    params: Params  # n_ctx as llama.cpp rounded it
    footprint: Footprint | None  # theory; None for an architecture without a layout rule (`no_rule` says why)
    allocations: Allocations
    checks: tuple[Check, ...] = ()
    method: str = "llama.cpp no_alloc dry run (sizes, nothing timed)"
    gguf: str = ""  # the file llama.cpp sized
    context_warning: str | None = None  # n_ctx past the trained context (llama.cpp allows it)
    no_rule: str = ""  # why there is no theory to check: llama.cpp's own sizes are the answer, measured
    kind: ClassVar[RecordKind] = RecordKind.VERIFY

    @property
    def ok(self) -> bool:
        return all_ok(self.checks)

    def summary(self) -> dict:
        fp = self.footprint
        return {"ok": self.ok, "kv_bytes": fp.kv_bytes if fp else None, "kv_bytes_llama_cpp": self.allocations.kv_bytes,
                "recurrent_state_bytes": fp.recurrent_state_bytes if fp else None,
                "recurrent_state_bytes_llama_cpp": self.allocations.recurrent_bytes}


@dataclass(frozen=True, kw_only=True)
class FitRecord(Record):
    """Does it fit, with which settings (`fit`), and what llama.cpp allocated where (`--verify`)."""

    fit: FitResult
    verify: FitVerification | None = None
    quality: tuple[KvQuality, ...] = ()  # the lossy KV types' measured quality (from --results), or the command
    kind: ClassVar[RecordKind] = RecordKind.FIT

    @property
    def rows(self):
        return self.fit.rows

    # a row's `settings` hold the context; its placement says where the layers go. The stored form gives each row
    # the llama.cpp parameters it runs with (-ngl, --n-cpu-moe, -ts from the placement) so that a script reads
    # them where llama.cpp's names say, and reading it back keeps the context alone.
    PLACED = ("n_gpu_layers", "n_cpu_moe", "tensor_split")

    def to_dict(self) -> dict:
        data = super().to_dict()
        for row, stored in zip(self.fit.rows, data["fit"]["rows"]):
            placed = row.placement.params(row.settings, self.fit.n_layer_all)
            stored["settings"].update({name: serial.to_dict(placed)[name] for name in self.PLACED})
            stored["max_n_ctx"] = row.max_n_ctx or None  # null: no context fits (0 would read as -c 0, trained)
        return data

    @classmethod
    def from_dict(cls, data: dict):
        if not isinstance(data, dict):
            return super().from_dict(data)  # ShapeError: a record is a JSON object
        rows = data.get("fit", {}).get("rows") if isinstance(data.get("fit"), dict) else None
        if isinstance(rows, list):
            defaults = {name: serial.to_dict(Params())[name] for name in cls.PLACED}
            data = {**data, "fit": {**data["fit"], "rows": [_stored_row(r, defaults) for r in rows]}}
        return super().from_dict(data)

    def inconsistency(self) -> str | None:
        fit = self.fit
        missing = [name for name, values in (("rows", fit.rows), ("budgets", fit.budgets), ("contexts", fit.contexts))
                   if not values]
        return f"a fit of no {' and no '.join(missing)}" if missing else None

    @property
    def ok(self) -> bool:
        return self.verify is None or self.verify.ok

    def summary(self) -> dict:
        """Per budget, context and --spec-type sized: the recommended row (its index in `fit.rows`), and what to
        run ("none" first: without speculative decoding)."""
        recommendations = []
        cells = [(b, n, s) for b in self.fit.budgets for n in self.fit.contexts for s in self.fit.spec_types]
        for budget, n_ctx, spec in cells:
            best = self.fit.recommended(budget.label, n_ctx, spec)
            placed = best.placement.params(best.settings, self.fit.n_layer_all) if best else None
            recommendations.append({
                "budget": budget.label, "n_ctx": n_ctx, "spec_type": spec, "fits": best is not None,
                "row": self.fit.rows.index(best) if best else None,
                "type_k": placed.type_k if best else None, "type_v": placed.type_v if best else None,
                "n_gpu_layers": placed.n_gpu_layers if best else None,
                "n_cpu_moe": placed.n_cpu_moe if best else None,
                "max_n_ctx": (best.max_n_ctx or None) if best else None,
                "max_n_ctx_is_trained": bool(best and best.max_n_ctx
                                             and best.max_n_ctx >= (self.fit.n_ctx_train or 0) > 0),
                "total_bytes": best.parts.total if best else None,
                "host_bytes": best.host.total if best else None,
                "devices": _devices(best) if best else None,
                "runtime": str(self.fit.runtime.runtime),
                "command": run_line(self.fit, best) if best else None})
        return {"ok": self.ok, "recommendations": recommendations}


def _stored_row(row, placed_defaults: dict):
    """A fit row as stored, back to the dataclass's form: the context's settings, max_n_ctx 0 for none."""
    if not isinstance(row, dict):
        return row
    out = dict(row)
    if isinstance(row.get("settings"), dict):
        out["settings"] = {**row["settings"], **placed_defaults}
    if "max_n_ctx" in row and row["max_n_ctx"] is None:
        out["max_n_ctx"] = 0
    return out


def _devices(row) -> list[dict]:
    """A fit row's parts per device for scripts: each card in device order, then the host."""
    out = [{"name": c.name, "endpoint": c.endpoint, "budget_bytes": c.budget, "layers": c.layers,
            "weights_bytes": c.parts.weights, "kv_bytes": c.parts.kv, "recurrent_bytes": c.parts.recurrent,
            "compute_bytes": c.parts.compute, "reserve_bytes": c.parts.reserve, "projector_bytes": c.parts.projector,
            "total_bytes": c.parts.total, "fits": c.fits} for c in row.devices]
    h = row.host
    out.append({"name": "system RAM", "weights_bytes": h.weights, "kv_bytes": h.kv, "recurrent_bytes": h.recurrent,
                "compute_bytes": h.compute, "projector_bytes": h.projector, "prompt_cache_bytes": h.prompt_cache,
                "checkpoints_bytes": h.checkpoints, "total_bytes": h.total})
    return out


@dataclass(frozen=True, kw_only=True)
class BenchRecord(Record):
    """One timed test in one real context (`bench`), with what the context allocated and the theory beside it."""

    params: Params
    test: BenchTest
    repetitions: int
    samples_ns: tuple[int, ...] = ()
    reason: str | None = None  # why it failed; None when it was measured
    allocations: Allocations | None = None
    memory: Memory | None = None
    footprint: Footprint | None = None  # theory; None where the parameters have none (theory_error says why)
    theory_error: str | None = None
    roofline: Roofline | None = None
    # the devices the model was spread over, in llama.cpp's order (RPC0[HOST:PORT], CUDA0)
    devices: tuple[str, ...] = ()
    runtime: str = "llama-cpp-python"  # the program timed: a Llama() context, or llama-server over HTTP
    server: ServerBench | None = None  # llama-server: its command, slots, parallel requests and own timings
    kind: ClassVar[RecordKind] = RecordKind.BENCH

    @classmethod
    def of(cls, model: ModelRef, m: Measurement, *, footprint: Footprint | None, theory_error: str | None,
           roofline: Roofline | None, machine: Machine, versions: Versions) -> "BenchRecord":
        if m.model_size_bytes is not None:
            model = dataclasses.replace(model, desc=m.model_desc, size_bytes=m.model_size_bytes, n_params=m.n_params)
        return cls(model=model, params=m.params, test=m.test, repetitions=m.repetitions, samples_ns=m.samples_ns,
                   reason=m.reason, allocations=m.allocations, memory=m.memory, footprint=footprint,
                   theory_error=theory_error, roofline=roofline, machine=machine, versions=versions,
                   runtime=m.runtime, server=m.server)

    @property
    def ok(self) -> bool:
        return bool(self.samples_ns) and self.reason is None

    def inconsistency(self) -> str | None:
        if not self.samples_ns and self.reason is None:
            return "neither samples nor a reason why it failed"
        test = self.test
        if self.ok and test.depth + test.n_tokens > pad(max(self.params.n_ctx, 1)):
            return f"a test of {test.depth} + {test.n_tokens} tokens measured in a context of {self.params.n_ctx}"
        rf = self.roofline
        if rf and (rf.full_gqa_bytes_per_token is None) != (rf.full_gqa_attention_flops is None):
            return "roofline: full_gqa_bytes_per_token and full_gqa_attention_flops go together"
        if self.server is not None and self.runtime != "llama-server":
            return f"runtime {self.runtime!r} with a llama-server block"
        if self.server is None and self.runtime == "llama-server" and self.ok:  # a failed test may have timed none
            return "runtime 'llama-server' measured without a llama-server block"
        return None

    @property
    def status(self) -> str:
        return "ok" if self.ok else "failed"

    def summary(self) -> dict:
        out = {"status": self.status, "avg_ts": self.avg_ts, "stddev_ts": self.stddev_ts, "kv_match": self.kv_match,
               "recurrent_match": self.recurrent_match, "runtime": self.runtime}
        if self.server:
            kind = str(self.test.kind)
            out |= {"concurrency": self.concurrency, "request_ts": self.server.request_ts(kind, self.test.n_tokens),
                    "server_ts": self.server.server_ts(kind), "ttft_ms": self.server.ttft_ms,
                    "draft_acceptance": self.server.acceptance}
        return out

    @property
    def concurrency(self) -> int:
        return self.server.concurrency if self.server else 1

    @property
    def samples_ts(self) -> tuple[float, ...]:
        """Total t/s of each repetition: every parallel request's tokens over the wall time of them all."""
        return tuple(stats.tokens_per_second(self.test.n_tokens * self.concurrency, ns) for ns in self.samples_ns)

    @property
    def avg_ts(self) -> float | None:
        return stats.mean(self.samples_ts) if self.samples_ns else None

    @property
    def stddev_ts(self) -> float | None:
        return stats.stddev(self.samples_ts) if self.samples_ns else None

    @property
    def spread(self) -> float | None:
        """stddev / mean of the t/s samples: how far one repetition is from the next."""
        return self.stddev_ts / self.avg_ts if self.avg_ts else None

    @property
    def backend(self) -> str:
        """The devices that hold the context's buffers, as llama.cpp names them (`Vulkan0`, `CUDA0`, `RPC0`), or
        CPU; what each device is (`llvmpipe`, `NVIDIA GeForce RTX 4090`) is in `memory.devices`. A record without
        allocations (a failed context) says GPU where it asked for layers on one."""
        if self.allocations is None:
            return "GPU" if self.params.n_gpu_layers else "CPU"
        cards = self.allocations.card_names
        # an RPC device by its number alone: its HOST:PORT changes from run to run, the series should not
        return " + ".join(without_endpoint(c) for c in cards) if cards else "CPU"

    @property
    def series(self) -> str:
        """The machine and backend; llama-server records are a series of their own (the runtime, the slots and
        parallel requests beyond one)."""
        base = self.machine.series(self.backend)
        if self.runtime != "llama-server":
            return base
        c = self.concurrency
        return f"{base}, llama-server" + (f" x{c} parallel" if c > 1 else "")

    @property
    def kv_match(self) -> bool | None:
        """Whether llama.cpp allocated the KV the theory says (None without both)."""
        if self.allocations is None or self.footprint is None:
            return None
        fp, printed = self.footprint, self.allocations.kv_caches
        if fp.mtp_kv_bytes:  # llama-server's MTP draft context prints a cache line of its own, beside the target's
            return bytes_equal(fp.kv_bytes + fp.mtp_kv_bytes, self.allocations.kv_mib * MIB,
                               PRINTED_TOLERANCE_BYTES * max(1, len(printed)))
        return printed_equal(fp.kv_bytes, self.allocations.kv_mib)

    @property
    def recurrent_match(self) -> bool | None:
        if self.allocations is None or self.footprint is None:
            return None
        return printed_equal(self.footprint.recurrent_state_bytes, self.allocations.recurrent_mib)


@dataclass(frozen=True, kw_only=True)
class RooflineRecord(Record):
    """Predicted decode t/s at depth from the bytes each token reads, beside full GQA (`roofline`)."""

    params: Params
    speed_model: SpeedModel
    weights_read_per_token: int
    weights_basis: str
    rows: tuple[RooflineRow, ...] = ()
    split_basis: str | None = None  # several cards: the split, the cards and the link, in words
    kind: ClassVar[RecordKind] = RecordKind.ROOFLINE


@dataclass(frozen=True, kw_only=True)
class QualityRecord(Record):
    """What lossy choices cost in quality at one or more contexts, as llama-perplexity --kl-divergence measures it
    (`quality`): each row one choice against its base (f16 KV, or `base_model`'s weights), on `text`."""

    params: Params  # the settings every context was made with (n_ctx and the KV types are the rows')
    text: ScoredTextRef
    rows: tuple[QualityRow, ...] = ()
    base_model: ModelRef | None = None
    chunks_asked: int | None = None
    rows_per_decode: int = 0  # scored rows per decode call (the logits of every context bounded)
    context_warning: str | None = None
    interrupted: bool = False  # Ctrl-C: the rows hold the chunks finished before it
    kind: ClassVar[RecordKind] = RecordKind.QUALITY

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.ok and r.reason is None for r in self.rows)

    def summary(self) -> dict:
        return {"rows": [{"n_ctx": r.n_ctx, "choice": r.label, "kld_mean": r.kld_mean, "ppl_ratio": r.ppl_ratio,
                          "same_top_p": r.same_top_p} for r in self.rows]}


serial.allow_infinity(SpeedModel, "compute")  # attention compute not limiting: bytes-only calibration, --bandwidth

# the sense of the numbers of a record, by field name, or Class.field (every dataclass in it): serial already
# made them ints below 2**63 and finite floats. Every number is >= 0 but those named here as possibly negative;
# those named positive are > 0 (what a speed, a time or a division is made of).
MAY_BE_NEGATIVE = frozenset({"prio", "cache_ram_mib", "rss_delta", "gpu_delta", "kld_mean", "kld_p99", "kld_max",
                             "PlacementCheck.budget"})  # a card smaller than its reserve: below 0
POSITIVE = frozenset({"samples_ns", "n_tokens", "repetitions", "concurrency", "slots", "tok_s", "full_gqa_tok_s",
                      "measured_tok_s", "split_tok_s", "SpeedModel.bandwidth", "SpeedModel.compute", "peak_gbps",
                      "copy_gbps", "triad_gbps",
                      "Roofline.weights_bytes", "Roofline.bytes_per_token", "Roofline.full_gqa_bytes_per_token",
                      "RooflineRow.bytes_per_token", "RooflineRow.full_gqa_bytes_per_token",
                      "weights_read_per_token"})
CONTEXT_MAX = 2**32  # llama.cpp's n_ctx is a uint32_t: contexts, depths and token counts stay below it
CONTEXTS = frozenset({"n_ctx", "n_ctx_seq", "n_ctx_train", "depth", "n_tokens", "max_n_ctx", "contexts", "cells",
                      "n_batch", "n_ubatch"})


def check_values(record) -> None:
    """ShapeError naming the first value of the record that makes no sense (a negative size, a zero time)."""
    wrong = _wrong(record, "$")
    if wrong is None:
        wrong = record.inconsistency()
    if wrong:
        raise serial.ShapeError(f"{type(record).__name__}: {wrong}")


def _wrong(value, path: str, name: str = "") -> str | None:
    """The first senseless number under `value` (`name`: its field, as Class.field), or None."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            wrong = _wrong(getattr(value, f.name), f"{path}.{f.name}", f"{type(value).__name__}.{f.name}")
            if wrong is not None:
                return wrong
    elif isinstance(value, (tuple, list)):
        return next((w for i, v in enumerate(value) if (w := _wrong(v, f"{path}[{i}]", name)) is not None), None)
    elif isinstance(value, dict):
        return next((w for k, v in value.items() if (w := _wrong(v, f"{path}[{str(k)[:40]!r}]", name)) is not None),
                    None)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return _wrong_number(value, path, name)
    return None


def _wrong_number(value: int | float, path: str, qualified: str) -> str | None:
    name = qualified.rpartition(".")[2]
    if (name in POSITIVE or qualified in POSITIVE) and not value > 0:
        return f"{path} must be positive, got {value:g}"
    if value < 0 and name not in MAY_BE_NEGATIVE and qualified not in MAY_BE_NEGATIVE:
        return f"{path} cannot be negative, got {value:g}"
    if name in CONTEXTS and value > CONTEXT_MAX:
        return f"{path} is beyond llama.cpp's 2**32, got {value:g}"
    if isinstance(value, float) and not math.isfinite(value) and (qualified, value) != ("SpeedModel.compute", math.inf):
        return f"{path} must be finite"
    return None


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
