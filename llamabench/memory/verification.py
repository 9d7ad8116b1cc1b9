"""Theory against llama.cpp: compare a Footprint with the sizes llama.cpp printed. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import serial
from ..core.units import MIB, plural
from ..settings.params import Params
from .allocations import PRINTED_TOLERANCE_BYTES, Allocations, bytes_equal
from .footprint import Footprint


@dataclass(frozen=True)
class Check:
    """One component: bytes against llama.cpp's printed MiB, or (structural) a wanted shape against the printed one."""

    component: str
    ok: bool
    theory_bytes: int | None = None
    llama_mib: float | None = None  # as printed; None where llama.cpp printed no such line
    want: str | None = None  # structural checks: cells x layers x streams
    got: str | None = None

    @property
    def is_structural(self) -> bool:
        return self.want is not None

    def mismatch(self) -> str:
        """One line for a failed check: what theory said against what llama.cpp printed."""
        if self.is_structural:
            return f"{self.component.strip()}: theory {self.want} vs llama.cpp {self.got}"
        printed = "not reported" if self.llama_mib is None else f"{self.llama_mib:.2f} MiB"
        return f"{self.component.strip()}: theory {self.theory_bytes:,} B vs llama.cpp {printed}"

    @property
    def diff_mib(self) -> float | None:
        if self.is_structural or self.llama_mib is None or self.theory_bytes is None:
            return None
        return round(self.llama_mib - self.theory_bytes / MIB, 2)


def _mib_check(component: str, theory_bytes: int, printed: float | None, n_printed: int = 1) -> Check:
    """Theory against a printed MiB value, or the sum of `n_printed` of them (each rounded to 0.01 MiB)."""
    ok = theory_bytes == 0 if printed is None else bytes_equal(theory_bytes, printed * MIB,
                                                               PRINTED_TOLERANCE_BYTES * max(1, n_printed))
    return Check(component, ok, theory_bytes=theory_bytes, llama_mib=printed)


def _shape_check(component: str, want: str, got: str) -> Check:
    return Check(component, want == got, want=want, got=got)


def compare(fp: Footprint, alloc: Allocations) -> tuple[Check, ...]:
    """One check per component; structural checks (cells, layers, streams) are exact."""
    checks: list[Check] = []
    caches = [c for c in alloc.kv_caches if c.layers > 0]  # lfm2's iswa prints an empty non-SWA cache: nothing held
    mtp = caches.pop() if fp.mtp_kv_bytes and caches else None  # the MTP draft context's cache, created last
    has_swa = fp.n_swa_layers > 0
    base = caches[0] if caches and fp.n_kv_layers else None
    swa = caches[-1] if has_swa and caches else None
    # the sparse-attention indexer's cache follows the main one (llama-kv-cache-dsa.cpp, llama-memory-hybrid-idx.cpp)
    index = caches[1] if fp.n_index_layers and len(caches) > 1 else None
    expected_lines = int(fp.n_kv_layers > 0) + int(has_swa) + int(fp.n_index_layers > 0)
    checks.append(_shape_check("KV cache lines", str(expected_lines), str(len(caches))))

    if fp.n_kv_layers or base is not None:
        checks.append(_mib_check("KV (non-SWA)", fp.k_bytes + fp.v_bytes, base.size_mib if base else None))
        checks.append(_mib_check("  K", fp.k_bytes, base.k_mib if base else None))
        checks.append(_mib_check("  V", fp.v_bytes, base.v_mib if base else None))
        want = _shape(fp.shape.n_ctx_seq, fp.n_kv_layers, fp.shape.n_stream)
        got = _shape(base.cells, base.layers, base.n_stream) if base else "none"
        checks.append(_shape_check("  shape", want, got))
    if has_swa:
        checks.append(_mib_check("KV (SWA)", fp.swa_kv_bytes, swa.size_mib if swa else None))
        want = _shape(fp.shape.swa_cells, fp.n_swa_layers, fp.shape.n_stream)
        got = _shape(swa.cells, swa.layers, swa.n_stream) if swa else "none"
        checks.append(_shape_check("  shape", want, got))
    if fp.n_index_layers:
        checks.append(_mib_check("KV (indexer)", fp.index_k_bytes + fp.index_v_bytes,
                                 index.size_mib if index else None))
    main_mib = round(sum(c.size_mib for c in caches), 2)
    checks.append(_mib_check("KV total", fp.kv_bytes, main_mib if caches else None, len(caches)))
    if fp.mtp_kv_bytes:
        checks.append(_mib_check("KV (MTP context)", fp.mtp_kv_bytes, mtp.size_mib if mtp else None))
        want = _shape(fp.shape.n_ctx_seq, fp.n_mtp_layers, fp.shape.n_stream)
        got = _shape(mtp.cells, mtp.layers, mtp.n_stream) if mtp else "none"
        checks.append(_shape_check("  shape", want, got))

    rec = alloc.recurrent[0] if alloc.recurrent else None
    if fp.n_recurrent_layers or rec is not None:
        checks.append(_mib_check("recurrent state", fp.recurrent_state_bytes, rec.size_mib if rec else None))
        checks.append(_mib_check("  R (conv)", fp.recurrent_r_bytes, rec.r_mib if rec else None))
        checks.append(_mib_check("  S (ssm)", fp.recurrent_s_bytes, rec.s_mib if rec else None))
        want = f"{max(1, fp.params.n_seq)} cells"  # llama.cpp prints mem_size; n_rs_seq rows are extra
        got = f"{rec.cells} cells" if rec else "none"
        checks.append(_shape_check("  shape", want, got))
    return tuple(checks)


