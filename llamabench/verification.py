"""Theory against llama.cpp: compare a Footprint with the sizes llama.cpp printed. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from .llama.alloc_log import MIB, Allocations
from .footprint import Footprint

TOLERANCE_MIB = 0.005  # llama.cpp prints %.2f MiB: a byte count matches when it rounds to the printed value


@dataclass(frozen=True)
class Check:
    component: str
    theory: int | str  # bytes, or a count / label for structural checks
    llama: float | str | None  # MiB as printed, or a label
    ok: bool
    unit: str = "MiB"

    @property
    def diff_mib(self) -> float | None:
        if self.unit != "MiB" or self.llama is None or isinstance(self.theory, str):
            return None
        return round(float(self.llama) - self.theory / MIB, 2)


def printed_equal(theory_mib: float, printed_mib: float) -> bool:
    """Whether a size in MiB is the one llama.cpp printed with %.2f."""
    return abs(theory_mib - printed_mib) <= TOLERANCE_MIB + 1e-9


def _mib_check(component: str, theory_bytes: int, printed: float | None) -> Check:
    if printed is None:
        return Check(component, theory_bytes, None, theory_bytes == 0)
    return Check(component, theory_bytes, printed, printed_equal(theory_bytes / MIB, printed))


def compare(fp: Footprint, alloc: Allocations) -> list[Check]:
    """One check per component; structural checks (cells, layers, streams) are exact."""
    checks: list[Check] = []
    caches = list(alloc.kv_caches)
    has_swa = fp.n_swa_layers > 0
    base = caches[0] if caches and fp.n_kv_layers else None
    swa = caches[-1] if has_swa and caches else None
    expected_lines = int(fp.n_kv_layers > 0) + int(has_swa)
    checks.append(Check("KV cache lines", str(expected_lines), str(len(caches)), expected_lines == len(caches), unit=""))

    if fp.n_kv_layers or base is not None:
        checks.append(_mib_check("KV (non-SWA)", fp.k_bytes + fp.v_bytes, base.size_mib if base else None))
        checks.append(_mib_check("  K", fp.k_bytes, base.k_mib if base else None))
        checks.append(_mib_check("  V", fp.v_bytes, base.v_mib if base else None))
        want = f"{fp.shape.n_ctx_seq} cells x {fp.n_kv_layers} layers x {fp.shape.n_stream} streams"
        got = f"{base.cells} cells x {base.layers} layers x {base.n_stream} streams" if base else "none"
        checks.append(Check("  shape", want, got, want == got, unit=""))
    if has_swa:
        checks.append(_mib_check("KV (SWA)", fp.swa_kv_bytes, swa.size_mib if swa else None))
        want = f"{fp.shape.swa_cells} cells x {fp.n_swa_layers} layers x {fp.shape.n_stream} streams"
        got = f"{swa.cells} cells x {swa.layers} layers x {swa.n_stream} streams" if swa else "none"
        checks.append(Check("  shape", want, got, want == got, unit=""))
    checks.append(_mib_check("KV total", fp.kv_bytes, round(sum(c.size_mib for c in caches), 2) if caches else None))

    rec = alloc.recurrent[0] if alloc.recurrent else None
    if fp.n_recurrent_layers or rec is not None:
        checks.append(_mib_check("recurrent state", fp.recurrent_state_bytes, rec.size_mib if rec else None))
        checks.append(_mib_check("  R (conv)", fp.recurrent_r_bytes, rec.r_mib if rec else None))
        checks.append(_mib_check("  S (ssm)", fp.recurrent_s_bytes, rec.s_mib if rec else None))
        want = f"{max(1, fp.settings.n_seq)} cells"  # llama.cpp prints mem_size; n_rs_seq rows are extra
        got = f"{rec.cells} cells" if rec else "none"
        checks.append(Check("  shape", want, got, want == got, unit=""))
    return checks


def all_ok(checks: list[Check]) -> bool:
    return all(c.ok for c in checks)


MATRIX_N_CTX = (4096, 131072, 5000)  # 5000 is not a multiple of 256
MATRIX_TYPES = (("f16", "f16", True), ("q8_0", "q8_0", True), ("q4_0", "q4_0", True), ("f16", "f16", False))
MATRIX_SEQS = ((1, False), (4, False), (4, True))


def matrix_settings(has_swa: bool) -> list:
    """The exactness matrix: n_ctx x cache types (quantized V with flash attention) x sequences x swa_full."""
    from .footprint import CacheSettings

    cells = []
    for n_ctx in MATRIX_N_CTX:
        for type_k, type_v, fa in MATRIX_TYPES:
            for n_seq, unified in MATRIX_SEQS:
                for swa_full in ((False, True) if has_swa else (False,)):
                    cells.append(CacheSettings(n_ctx=n_ctx, type_k=type_k, type_v=type_v, flash_attn=fa,
                                               n_seq=n_seq, kv_unified=unified, swa_full=swa_full))
    # speculative-decoding snapshots: only some recurrent families keep n_rs_seq (llm_arch_supports_rs_rollback)
    cells.append(CacheSettings(n_ctx=4096, n_seq=2, n_rs_seq=3))
    return cells


def describe(settings) -> str:
    s = settings
    return (f"n_ctx={s.n_ctx} K={s.type_k} V={s.type_v} fa={'on' if s.flash_attn else 'off'} n_seq={s.n_seq}"
            + (" unified" if s.kv_unified else "") + (" swa_full" if s.swa_full else "")
            + (f" n_rs_seq={s.n_rs_seq}" if s.n_rs_seq else ""))
