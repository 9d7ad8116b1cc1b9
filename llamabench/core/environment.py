"""Numbers from environment variables, read strictly: ASCII digits only, and one UsageError naming the variable.

Python's int() and float() take any Unicode decimal digit ('٣', '３') and underscores ('1_000'); str.isdigit() is true
for '²', which int() then refuses with a bare ValueError. None of that is how a number is written in a shell, nor how
llama.cpp reads its own variables (C's atoi: ASCII digits). Pure: the caller hands over the variable's text
(world.paths reads llamabench's own; memory.backends is handed the environment).
"""

from __future__ import annotations

import math
import re

from .errors import UsageError

_WHOLE = re.compile(r"[+-]?[0-9]{1,30}", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)
BLANK = " \t\n\r\f\v"  # C's isspace: what atoi skips, and what a shell line may leave around a value


def _named(name: str, raw: str) -> str:
    return f"{name}={raw[:40]!r}"


def whole_number(name: str, raw: str, *, low: int, high: int, what: str = "a whole number") -> int:
    """An integer from `low` to `high` in ASCII digits (a sign allowed, blanks around it); UsageError naming the
    variable for anything else."""
    text = raw.strip(BLANK)
    if not _WHOLE.fullmatch(text):
        raise UsageError(f"{_named(name, raw)} is not {what} (ASCII digits 0-9)")
    value = int(text)
    if not low <= value <= high:
        raise UsageError(f"{_named(name, raw)}: give {what} from {low:,} to {high:,}")
    return value


def seconds(name: str, raw: str, *, most: float, zero: bool = False) -> float:
    """Seconds above 0 (from 0 with `zero`) and at most `most`, written 300, 2.5 or 1e2 in ASCII digits."""
    text = raw.strip(BLANK)
    if not _DECIMAL.fullmatch(text):
        raise UsageError(f"{_named(name, raw)} is not a number of seconds (ASCII digits 0-9, e.g. 120 or 2.5)")
    value = float(text)
    if not math.isfinite(value) or value > most or value < 0 or (value == 0 and not zero):
        raise UsageError(f"{_named(name, raw)}: give seconds {'from' if zero else 'above'} 0, at most {most:g}")
    return value
