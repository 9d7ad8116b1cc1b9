"""`verify` in words: theory against llama.cpp's printed sizes, one field list for the check rows."""

from __future__ import annotations

from ..core.safe_text import shown_path
from ..core.units import count, mib, thousands
from ..memory.verification import Check, MatrixResult
from ..records.inspect import VerifyRecord
from .fields import Field, table


def _theory(c: Check) -> str:
    return c.want if c.is_structural else f"{thousands(c.theory_bytes)} B = {mib(c.theory_bytes)}"


def _llama(c: Check) -> str:
    if c.is_structural:
        return c.got
    return "not reported" if c.llama_mib is None else f"{c.llama_mib:.2f} MiB"


def _diff(c: Check) -> str:
    return "" if c.diff_mib is None else f"{c.diff_mib + 0.0:+.2f}".replace("-0.00", "+0.00")


CHECK_FIELDS = (
    Field("component", "component", lambda c: c.component),
    Field("theory", "theory", _theory, align="r"),
    Field("llama_cpp", "llama.cpp", _llama, align="r"),
    Field("diff_mib", "diff MiB", _diff, align="r"),
    Field("ok", "verdict", lambda c: "ok" if c.ok else "MISMATCH"),
    Field("theory_bytes", "theory bytes", lambda c: c.theory_bytes, views=frozenset()),
    Field("llama_cpp_mib", "llama.cpp MiB", lambda c: c.llama_mib, views=frozenset()),
)


def render_verify(record: VerifyRecord, fmt: str = "text") -> str:
    if fmt in ("csv", "md"):
        return table(record.checks, CHECK_FIELDS, fmt)
    if record.footprint is None:
        return _render_measured(record)
    p = record.params
    out = [f"verify {record.model.label} at n_ctx {thousands(record.footprint.shape.n_ctx)} "
           f"(K {p.type_k}, V {p.type_v}, flash attention {'on' if p.flash_attn else 'off'}, "
           f"{p.n_seq} seq{', unified' if p.kv_unified else ''}{', swa_full' if p.swa_full else ''})",
           f"theory: computed from metadata; llama.cpp: its own log lines from a no_alloc dry run of "
           f"{shown_path(record.gguf)}",
           table(record.checks, CHECK_FIELDS, "text")]
    compute = record.allocations.compute_buffers_mib
    if compute:
        what = ("of the geometry twin: its hidden size and vocabulary are tiny, so this is not the real model's"
                if record.model.is_twin else "of this GGUF")
        out.append(f"compute buffer (llama.cpp only, {what}): "
                   + ", ".join(f"{dev} {v:.2f} MiB" for dev, v in compute.items()))
    out.append("all match" if record.ok else "MISMATCH between theory and llama.cpp")
    return "\n".join(out)


def _render_measured(record: VerifyRecord) -> str:
    """An architecture without a layout rule: llama.cpp's own sizes, measured, nothing to check them against."""
    p, a = record.params, record.allocations
    out = [f"verify {record.model.label} at n_ctx {thousands(p.n_ctx)} (K {p.type_k}, V {p.type_v}, flash attention "
           f"{'on' if p.flash_attn else 'off'}, {p.n_seq} seq{', unified' if p.kv_unified else ''})",
           f"no theory to check: no layout rule for {record.model.architecture} in llamabench ({record.no_rule})",
           f"measured: llama.cpp's own log lines from a no_alloc dry run of {shown_path(record.gguf)}"]
    for c in a.kv_caches:
        out.append(f"  KV cache        {c.size_mib:10.2f} MiB  ({count(c.cells, 'cell')}, {count(c.layers, 'layer')}, "
                   f"{c.n_seq} seq, K {c.type_k} {c.k_mib:.2f} MiB, V {c.type_v} {c.v_mib:.2f} MiB)")
    for r in a.recurrent:
        out.append(f"  recurrent state {r.size_mib:10.2f} MiB  ({count(r.cells, 'cell')}, {count(r.layers, 'layer')}, "
                   f"{count(r.n_seq, 'seq')})")
    if not (a.kv_caches or a.recurrent):
        out.append("  no KV cache and no recurrent state")
    out += [f"  compute buffer  {v:10.2f} MiB  ({dev})" for dev, v in a.compute_buffers_mib.items()]
    out.append(f"  KV total {a.kv_mib:.2f} MiB, recurrent total {a.recurrent_mib:.2f} MiB (llama.cpp only)")
    return "\n".join(out)


MATRIX_FIELDS = (
    Field("params", "parameters", lambda c: c.params.label),
    Field("ok", "verdict", lambda c: "ok" if c.ok else "MISMATCH"),
    Field("mismatches", "mismatches", lambda c: "; ".join(c.mismatches)),
)


def render_matrix(result: MatrixResult, fmt: str = "text") -> str:
    if fmt in ("csv", "md"):
        return table(result.cells, MATRIX_FIELDS, fmt)
    bad = [line for cell in result.cells for line in cell.mismatches]
    n_bad = sum(not c.ok for c in result.cells)
    out = [f"{shown_path(result.model)}: {count(len(result.cells), 'cell')}, {len(result.cells) - n_bad} match, "
           f"{n_bad} differ ({result.seconds:.1f} s; {shown_path(result.gguf)}, {result.file_bytes / 2**20:.1f} MiB, "
           f"{result.disk_bytes / 2**20:.1f} MiB on disk)"]
    out += ["  MISMATCH " + line for line in bad]
    return "\n".join(out)
