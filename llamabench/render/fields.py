"""One field list per record kind drives every table printer, as llama-bench's `test::get_fields()` does.

A `Field` names a column once: its machine name (CSV header), its table header, how to get the raw
value from a row, how to show it to people, its alignment, and the table views it appears in. Text
and markdown show the fields of a view; CSV shows every field with its raw value. JSON and JSON
Lines print the records themselves (`to_dict()`, the form the results files hold).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .table import render_markdown, render_table


def _text(value) -> str:
    return "-" if value is None else str(value)


@dataclass(frozen=True)
class Field:
    name: str
    header: str
    get: Callable[[Any], Any]
    show: Callable[[Any], str] = _text
    align: str = "l"
    views: frozenset[str] = frozenset({"table"})  # empty: CSV only
    csv: bool = True  # False for a column that is text made for people (its raw value is another field)

    def cell(self, row) -> str:
        value = self.get(row)
        return "-" if value is None else self.show(value)


def mib(value) -> str:
    return f"{value / 2**20:.2f}"


def fixed2(value) -> str:
    return f"{value:.2f}"


def view(fields: Sequence[Field], name: str) -> list[Field]:
    return [f for f in fields if name in f.views]


def _csv_value(value):
    """A raw value in CSV: empty for none, 0|1 for a flag (as llama-bench writes them, not True/False)."""
    if value is None:
        return ""
    return int(value) if isinstance(value, bool) else value


def table(rows: Iterable, fields: Sequence[Field], fmt: str, *, view_name: str = "table",
          lead: Sequence[Field] = ()) -> str:
    """The rows as a text or markdown table (the fields of one view), or CSV (every field, raw values)."""
    rows = list(rows)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        chosen = [f for f in (*lead, *fields) if f.csv]
        writer.writerow([f.name for f in chosen])
        for row in rows:
            writer.writerow([_csv_value(f.get(row)) for f in chosen])
        return out.getvalue().rstrip("\n")
    shown = [*lead, *view(fields, view_name)]
    headers = [f.header for f in shown]
    cells = [[f.cell(r) for f in shown] for r in rows]
    align = "".join(f.align for f in shown)
    return render_markdown(headers, cells, align=align) if fmt == "md" else render_table(headers, cells, align=align)
