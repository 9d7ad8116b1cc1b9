"""The keyword arguments of one job's call, checked against the one parameter schema and parsed.

Every job takes llama.cpp's parameter names as keywords (`n_ctx=32768`, `type_k="q8_0"`); this is where an
unknown name is refused and a value parsed (`32k`, `["4096", "8k"]`), with the schema's defaults filled in.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import UsageError
from ..settings.params import SCHEMA
from ..settings.sweep import parse_value


def call_values(given: dict[str, Any], allowed: tuple[str, ...], lists: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keyword arguments of one API call, checked against the schema and parsed; defaults filled in."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise UsageError(f"unknown parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
                         hint="takes: " + ", ".join(allowed))
    out = {}
    for name in allowed:
        listed = name in lists
        if name in given and given[name] is not None and (listed or given[name] != ()):
            out[name] = parse_value(name, given[name], listed=listed)
        else:
            default = SCHEMA[name].default
            listed_default = default if isinstance(default, tuple) or default is None else (default,)
            out[name] = listed_default if listed else default
    return out
