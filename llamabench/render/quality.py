"""A quality run in words: each lossy choice against its base, as llama-perplexity --kl-divergence prints it."""

from __future__ import annotations

from ..core.safe_text import escaped
from ..records.quality import KvQuality, QualityRecord, QualityRow
from .fields import Field, table


def _pm(value, unc, digits: int) -> str:
    return f"{value:.{digits}f} ± {unc:.{digits}f}" if unc is not None else f"{value:.{digits}f}"


FIELDS = (
    Field("n_ctx", "n_ctx", lambda r: r.n_ctx, lambda v: f"{v:,}", "r"),
    Field("choice", "choice", lambda r: r.label, csv=False),
    Field("type_k", "K", lambda r: r.type_k, views=frozenset()),
    Field("type_v", "V", lambda r: r.type_v, views=frozenset()),
    Field("base", "base", lambda r: r.base),
    Field("chunks", "chunks", lambda r: f"{r.chunks}/{r.chunks_planned}" if r.chunks_planned else str(r.chunks),
          align="r", csv=False),
    Field("kld_mean", "mean KLD", lambda r: r if r.kld_mean is not None else None,
          lambda r: _pm(r.kld_mean, r.kld_mean_unc, 6), "r", csv=False),
    Field("kld_mean_raw", "kld_mean", lambda r: r.kld_mean, views=frozenset()),
    Field("kld_mean_unc", "kld_mean_unc", lambda r: r.kld_mean_unc, views=frozenset()),
    Field("kld_p99", "KLD p99", lambda r: r.kld_p99, lambda v: f"{v:.6f}", "r"),
    Field("kld_max", "KLD max", lambda r: r.kld_max, lambda v: f"{v:.6f}", "r"),
    Field("ppl", "PPL", lambda r: r if r.ppl is not None else None, lambda r: _pm(r.ppl, r.ppl_unc, 4), "r",
          csv=False),
    Field("ppl_raw", "ppl", lambda r: r.ppl, views=frozenset()),
    Field("ppl_base", "PPL base", lambda r: r.ppl_base, lambda v: f"{v:.4f}", "r"),
    Field("ppl_ratio", "PPL ratio", lambda r: r.ppl_ratio, lambda v: f"{v:.4f}", "r"),
    Field("same_top_p", "same top", lambda r: r if r.same_top_p is not None else None,
          lambda r: _pm(r.same_top_p, r.same_top_unc, 2) + " %", "r", csv=False),
    Field("same_top_p_raw", "same_top_p", lambda r: r.same_top_p, views=frozenset()),
    Field("n_tokens_scored", "tokens", lambda r: r.n_tokens_scored, lambda v: f"{v:,}", "r"),
    Field("reason", "note", lambda r: r.reason),
)


def render_quality_rows(rows, fmt: str = "text") -> str:
    return table(rows, FIELDS, fmt)


def render_quality(record: QualityRecord, fmt: str = "text") -> str:
    rows = render_quality_rows(record.rows, fmt)
    if fmt == "csv":
        return rows
    t = record.text
    base = (f"{record.base_model.label} ({record.base_model.path}), f16 KV" if record.base_model
            else "the same model with f16 KV")
    lines = [
        f"{record.model.name} ({record.model.architecture}): what each lossy choice costs, measured as "
        "llama-perplexity --kl-divergence measures it",
        f"  base      {base}",
        f"  text      {t.name}: {t.n_tokens:,} tokens, {t.n_chars:,} characters, sha256 {t.sha256[:16]}",
        "  scored    the second half of each chunk of n_ctx tokens (BOS first), as llama-perplexity; KLD in nats",
    ]
    if record.interrupted:
        lines.append("  stopped   interrupted: the rows hold the chunks finished before it")
    return "\n".join(lines + ["", rows])


def row_sentence(row: QualityRow) -> str:
    """One measured row in a phrase: `KLD 0.0074 (p99 0.031), PPL x0.999, same top 95.3 %`."""
    return (f"KLD {row.kld_mean:.4f} (p99 {row.kld_p99:.3f}), PPL x{row.ppl_ratio:.3f}, "
            f"same top {row.same_top_p:.1f} %")


def fit_quality_lines(notes: tuple[KvQuality, ...]) -> list[str]:
    """fit's lines on its lossy KV types: the measured quality, or that it was not measured and how to measure it."""
    out = []
    for q in notes:
        head = f"quality of {q.type_k}/{q.type_v} KV at n_ctx {q.n_ctx:,}: "
        if q.row is None:
            out.append(head + f"quality not measured: {q.command}")
            continue
        where = ("measured at this context" if q.at_this_context else
                 f"measured at -c {q.row.n_ctx:,} only, not at this context (the error of a quantized cache grows "
                 f"with the context: {q.command})")
        text = f" on {q.text.name} ({q.text.n_tokens:,} tokens)" if q.text else ""
        out.append(head + row_sentence(q.row) + f" against f16 KV, {where}, {q.row.chunks} chunks{text}")
    return [escaped(line) for line in out]
