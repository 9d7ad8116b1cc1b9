"""Parse llama.cpp's own allocation log lines into plain numbers. Pure: text in, data out.

The lines (llama.cpp in llama-cpp-python 0.3.36):
  load_tensors: %12s model buffer size = %8.2f MiB
  llama_kv_cache: %10s KV buffer size = %8.2f MiB
  llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB
  llama_memory_recurrent: %10s RS buffer size = %8.2f MiB
  llama_memory_recurrent: size = %7.2f MiB (%6u cells, %3d layers, %2u seqs %2u rs_seq), R (%s): %7.2f MiB, S (%s): %7.2f MiB, P (%s): %7.2f MiB
  sched_reserve: %10s compute buffer size = %8.2f MiB
Values are printed in MiB with two decimals: a byte count b matches when round(b / 2**20, 2) equals it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MIB = 1024 * 1024

_MODEL_BUF = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")
_KV_BUF = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")
_KV_SIZE = re.compile(
    r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+)/\s*(\d+) seqs\), "
    r"K \((\w+)\):\s+([\d.]+) MiB, V \((\w+)\):\s+([\d.]+) MiB"
)
_RS_BUF = re.compile(r"llama_memory_recurrent:\s+(\S+) RS buffer size =\s+([\d.]+) MiB")
_RS_SIZE = re.compile(
    r"llama_memory_recurrent: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+) seqs\s+(\d+) rs_seq\), "
    r"R \((\w+)\):\s+([\d.]+) MiB, S \((\w+)\):\s+([\d.]+) MiB(?:, P \((\w+)\):\s+([\d.]+) MiB)?"
)
_COMPUTE = re.compile(r"sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
_OUTPUT = re.compile(r"llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB")


@dataclass(frozen=True)
class KvCacheLine:
    size_mib: float
    cells: int
    layers: int
    n_seq: int
    n_stream: int
    type_k: str
    k_mib: float
    type_v: str
    v_mib: float


@dataclass(frozen=True)
class RecurrentLine:
    size_mib: float
    cells: int
    layers: int
    n_seq: int
    r_mib: float
    s_mib: float
    p_mib: float


@dataclass
class Allocations:
    """What llama.cpp reported, all in MiB as printed (two decimals)."""

    model_buffers_mib: dict[str, float] = field(default_factory=dict)
    kv_buffers_mib: dict[str, float] = field(default_factory=dict)
    kv_caches: list[KvCacheLine] = field(default_factory=list)
    rs_buffers_mib: dict[str, float] = field(default_factory=dict)
    recurrent: list[RecurrentLine] = field(default_factory=list)
    compute_buffers_mib: dict[str, float] = field(default_factory=dict)
    output_buffers_mib: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def kv_mib(self) -> float:
        return round(sum(c.size_mib for c in self.kv_caches), 2)

    @property
    def recurrent_mib(self) -> float:
        return round(sum(r.size_mib for r in self.recurrent), 2)

    @property
    def compute_mib(self) -> float:
        return round(sum(self.compute_buffers_mib.values()), 2)

    @property
    def weights_mib(self) -> float:
        return round(sum(self.model_buffers_mib.values()), 2)

    @property
    def output_mib(self) -> float:
        return round(sum(self.output_buffers_mib.values()), 2)

    # bytes, from the printed MiB (exact to llama.cpp's 0.01 MiB)
    @property
    def kv_bytes(self) -> int:
        return round(self.kv_mib * MIB)

    @property
    def recurrent_bytes(self) -> int:
        return round(self.recurrent_mib * MIB)

    @property
    def weights_bytes(self) -> int:
        return round(self.weights_mib * MIB)

    @property
    def compute_and_output_bytes(self) -> int:
        """The compute buffers plus the output (logits) buffer: what `fit` calls compute."""
        return round((self.compute_mib + self.output_mib) * MIB)

    @classmethod
    def from_dict(cls, data: dict) -> "Allocations":
        return cls(
            model_buffers_mib=dict(data.get("model_buffers_mib") or {}),
            kv_buffers_mib=dict(data.get("kv_buffers_mib") or {}),
            kv_caches=[KvCacheLine(**c) for c in data.get("kv_caches") or []],
            rs_buffers_mib=dict(data.get("rs_buffers_mib") or {}),
            recurrent=[RecurrentLine(**r) for r in data.get("recurrent") or []],
            compute_buffers_mib=dict(data.get("compute_buffers_mib") or {}),
            output_buffers_mib=dict(data.get("output_buffers_mib") or {}),
            errors=list(data.get("errors") or []),
        )

    def to_dict(self) -> dict:
        return {
            "model_buffers_mib": dict(self.model_buffers_mib),
            "kv_buffers_mib": dict(self.kv_buffers_mib),
            "kv_caches": [vars(c) for c in self.kv_caches],
            "rs_buffers_mib": dict(self.rs_buffers_mib),
            "recurrent": [vars(r) for r in self.recurrent],
            "compute_buffers_mib": dict(self.compute_buffers_mib),
            "output_buffers_mib": dict(self.output_buffers_mib),
            "errors": list(self.errors),
        }


def _add(d: dict[str, float], key: str, value: str) -> None:
    d[key] = round(d.get(key, 0.0) + float(value), 2)


def parse_allocations(log: str) -> Allocations:
    out = Allocations()
    for line in log.splitlines():
        if m := _MODEL_BUF.search(line):
            _add(out.model_buffers_mib, m[1], m[2])
        elif m := _KV_BUF.search(line):
            _add(out.kv_buffers_mib, m[1], m[2])
        elif m := _KV_SIZE.search(line):
            out.kv_caches.append(KvCacheLine(float(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), m[6], float(m[7]), m[8], float(m[9])))
        elif m := _RS_BUF.search(line):
            _add(out.rs_buffers_mib, m[1], m[2])
        elif m := _RS_SIZE.search(line):
            out.recurrent.append(RecurrentLine(float(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[7]), float(m[9]), float(m[11] or 0.0)))
        elif m := _COMPUTE.search(line):
            # sched_reserve runs more than once: the last reservation is the one that stays
            out.compute_buffers_mib[m[1]] = float(m[2])
        elif m := _OUTPUT.search(line):
            _add(out.output_buffers_mib, m[1], m[2])
        elif "failed" in line.lower() or "error" in line.lower():
            out.errors.append(line.strip())
    return out


def mib_matches(n_bytes: int, printed_mib: float) -> bool:
    """Whether a byte count prints as this MiB value with %.2f (llama.cpp casts to float first)."""
    return f"{n_bytes / MIB:.2f}" == f"{printed_mib:.2f}" or round(n_bytes / MIB, 2) == round(printed_mib, 2)