def all_ok(checks) -> bool:
    return all(c.ok for c in checks)


MATRIX_N_CTX = (4096, 131072, 5000)  # 5000 is not a multiple of 256
MATRIX_TYPES = (("f16", "f16", True), ("q8_0", "q8_0", True), ("q4_0", "q4_0", True), ("f16", "f16", False))
MATRIX_SEQS = ((1, False), (4, False), (4, True))


def matrix_params(has_swa: bool, has_mtp: bool = False) -> list[Params]:
    """The exactness matrix: n_ctx x cache types (quantized V with flash attention) x sequences x swa_full."""
    cells = []
    for n_ctx in MATRIX_N_CTX:
        for type_k, type_v, fa in MATRIX_TYPES:
            for n_seq, unified in MATRIX_SEQS:
                for swa_full in ((False, True) if has_swa else (False,)):
                    cells.append(Params(n_ctx=n_ctx, type_k=type_k, type_v=type_v, flash_attn=fa,
                                        n_seq=n_seq, kv_unified=unified, swa_full=swa_full))
    # speculative-decoding snapshots: only some recurrent families keep n_rs_seq (llm_arch_supports_rs_rollback)
    cells.append(Params(n_ctx=4096, n_seq=2, n_rs_seq=3))
    if has_mtp:  # llama-server --spec-type draft-mtp: the MTP draft context beside, its own cache types
        cells.append(Params(n_ctx=4096, n_seq=4, kv_unified=True, n_rs_seq=3, spec_type="draft-mtp",
                            type_k_draft="q8_0", type_v_draft="q8_0"))
        cells.append(Params(n_ctx=5000, n_seq=2, spec_type="draft-mtp", flash_attn=False))
    return cells


def describe(p: Params) -> str:
    return (f"n_ctx={p.n_ctx} K={p.type_k} V={p.type_v} fa={'on' if p.flash_attn else 'off'} n_seq={p.n_seq}"
            + (" unified" if p.kv_unified else "") + (" swa_full" if p.swa_full else "")
            + (f" n_rs_seq={p.n_rs_seq}" if p.n_rs_seq else "")
            + (f" {p.spec_type} ({p.type_k_draft}/{p.type_v_draft})" if p.spec_type != "none" else ""))


@dataclass(frozen=True)
class MatrixCell:
    params: Params
    mismatches: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches


@dataclass(frozen=True)
class MatrixResult:
    """The exactness matrix of one model: every cell, theory against llama.cpp."""

    model: str
    gguf: str
    file_bytes: int
    disk_bytes: int
    seconds: float
    cells: tuple[MatrixCell, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.cells)

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "MatrixResult":
        return serial.from_dict(cls, data)


def _shape(cells: int, layers: int, streams: int) -> str:
    """A cache's shape in words: 4096 cells x 10 layers x 1 stream."""
    return " x ".join(f"{n} {plural(n, w)}" for n, w in ((cells, "cell"), (layers, "layer"), (streams, "stream")))
