"""Values of the schema's options: scalars, comma lists and llama-bench's ranges, counted before they expand,
and the one place a sweep expands into `Params`. Pure: no file, no llama.cpp."""

from __future__ import annotations

import itertools
import re
from typing import Any, Iterable, Mapping

from ..core.errors import UsageError
from .budget import reserve
from .params import CONTEXT_PARAMS, SCHEMA, Param, Params, tensor_overrides
from .values import INT_PARSERS, endpoints, flash_attn, on_off, tensor_split

_RANGE = re.compile(r"^\s*(\w+)\s*-\s*(\w+)\s*([+*])\s*(\w+)\s*$")


ON_OFF = (on_off, flash_attn)  # the parsers a bool is a value of (the API's True / False)
MAX_LIST_ITEMS = 4096  # values of one list option (a comma list or a range), counted before it expands
MAX_CONFIGURATIONS = 4096  # contexts of one sweep (the product of its lists), counted before it expands
MAX_TESTS = 4096  # tests of one context (-p x -n x -d)
MAX_FIT_CELLS = 1024  # budgets x contexts x KV types x placements of one fit


def _range_count(first: int, last: int, op: str, step: int) -> int:
    """How many values first-last+step (or *factor) holds, without listing them."""
    if op == "+":
        return (last - first) // step + 1
    count, value = 0, first
    while value <= last and count <= MAX_LIST_ITEMS:
        count += 1
        value = max(value * step, value + 1)
    return count


def _items(spec: Param, raw) -> list:
    """The items of a list value: a comma string, a sequence, or one scalar; ranges expanded (at most
    MAX_LIST_ITEMS values, counted before anything is built)."""
    if isinstance(raw, (list, tuple)):
        pieces = list(raw)
    elif isinstance(raw, str):
        if raw.count(",") >= MAX_LIST_ITEMS:
            raise UsageError(f"{spec.name}: {raw.count(',') + 1:,} values: more than {MAX_LIST_ITEMS:,} in one list")
        pieces = [part.strip() for part in raw.split(",") if part.strip()]
        if not pieces:
            raise UsageError(f"{spec.name}: empty list")
    else:
        pieces = [raw]
    out = []
    for piece in pieces:
        m = _RANGE.match(piece) if isinstance(piece, str) and spec.sweep else None
        if m and spec.parse in INT_PARSERS:
            first, last, step = spec.parse(m[1]), spec.parse(m[2]), spec.parse(m[4])
            if m[3] == "+" and step < 1 or m[3] == "*" and step < 2 or last < first:
                raise UsageError(f"{spec.name}: '{piece}' is not a range (write first-last+step or first-last*factor)")
            count = _range_count(first, last, m[3], step)
            if len(out) + count > MAX_LIST_ITEMS:
                raise UsageError(f"{spec.name}: '{piece}' holds {count:,} values: more than {MAX_LIST_ITEMS:,} in one "
                                 "list (take a larger step)")
            value = first
            while value <= last:
                out.append(value)
                value = value + step if m[3] == "+" else max(value * step, value + 1)
        else:
            out.append(spec.parse(piece))
        if len(out) > MAX_LIST_ITEMS:
            raise UsageError(f"{spec.name}: more than {MAX_LIST_ITEMS:,} values in one list")
    return out


def check_plan_size(what: str, factors: Mapping[str, int], limit: int) -> int:
    """The product of a plan's list lengths; one line giving the count when it is past `limit`."""
    total = 1
    for n in factors.values():
        total *= max(1, n)
    if total > limit:
        product = " x ".join(f"{n:,} {name}" for name, n in factors.items() if n > 1)
        raise UsageError(f"{what}: {total:,} ({product}): more than {limit:,}; split it into smaller runs")
    return total


def parse_value(name: str, raw, *, listed: bool):
    """One option's value from the CLI or the API: a scalar, or with `listed` a tuple (comma lists, ranges)."""
    spec = SCHEMA[name]
    try:
        values = raw if isinstance(raw, (list, tuple)) else (raw,)
        if spec.parse not in ON_OFF and any(isinstance(v, bool) for v in values):  # float(True) would be 1.0
            raise UsageError("True and False are for on/off options: give a value")
        if listed:  # a value given twice (-ngl all,auto: 999 twice) is one configuration, not two alike
            items = tuple(_items(spec, raw))
            try:
                return tuple(dict.fromkeys(items))
            except TypeError:  # unhashable items (lists): as given
                return items
        if isinstance(raw, (list, tuple)) and spec.parse not in (tensor_split, endpoints, reserve, tensor_overrides):
            if len(raw) != 1:
                raise UsageError(f"takes one value here, got {len(raw)}")
            raw = raw[0]
        return spec.parse(raw)
    except UsageError as exc:
        raise UsageError(f"{name}: {exc}", hint=exc.hint) from None


def expand(values: Mapping[str, Iterable], base: Params | None = None) -> list[Params]:
    """Every combination of the context parameters' lists, in schema order (llama-bench's
    get_cmd_params_instances): the one place a sweep expands."""
    base = base or Params()
    names = [n for n in CONTEXT_PARAMS if n in values]
    def alternatives(name: str) -> tuple:
        value = values[name]
        if SCHEMA[name].parse in (tensor_split, tensor_overrides) and (not value or not isinstance(value[0], (list,
                                                                                                           tuple))):
            return (tuple(value),)  # one -ts (-ot) is one value (a tuple of proportions, overrides), not a list
        return tuple(value) if isinstance(value, (list, tuple)) else (value,)

    lists = [alternatives(n) for n in names]
    check_plan_size("the sweep's configurations", {n: len(v) for n, v in zip(names, lists)}, MAX_CONFIGURATIONS)
    return [base.replace(**dict(zip(names, combo))) for combo in itertools.product(*lists)]


def params_from(values: Mapping[str, Any], base: Params | None = None) -> Params:
    """One Params from scalar values (context fields only; other keys are passed over)."""
    base = base or Params()
    return base.replace(**{n: values[n] for n in CONTEXT_PARAMS if n in values and values[n] is not None})


def cache_pairs(type_k: tuple[str, ...], type_v: tuple[str, ...]) -> list[tuple[str, str]]:
    """-ctk / -ctv lists paired as llama-bench pairs them for fit: same length, or one of them single."""
    if len(type_k) == len(type_v):
        return list(zip(type_k, type_v))
    if len(type_k) == 1:
        return [(type_k[0], v) for v in type_v]
    if len(type_v) == 1:
        return [(k, type_v[0]) for k in type_k]
    raise UsageError("-ctk and -ctv lists must have the same length (they are paired), or one of them a single type")
