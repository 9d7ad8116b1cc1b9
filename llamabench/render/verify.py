"""`verify` in words: theory against llama.cpp's printed sizes, one row per component."""

from __future__ import annotations

from ..units import mib, thousands
from .table import render_table


def check_rows(checks) -> list[list[str]]:
    rows = []
    for c in checks:
        if c.unit == "MiB":
            theory = f"{thousands(c.theory)} B = {mib(c.theory)}"
            llama = "not reported" if c.llama is None else f"{c.llama:.2f} MiB"
            diff = "" if c.diff_mib is None else f"{c.diff_mib + 0.0:+.2f}".replace("-0.00", "+0.00")
        else:
            theory, llama, diff = str(c.theory), str(c.llama), ""
        rows.append([c.component, theory, llama, diff, "ok" if c.ok else "MISMATCH"])
    return rows


def render_verify(model: str, source, path, result, checks, allocations) -> str:
    s = result.footprint.settings
    out = [f"verify {model} at n_ctx {thousands(result.footprint.shape.n_ctx)} "
           f"(K {s.type_k}, V {s.type_v}, flash attention {'on' if s.flash_attn else 'off'}, "
           f"{s.n_seq} seq{', unified' if s.kv_unified else ''}{', swa_full' if s.swa_full else ''})",
           f"theory: computed from metadata; llama.cpp: its own log lines from a no_alloc dry run of {path}",
           render_table(["component", "theory", "llama.cpp", "diff MiB", ""], check_rows(checks), align="lrrrl")]
    compute = allocations.compute_buffers_mib
    if compute:
        what = ("of the geometry twin: its hidden size and vocabulary are tiny, so this is not the real model's"
                if source.is_catalog else "of this GGUF")
        out.append(f"compute buffer (llama.cpp only, {what}): "
                   + ", ".join(f"{dev} {v:.2f} MiB" for dev, v in compute.items()))
    ok = all(c.ok for c in checks)
    out.append("all match" if ok else "MISMATCH between theory and llama.cpp")
    return "\n".join(out)
