"""Frozen dataclasses to plain dicts and back, through cattrs: the one (de)serializer of every record.

`to_dict(x)` gives JSON-ready data (enums as their values, tuples as lists once dumped);
`from_dict(Cls, data)` rebuilds `x` so that `from_dict(type(x), to_dict(x)) == x`. A value of the
wrong shape raises `ShapeError` naming the field, never a bare KeyError deep inside.

Structuring is strict, because records travel between machines and every value read back is untrusted:
an `int` field takes an int (not a bool, a float or a string) below 2**63 in size, a `float` field a
finite int or float, a `str` field a string, a `bool` field a bool, a tuple / list field a JSON array
and a dict field a JSON object; `X | None` takes null too. cattrs' defaults would turn 3.7 into 3 and
[1, 2] into the string "[1, 2]" silently. `allow_infinity(Cls, "field")` lets one float field hold
+Infinity (a speed model's compute where attention is not limiting).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from enum import Enum, IntEnum, StrEnum
from pathlib import Path
from typing import Any, TypeVar

import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, override
from cattrs.v import format_exception

from .errors import LlamabenchError

T = TypeVar("T")

INT_BOUND = 2**63  # |x| below it: what a C int64 (and llama.cpp) holds


class ShapeError(LlamabenchError, ValueError):
    """Data that does not have the shape of the dataclass it should become."""


class Refused(ValueError):
    """One value of the wrong kind or out of range; its message says what was expected and what came."""


def describe(value) -> str:
    """A short, printable word for a JSON value (never the value itself: it can be 400 digits long)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer" if abs(value) < INT_BOUND else f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _int(value, _=None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Refused(f"expected an integer, got {describe(value)}")
    if abs(value) >= INT_BOUND:
        raise Refused(f"expected an integer below 2**63, got {describe(value)}")
    return value


def _float(value, _=None) -> float:
    if isinstance(value, int) and not isinstance(value, bool):
        value = _int(value)
    elif not isinstance(value, float) or not math.isfinite(value):
        raise Refused(f"expected a finite number, got {describe(value)}")
    return float(value)


def _float_or_infinity(value, _=None) -> float:
    """+Infinity, stored as null (JSON has no Infinity: `finite` writes it so), or a finite number."""
    if value is None or (isinstance(value, float) and value == math.inf):
        return math.inf
    return _float(value)


def finite(value):
    """JSON has no Infinity or NaN (json.dumps would write them, and strict readers such as jq refuse the line):
    null in their place, throughout dicts, lists and tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _str(value, _=None) -> str:
    if not isinstance(value, str):
        raise Refused(f"expected a string, got {describe(value)}")
    return value


def _bool(value, _=None) -> bool:
    if not isinstance(value, bool):
        raise Refused(f"expected true or false, got {describe(value)}")
    return value


def _path(value, _=None) -> Path:
    return Path(_str(value))


def _is_sequence(t) -> bool:
    return typing.get_origin(t) in (tuple, list)


def _is_dict(t) -> bool:
    return typing.get_origin(t) is dict


def _elements(values, types, t, indices=None) -> list:
    """Each value structured as its type; the failures gathered as cattrs gathers them (with their index)."""
    out, errors = [], []
    for index, value, elem in zip(indices or range(len(values)), values, types):
        try:
            out.append(_converter.structure(value, elem))
        except Exception as exc:  # noqa: BLE001 - every failure is reported with its index, as cattrs does
            exc.__notes__ = [*getattr(exc, "__notes__", []), IterableValidationNote(f"@ {index!r}", index, elem)]
            errors.append(exc)
    if errors:
        raise IterableValidationError(f"while structuring {t!r}", errors, t)
    return out


def _sequence_hook(t) -> Callable:
    origin, args = typing.get_origin(t), typing.get_args(t)
    homogeneous = origin is list or (len(args) == 2 and args[1] is Ellipsis)

    def structure(value, _):
        if not isinstance(value, (list, tuple)):
            raise Refused(f"expected an array, got {describe(value)}")
        if not homogeneous and len(value) != len(args):
            raise Refused(f"expected an array of {len(args)}, got {len(value)} values")
        types = [args[0] if args else Any] * len(value) if homogeneous else list(args)
        return origin(_elements(value, types, t))

    return structure


def _dict_hook(t) -> Callable:
    key_type, value_type = typing.get_args(t) or (Any, Any)

    def structure(value, _):
        if not isinstance(value, Mapping):
            raise Refused(f"expected an object, got {describe(value)}")
        keys = _elements(list(value), [key_type] * len(value), t)
        return dict(zip(keys, _elements(list(value.values()), [value_type] * len(value), t, keys)))

    return structure


def _enum(value, t):
    try:
        return t(value)
    except (ValueError, TypeError):
        raise Refused(f"expected one of {', '.join(str(m.value) for m in t)}, got {describe(value)}") from None


def _dataclass_hook(t, **overrides) -> Callable:
    """cattrs' own structuring of a dataclass, given an object only (a string would fail as 'expected int')."""
    structure_fields = make_dict_structure_fn(t, _converter, **overrides)

    def structure(value, _):
        if not isinstance(value, Mapping):
            raise Refused(f"expected an object, got {describe(value)}")
        return structure_fields(value, t)

    return structure


_converter = cattrs.Converter()
_converter.register_unstructure_hook(Path, str)
for _type, _hook in ((int, _int), (float, _float), (str, _str), (bool, _bool), (Path, _path), (Enum, _enum),
                     (StrEnum, _enum), (IntEnum, _enum)):
    _converter.register_structure_hook(_type, _hook)
_converter.register_structure_hook_factory(_is_sequence, _sequence_hook)
_converter.register_structure_hook_factory(_is_dict, _dict_hook)
_converter.register_structure_hook_factory(dataclasses.is_dataclass, lambda t: _dataclass_hook(t))


def allow_infinity(cls: type, *names: str) -> None:
    """Let these float fields of `cls` hold +Infinity (and only that beyond the finite numbers)."""
    hooks = {name: override(struct_hook=_float_or_infinity) for name in names}
    _converter.register_structure_hook(cls, _dataclass_hook(cls, **hooks))


def to_dict(obj) -> dict:
    return _converter.unstructure(obj)


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    if not isinstance(data, Mapping):
        raise ShapeError(f"{cls.__name__}: expected an object, got {describe(data)}")
    try:
        return _converter.structure(dict(data), cls)
    except cattrs.BaseValidationError as exc:
        raise ShapeError(f"{cls.__name__}: " + "; ".join(m[:200] for m in _messages(exc))) from None
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError, LlamabenchError) as exc:
        raise ShapeError(f"{cls.__name__}: {type(exc).__name__}: {str(exc)[:200]}") from None


def _format(exc: BaseException, t) -> str:
    """Our own refusals and a dataclass's own checks (in its __post_init__) in their words."""
    if isinstance(exc, (Refused, LlamabenchError)) or (type(exc) is ValueError and str(exc)):
        return str(exc)[:200]
    return format_exception(exc, t)


def _messages(exc: BaseException) -> list[str]:
    try:
        return cattrs.transform_error(exc, format_exception=_format)[:3]
    except Exception:  # pragma: no cover - transform_error understands every cattrs error
        return [str(exc)[:200]]
