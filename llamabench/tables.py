"""Plain-text tables for terminals and markdown."""

from __future__ import annotations


def render_table(headers: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """Columns padded to their widest cell; `align` holds 'l' or 'r' per column."""
    align = align or "l" * len(headers)
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]

    def line(cells):
        parts = [str(c).ljust(w) if a == "l" else str(c).rjust(w) for c, w, a in zip(cells, widths, align)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_markdown(headers: list[str], rows: list[list[str]], align: str | None = None) -> str:
    align = align or "l" * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
