"""The record every job's result is: its kind and schema, its model, machine and versions, the stored form, and the
sense check of its numbers (a results file travels between machines: everything read back is untrusted).

`to_dict` writes the stored (and `-o json`) form, with a `schema` key naming the kind and version; `from_dict`
reads it back, and `from_dict(to_dict(x)) == x`. Values are structured strictly (`serial`: an int is an int, a
float finite) and checked for sense (`check_values`: sample times, token counts and speeds positive, byte counts
not negative and below 2**60, contexts within llama.cpp's uint32, KLD, PPL and rates within what llama-perplexity's
arithmetic can give, and what a record says of itself consistent); a record that fails is a broken record. Every
record read back from a results file passes here: this is the one check of range, for every kind.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import StrEnum
from typing import ClassVar

from ..core import serial
from ..model.metadata import ModelRef
from ..world.sysinfo import Machine, this_machine
from ..world.versions import Versions, these_versions

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



# the sense of the numbers of a record, by field name, or Class.field (every dataclass in it): serial already
# made them ints below 2**63 and finite floats. Every number is >= 0 but those named here as possibly negative;
# those named positive are > 0 (what a speed, a time or a division is made of).
MAY_BE_NEGATIVE = frozenset({"prio", "cache_ram_mib", "rss_delta", "gpu_delta",
                             "PlacementCheck.budget",  # a card smaller than its reserve: below 0
                             "Band.low", "Band.high"})  # residuals of held-out runs: predicted / measured - 1
POSITIVE = frozenset({"samples_ns", "n_tokens", "repetitions", "concurrency", "slots", "tok_s", "full_gqa_tok_s",
                      "measured_tok_s", "split_tok_s", "avg_ts", "decode_ts", "Machine.bandwidth", "Machine.fp32",
                      "peak_gbps", "copy_gbps", "triad_gbps",
                      "Roofline.weights_bytes", "Roofline.bytes_per_token", "Roofline.full_gqa_bytes_per_token",
                      "RooflineRow.full_gqa_bytes_per_token",
                      "weights_read_per_token"})
CONTEXT_MAX = 2**32  # llama.cpp's n_ctx is a uint32_t: contexts, depths and token counts stay below it
CONTEXTS = frozenset({"n_ctx", "n_ctx_seq", "n_ctx_train", "depth", "n_tokens", "max_n_ctx", "contexts", "cells",
                      "n_batch", "n_ubatch"})
# byte counts: every field named *bytes*, every part of a placement (Parts, HostParts: weights, kv, compute...) and
# these; at most an exbibyte, 2**60: a thousand times any machine, and above any footprint a uint32 context makes
# (2**32 cells x 52 MB a token of KV, 200 layers of 128 f32 heads of 256, is 2.2e17 bytes)
BYTES_MAX = 2**60
BYTE_CLASSES = frozenset({"Parts", "HostParts"})
BYTE_FIELDS = frozenset({"CardParts.budget", "PlacementCheck.budget", "PlacementCheck.card_total",
                         "PlacementCheck.fit_compute_estimate", "FitResult.machine_ram", "Budget.bytes", "Card.bytes",
                         "UnifiedPool.ram", "UnifiedPool.os_reserve"})
# quality's statistics (llama-perplexity --kl-divergence's), from, to, inclusive:
# - KLD in nats: the base's log-probs are kept as uint16 steps and its tokens below e^-16 left out of the sum
#   (perplexity.cpp:79-107, 230), so a choice as good as its base can come out a hair below 0: at most the base's
#   mass left out, n_vocab x e^-16, 0.03 for a 262,144-token vocabulary. Above: a token's KLD is at most the span of
#   the choice's logits plus log n_vocab; 10^5 nats is logits 100,000 apart, an overflow and not a measurement
# - PPL: exp(mean NLL), and an NLL is -log p >= 0; the base's top token read from its uint16 log-prob can come out
#   at log p a step (16/65535) above 0, so PPL >= 0.99 (perplexity.cpp:214)
# - the same-top-token rate and its +/-: percentages
KLD_FLOOR, KLD_MAX, PPL_FLOOR = -0.05, 1e5, 0.99
RANGES = {"QualityRow.kld_mean": (KLD_FLOOR, KLD_MAX), "QualityRow.kld_p99": (KLD_FLOOR, KLD_MAX),
          "QualityRow.kld_max": (KLD_FLOOR, KLD_MAX), "QualityRow.kld_mean_unc": (0.0, KLD_MAX),
          "QualityRow.ppl": (PPL_FLOOR, math.inf), "QualityRow.ppl_base": (PPL_FLOOR, math.inf),
          "QualityRow.same_top_p": (0.0, 100.0), "QualityRow.same_top_unc": (0.0, 100.0)}


# a speed model without a FLOP figure (--bandwidth without --tflops): compute not limiting, stored as Infinity
UNBOUNDED = {("Machine.fp32", math.inf)}


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
    owner, _, name = qualified.rpartition(".")
    if qualified in RANGES and not RANGES[qualified][0] <= value <= RANGES[qualified][1]:
        low, high = RANGES[qualified]
        return f"{path} must be from {low:g}" + (f" to {high:g}" if math.isfinite(high) else " up") + f", got {value:g}"
    if (name in POSITIVE or qualified in POSITIVE) and not value > 0:
        return f"{path} must be positive, got {value:g}"
    if value < 0 and name not in MAY_BE_NEGATIVE and qualified not in MAY_BE_NEGATIVE and qualified not in RANGES:
        return f"{path} cannot be negative, got {value:g}"
    if name in CONTEXTS and value > CONTEXT_MAX:
        return f"{path} is beyond llama.cpp's 2**32, got {value:g}"
    if ("bytes" in name or owner in BYTE_CLASSES or qualified in BYTE_FIELDS) and value > BYTES_MAX:
        return f"{path} is more bytes than any machine holds (2**60), got {value:g}"
    if name.endswith("_mib") and value > BYTES_MAX / 2**20:
        return f"{path} is more MiB than any machine holds (2**40), got {value:g}"
    if isinstance(value, float) and not math.isfinite(value) and (qualified, value) not in UNBOUNDED:
        return f"{path} must be finite"
    return None
