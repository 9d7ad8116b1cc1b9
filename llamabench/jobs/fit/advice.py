"""A fit row's placement in words, for tables, plots and `--verify`'s lines (the command lines: runtimes/)."""

from __future__ import annotations

from ...memory.placement import Placement, PlacementKind


def describe_placement(p: Placement, n_layer_all: int) -> str:
    where = describe_one(p, n_layer_all)
    if len(p.split) > 1 and any(p.split):
        where = where.replace("on the card", "on the cards") + f", -ts {','.join(map(str, p.split))}"
    return where


def describe_row(row, n_layer_all: int) -> str:
    """A row's placement in words, with the tensor overrides it was sized with (-ot, --cpu-moe)."""
    where = describe_placement(row.placement, n_layer_all)
    s = row.settings
    extra = ["--cpu-moe"] if s.cpu_moe else []
    if s.tensor_overrides:
        extra.append(f"-ot ({len(s.tensor_overrides)} pattern{'s' if len(s.tensor_overrides) > 1 else ''})")
    return where + (", " + ", ".join(extra) if extra else "")


def describe_one(p: Placement, n_layer_all: int) -> str:
    if p.kind is PlacementKind.ALL:
        return "all layers on the card"
    if p.kind is PlacementKind.RAM:
        return "everything in system RAM"
    if p.kind is PlacementKind.N_CPU_MOE:
        if p.value == 0:  # asked for (-ncmoe 0 in a sweep): every expert on the card
            return "all layers on the card (--n-cpu-moe 0)"
        layers = "layer 0" if p.value == 1 else f"layers 0-{p.value - 1}"
        return f"experts of {layers} in RAM (--n-cpu-moe {p.value})"
    if p.value > n_layer_all:
        return f"all {n_layer_all + 1} layers on the card (-ngl {p.value})"
    return f"{p.value} of {n_layer_all + 1} layers on the card (-ngl {p.value})"


def short_placement(p: Placement) -> str:
    """For plot labels: the flag alone."""
    flag = {PlacementKind.ALL: "all on cards" if len(p.split) > 1 else "all on card", PlacementKind.RAM: "all in RAM",
            PlacementKind.N_CPU_MOE: f"--n-cpu-moe {p.value}", PlacementKind.NGL: f"-ngl {p.value}"}[p.kind]
    return flag + (f" -ts {','.join(map(str, p.split))}" if len(p.split) > 1 and any(p.split) else "")
