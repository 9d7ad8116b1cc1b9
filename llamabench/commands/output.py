"""The edge of every command: records out (a table, markdown, CSV, JSON or JSON Lines), warnings to stderr."""

from __future__ import annotations

import json
import sys
from typing import Callable

from ..core.safe_text import escaped
from ..core.serial import finite
from ..settings.params import OutputFormat


def warn(message: str) -> None:
    print(escaped(f"llamabench: warning: {message}"), file=sys.stderr)  # one line, control characters escaped


def show(result, fmt: OutputFormat, render: Callable[..., str]) -> None:
    """JSON and JSON Lines print the result's own `to_dict()`; the other formats go through its printer."""
    if fmt is OutputFormat.JSON:
        print(json.dumps(finite(result.to_dict()), indent=2, default=str, allow_nan=False))
    elif fmt is OutputFormat.JSONL:
        print(json.dumps(finite(result.to_dict()), separators=(",", ":"), default=str, allow_nan=False))
    else:
        print(render(result, str(fmt)))


def keywords(args, names) -> dict:
    """The API keyword arguments of these schema names, from parsed argv."""
    return {name: getattr(args, name) for name in names}
