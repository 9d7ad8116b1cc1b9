"""The keyword arguments of one job's call, checked against the one parameter schema and parsed.

Every job takes llama.cpp's parameter names as keywords (`n_ctx=32768`, `type_k="q8_0"`); this is where an
unknown name is refused and a value parsed (`32k`, `["4096", "8k"]`), with the schema's defaults filled in. The
keywords that are no llama.cpp parameter are checked here too, by kind, before the job starts (`checked`): a callback
is a callable, a file a str or a pathlib.Path, so that a wrong type is a UsageError in one line, never a TypeError
half way through a run.
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable

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


CALLBACKS = ("progress", "on_event", "on_quant")  # keywords that take a function (a command passes its own)
PATHS = ("results", "text_file", "base_model", "calibrate", "mmproj", "model_draft", "server_bin", "out_dir")


def callback(name: str, value) -> Callable | None:
    """A keyword that takes a function (on_event, progress): None or a callable; UsageError for anything else."""
    if value is None or callable(value):
        return value
    raise UsageError(f"{name}: a function (a callable), not {type(value).__name__}")


def checked(function: Callable) -> Callable:
    """An API function whose keywords of a known kind are checked before it runs, whichever way they came (its own
    or passed on through **kwargs): CALLBACKS are callables or None, PATHS as path_option takes them. Arguments that
    may also be given by position (report's list of results files) are the function's own to check."""
    positional = {p.name for p in inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)}

    @functools.wraps(function)
    def call(*args, **kwargs):
        for name, value in kwargs.items():
            if name in positional:
                continue
            if name in CALLBACKS:
                callback(name, value)
            elif name in PATHS:
                path_option(name, value)
        return function(*args, **kwargs)

    return call
