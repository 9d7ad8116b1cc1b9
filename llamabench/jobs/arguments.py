"""The keyword arguments of one job's call, checked against the one parameter schema and parsed.

Every job takes llama.cpp's parameter names as keywords (`n_ctx=32768`, `type_k="q8_0"`); this is where an
unknown name is refused and a value parsed (`32k`, `["4096", "8k"]`), with the schema's defaults filled in.
"""

from __future__ import annotations

import os
from typing import Any

from ..core.errors import UsageError
from ..settings.params import SCHEMA
from ..settings.sweep import parse_value
from ..settings.values import on_off


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


def model_argument(model) -> str:
    """MODEL as the API takes it: a str or an os.PathLike (a pathlib.Path); TypeError for anything else, UsageError
    for a NUL byte (no file has one in its name)."""
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if isinstance(model, bytes) or not isinstance(model, str):
        raise TypeError(f"model must be a str or a path, not {type(model).__name__}")
    if "\x00" in model:
        raise UsageError(f"model {model!r}: a NUL byte is in no file's name")
    return model


def path_option(name: str, value) -> str | None:
    """A keyword that names a file (mmproj, results, text_file...): None, a str or an os.PathLike, as a str;
    UsageError for anything else, or a NUL byte."""
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise UsageError(f"{name}: a path (a str or a pathlib.Path), not {type(value).__name__}")
    if "\x00" in value:
        raise UsageError(f"{name} {value!r}: a NUL byte is in no file's name")
    return value


def flag(name: str, value) -> bool:
    """An on/off keyword of the API: a bool, or on/off/true/false/1/0 as the CLI takes them; never truthiness
    ("off" is off)."""
    if isinstance(value, (bool, str, int)):
        try:
            return on_off(value)
        except UsageError:
            pass
    raise UsageError(f"{name}: {value!r} is not on or off (give True or False)")
