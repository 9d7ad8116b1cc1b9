"""The edge of every command: records out (a table, markdown, CSV, JSON or JSON Lines), warnings to stderr."""

from __future__ import annotations

import inspect
import json
import sys
from typing import Callable

from ..core.safe_text import escaped
from ..core.serial import finite
from ..jobs.arguments import CALLBACKS  # what a command passes itself: its own progress lines
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


def api_options(function, *, leave_out: tuple[str, ...] = ()) -> tuple[str, ...]:
    """A job's options as its API function declares them, in order: its keyword-only arguments (the schema gives
    each its spellings, help and default), but the callbacks a command sets itself and private ones."""
    parameters = inspect.signature(function).parameters.values()
    return tuple(p.name for p in parameters if p.kind is p.KEYWORD_ONLY and not p.name.startswith("_")
                 and p.name not in CALLBACKS and p.name not in leave_out)


def keywords(args, names) -> dict:
    """The API keyword arguments of these schema names, from parsed argv."""
    return {name: getattr(args, name) for name in names}
