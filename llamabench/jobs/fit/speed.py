"""The decode t/s a fit row would run at, at its own n_ctx: roofline's speed model (`jobs.roofline`) on the named
card(s) of its budget, with the row's placement (-ngl, --n-cpu-moe, a split) priced as roofline prices it. A budget
given as a bare size names no card: its rows carry no t/s, and the recommendation ranks them by the bytes a token
reads from system RAM (the term that dominates the model's time when some weights are there)."""

from __future__ import annotations

from dataclasses import replace

from ...core.errors import LlamabenchError
from ...memory import speed
from ...memory.layer_split import layer_devices
from ...memory.placement import FitRow
from ...settings.cards import find_card
from ...settings.tensor_overrides import Placer
from ..roofline.machines import card_model, host_model
from ..roofline.placement import placement_speed
from ..roofline.split import split_speed


def with_speeds(rows: list[FitRow], meta, geometry, weights_of: dict, backend: str | None,
                placer: Placer = Placer()) -> list[FitRow]:
    works: dict[str, speed.ModelWork] = {}
    out = []
    for row in rows:
        cards = [find_card(d.label) for d in row.budget.devices]
        if row.ram_mode or not cards or any(c is None for c in cards):
            out.append(row)
            continue
        spec = row.settings.spec_type
        weights = weights_of.get(spec) or next(iter(weights_of.values()))
        if spec not in works:
            works[spec] = speed.model_work(meta, geometry, weights, mtp=spec == "draft-mtp")
        try:
            ts = _decode_ts(row, cards, geometry, weights, works[spec], backend, placer)
        except LlamabenchError:  # a backend the card does not run: no t/s, said by the missing column value
            ts = None
        out.append(replace(row, decode_ts=ts))
    return out


def _ram_of_layer(row: FitRow, weights, work: speed.ModelWork, ngl: int,
                  placer: Placer) -> "dict[int | None, int] | None":
    """Where tensor overrides (-ot, --cpu-moe: the session's placer, its matches worked out ahead) keep some of a card
    layer's tensors in RAM: what each layer reads from there per token; None without overrides."""
    if not placer:
        return None
    on_card = layer_devices(weights.n_layer, ngl, (1.0,))
    places = weights.tensor_devices(lambda il: on_card[il] if il < len(on_card) else None,
                                    n_cpu_moe=row.placement.n_cpu_moe, place=placer.place)
    return weights.placed_host_read(places, expert_share=work.expert_share)


def _decode_ts(row: FitRow, cards: list, geometry, weights, work: speed.ModelWork, backend: str | None,
               placer: Placer) -> float:
    chosen = backend if backend in cards[0].runs else None
    models = tuple(card_model(c, chosen) for c in cards)
    settings = row.settings
    if len(cards) > 1:
        split = tuple(float(n) for n in row.placement.split) if len(row.placement.split) > 1 else None
        placed = split_speed(geometry, settings, weights, work, cards, models, split, None, None)
        return placed.tokens_per_second(settings.n_ctx)
    ngl = row.placement.n_gpu_layers(weights.n_layer)
    placed = placement_speed(geometry, settings, weights, work, models[0], host_model(cards[0], None), ngl,
                             row.placement.n_cpu_moe, _ram_of_layer(row, weights, work, ngl, placer))
    return placed.tokens_per_second(settings.n_ctx)
