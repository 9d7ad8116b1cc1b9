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


def compress_indices(indices: list[int]) -> str:
    """[3, 7, 11, ..., 39] -> '3, 7, ..., 39'; [0,1,2,4,5,6] -> '0-2, 4-6'."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    if len(runs) >= 4:
        lengths = {b - a for a, b in runs}
        strides = {runs[k + 1][0] - runs[k][0] for k in range(len(runs) - 1)}
        if len(lengths) == 1 and len(strides) == 1:
            return f"{text[0]}, {text[1]}, ..., {text[-1]}"
    return ", ".join(text)
