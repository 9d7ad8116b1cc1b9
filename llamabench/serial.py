"""Frozen dataclasses to plain dicts and back, through cattrs: the one (de)serializer of every record.

`to_dict(x)` gives JSON-ready data (enums as their values, tuples as lists once dumped);
`from_dict(Cls, data)` rebuilds `x` so that `from_dict(type(x), to_dict(x)) == x`. A value of the
wrong shape raises `ShapeError` naming the field, never a bare KeyError deep inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, TypeVar

import cattrs

T = TypeVar("T")

_converter = cattrs.Converter()
_converter.register_unstructure_hook(Path, str)
_converter.register_structure_hook(Path, lambda value, _: Path(value))


class ShapeError(ValueError):
    """Data that does not have the shape of the dataclass it should become."""


def to_dict(obj) -> dict:
    return _converter.unstructure(obj)


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    if not isinstance(data, Mapping):
        raise ShapeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    try:
        return _converter.structure(dict(data), cls)
    except cattrs.BaseValidationError as exc:
        raise ShapeError(f"{cls.__name__}: " + "; ".join(_messages(exc))) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ShapeError(f"{cls.__name__}: {type(exc).__name__}: {exc}") from None


def _messages(exc: BaseException) -> list[str]:
    try:
        return cattrs.transform_error(exc)[:3]
    except Exception:  # pragma: no cover - transform_error understands every cattrs error
        return [str(exc)]
