"""What llama.cpp allocated, device by device, parsed from its own log lines. Pure: text in, data out.

The lines (llama.cpp in llama-cpp-python 0.3.36):
  load_tensors: %12s model buffer size = %8.2f MiB
  llama_kv_cache: %10s KV buffer size = %8.2f MiB
  llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB
  llama_memory_recurrent: %10s RS buffer size = %8.2f MiB
  llama_memory_recurrent: size = %7.2f MiB (%6u cells, %3d layers, %2u seqs %2u rs_seq),
      R (%s): %7.2f MiB, S (%s): %7.2f MiB, P (%s): %7.2f MiB   (one line)
  sched_reserve: %10s compute buffer size = %8.2f MiB
Values are printed in MiB with two decimals: a byte count b matches when round(b / 2**20, 2) equals it
(`printed_equal`; every tolerance of a check against llama.cpp is declared at the end of this module).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from ..core import serial
from ..core.units import MIB

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
_NEW_CONTEXT = "llama_context: constructing llama_context"
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


def _sum_mib(values) -> float:
    return round(sum(values), 2)


@dataclass(frozen=True)
class Parts:
    """Bytes of one device (a card, or system RAM), part by part: what llama.cpp allocated there, or what a
    placement puts there. The one type of these four parts: the fit's card and host (jobs/fit/search.py) extend
    it with what they set aside beside them (reserve, projector, the runtime's caches)."""

    weights: int = 0
    kv: int = 0
    recurrent: int = 0
    compute: int = 0  # compute buffers; on system RAM the output (logits) buffer too

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.recurrent + self.compute

    @property
    def buffers(self) -> "Parts":
        """The four parts alone, what llama.cpp allocates buffers for (anything an extension adds left out)."""
        return Parts(self.weights, self.kv, self.recurrent, self.compute)


DeviceParts = Parts  # its name where a device's parts are meant
PARTS = tuple(f.name for f in fields(Parts))
HOST = "system RAM"


@dataclass(frozen=True)
class BufferBytes:
    """One buffer type in llama.cpp's own memory breakdown (llama_get_memory_breakdown), in bytes."""

    model: int = 0  # weights
    context: int = 0  # KV cache and recurrent state together
    compute: int = 0  # compute buffers (the output buffer is not in it)


def is_host_buffer(buffer_name: str) -> bool:
    """System RAM: CPU, CPU_Mapped, CPU_REPACK, AMX, and a GPU backend's pinned host buffers (CUDA_Host)."""
    return buffer_name.startswith("CPU") or buffer_name == "AMX" or buffer_name.endswith("_Host")


MAPPED = "_Mapped"  # a device's buffer over the mapped file (Metal: MTL0_Mapped), as llama.cpp names it


def device_name(buffer_name: str) -> str:
    """The device a buffer is on: MTL0_Mapped (Metal's buffer over the mapped file) is on MTL0."""
    return buffer_name.removesuffix(MAPPED) if not is_host_buffer(buffer_name) else buffer_name


def on_device(name: str):
    """Which buffer names belong to one card (its own name, and its mapped file's buffer), or to system RAM
    (`HOST`: every host buffer)."""
    return is_host_buffer if name == HOST else (lambda buffer: device_name(buffer) == name)


@dataclass(frozen=True)
class Allocations:
    """What llama.cpp reported, buffers keyed by their device's name, all in MiB as printed (two decimals)."""

    model_buffers_mib: dict[str, float] = field(default_factory=dict)
    kv_buffers_mib: dict[str, float] = field(default_factory=dict)
    kv_caches: tuple[KvCacheLine, ...] = ()
    rs_buffers_mib: dict[str, float] = field(default_factory=dict)
    recurrent: tuple[RecurrentLine, ...] = ()
    compute_buffers_mib: dict[str, float] = field(default_factory=dict)
    output_buffers_mib: dict[str, float] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    # llama.cpp's memory breakdown by buffer type, exact bytes (a dry run's only per-device weights); {}: not read
    breakdown: dict[str, BufferBytes] = field(default_factory=dict)

    @property
    def kv_mib(self) -> float:
        return _sum_mib(c.size_mib for c in self.kv_caches)

    @property
    def recurrent_mib(self) -> float:
        return _sum_mib(r.size_mib for r in self.recurrent)

    @property
    def compute_mib(self) -> float:
        return _sum_mib(self.compute_buffers_mib.values())

    @property
    def weights_mib(self) -> float:
        return _sum_mib(self.model_buffers_mib.values())

    @property
    def output_mib(self) -> float:
        return _sum_mib(self.output_buffers_mib.values())

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

    @property
    def card_names(self) -> tuple[str, ...]:
        """The devices other than system RAM that hold a buffer, in the order llama.cpp printed them."""
        names = [device_name(k) for d in (self.model_buffers_mib, self.kv_buffers_mib, self.rs_buffers_mib,
                                          self.compute_buffers_mib) for k in d if not is_host_buffer(k)]
        return tuple(dict.fromkeys(names))

    @property
    def parts(self) -> Parts:
        """Every device together: all weights, KV and recurrent state, the compute and output buffers."""
        return Parts(self.weights_bytes, self.kv_bytes, self.recurrent_bytes, self.compute_and_output_bytes)

    def device(self, name: str) -> Parts:
        """The parts llama.cpp put on one card (by buffer name), or on system RAM (`HOST`: every host buffer,
        the output buffer included)."""
        keep = on_device(name)

        def side(buffers: dict[str, float]) -> int:
            return round(sum(v for k, v in buffers.items() if keep(k)) * MIB)

        compute = side(self.compute_buffers_mib) + (side(self.output_buffers_mib) if name == HOST else 0)
        return Parts(side(self.model_buffers_mib), side(self.kv_buffers_mib), side(self.rs_buffers_mib), compute)

    def breakdown_of(self, name: str) -> BufferBytes:
        """The breakdown of one card (by buffer name), or of system RAM (`HOST`: every host buffer type)."""
        keep = on_device(name)
        rows = [b for k, b in self.breakdown.items() if keep(k)]
        return BufferBytes(sum(b.model for b in rows), sum(b.context for b in rows), sum(b.compute for b in rows))

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Allocations":
        return serial.from_dict(cls, data)


def _add(d: dict[str, float], key: str, value: str) -> None:
    d[key] = round(d.get(key, 0.0) + float(value), 2)


def _summed_compute(contexts: list[dict[str, float]]) -> dict[str, float]:
    """Each device's compute buffers, every context's (the main one, llama-server's MTP or draft one) added up."""
    compute: dict[str, float] = {}
    for reserved in contexts:
        for name, mib in reserved.items():
            _add(compute, name, str(mib))
    return compute


def parse_allocations(log: str) -> Allocations:
    model, kv_buf, rs_buf, output = {}, {}, {}, {}
    contexts: list[dict[str, float]] = [{}]  # each context's compute buffers, by device
    kv_caches, recurrent, errors = [], [], []
    for line in log.splitlines():
        if m := _MODEL_BUF.search(line):
            _add(model, m[1], m[2])
        elif m := _KV_BUF.search(line):
            _add(kv_buf, m[1], m[2])
        elif m := _KV_SIZE.search(line):
            kv_caches.append(KvCacheLine(float(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), m[6], float(m[7]),
                                         m[8], float(m[9])))
        elif m := _RS_BUF.search(line):
            _add(rs_buf, m[1], m[2])
        elif m := _RS_SIZE.search(line):
            recurrent.append(RecurrentLine(float(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[7]), float(m[9]),
                                           float(m[11] or 0.0)))
        elif _NEW_CONTEXT in line:  # another context (llama-server's MTP or draft context): its buffers add up
            contexts.append({})
        elif m := _COMPUTE.search(line):
            # sched_reserve runs more than once in a context: its last reservation is the one that stays
            contexts[-1][m[1]] = float(m[2])
        elif m := _OUTPUT.search(line):
            _add(output, m[1], m[2])
        elif "failed" in line.lower() or "error" in line.lower():
            errors.append(line.strip())
    compute = _summed_compute(contexts)
    return Allocations(model, kv_buf, tuple(kv_caches), rs_buf, tuple(recurrent), compute, output, tuple(errors))


# The tolerances of every check of a prediction against what llama.cpp allocated, each declared here once.

PRINTED_TOLERANCE_BYTES = MIB // 200 + 1  # llama.cpp prints %.2f MiB: a byte count is within half a hundredth of it


def bytes_equal(a: float, b: float, tolerance: int = PRINTED_TOLERANCE_BYTES) -> bool:
    """Two byte counts, one of them from a printed MiB value: equal to llama.cpp's precision (the one tolerance of
    every check), or within a wider `tolerance` where one is given."""
    return abs(a - b) <= tolerance


def printed_equal(n_bytes: int, printed_mib: float) -> bool:
    """Whether a byte count is the size llama.cpp printed with %.2f MiB (the one tolerance of every check)."""
    return bytes_equal(n_bytes, printed_mib * MIB)


# several devices: llama.cpp's no_alloc projection keeps the first prompt-graph reservation, the real context the
# last of three, so a card's compute may differ from its dry run's by a few MiB (5.00 on the last card seen)
COMPUTE_TOLERANCE_BYTES, COMPUTE_TOLERANCE_SHARE = 5 * MIB, 0.03
COMPUTE_TOLERANCE_WORDS = f"{COMPUTE_TOLERANCE_SHARE:.0%} or {COMPUTE_TOLERANCE_BYTES // MIB} MiB"


def compute_tolerance(predicted: int) -> int:
    """How far a card's real compute buffers may be from its dry run's, several devices: 5 MiB or 3%, whichever
    is larger."""
    return max(COMPUTE_TOLERANCE_BYTES, int(predicted * COMPUTE_TOLERANCE_SHARE))


# everything in system RAM (--cpu-only): the totals, to the printed MiB rounding and the file mapping's padding
RAM_TOLERANCE_BYTES, RAM_TOLERANCE_DIVISOR = 2 * MIB, 200
RAM_TOLERANCE_WORDS = f"{RAM_TOLERANCE_BYTES // MIB} MiB + {1 / RAM_TOLERANCE_DIVISOR:.1%}"


def ram_tolerance(predicted_total: int) -> int:
    """How far the total llama.cpp allocated in system RAM may be from the predicted one: 2 MiB + 0.5%."""
    return RAM_TOLERANCE_BYTES + predicted_total // RAM_TOLERANCE_DIVISOR
