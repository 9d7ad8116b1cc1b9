"""`fit --verify`: create the recommended context for real, in a child, and set it against the prediction."""

from __future__ import annotations

from ..llama.alloc_log import Allocations
from ..llama.worker import run_child
from ..units import MIB
from .result import FitResult
from .search import PlacementKind, recommend


def verify_fit(result: FitResult, *, path: str, gpu_build: bool) -> dict:
    label, budget = result.budgets[0]
    n_ctx = result.contexts[0]
    candidates = [r for r in result.rows_for(label, n_ctx) if r.placement.kind is not PlacementKind.N_CPU_MOE]
    best = recommend(candidates)
    if best is None:
        return {"ok": False, "error": f"nothing fits {label} at n_ctx {n_ctx}, so there is nothing to create"}
    n_gpu_layers = best.placement.n_gpu_layers(result.n_layer_all) if gpu_build else 0
    from dataclasses import asdict

    job = {"job": "create", "path": path, "settings": asdict(best.settings), "n_gpu_layers": n_gpu_layers,
           "extra_bufts": False}
    events: list[dict] = []
    outcome = run_child(job, events.append)
    alloc_event = next((e for e in events if e.get("event") == "alloc"), None)
    if alloc_event is None:
        return {"ok": False, "error": f"llama.cpp could not create the context: {outcome.failure}"}
    alloc = Allocations.from_dict(alloc_event["allocations"])
    p = best.parts
    parts = [("weights", p.weights, alloc.weights_bytes), ("KV", p.kv, alloc.kv_bytes),
             ("recurrent", p.recurrent, alloc.recurrent_bytes), ("compute + output", p.compute, alloc.compute_and_output_bytes),
             ("reserve", p.reserve, None)]
    predicted = p.weights + p.kv + p.recurrent + p.compute
    measured_total = alloc.weights_bytes + alloc.kv_bytes + alloc.recurrent_bytes + alloc.compute_and_output_bytes
    tolerance = 2 * MIB + predicted // 200  # printed MiB rounding and file-mapping padding
    gb, ga = alloc_event.get("gpu_used_before_bytes"), alloc_event.get("gpu_used_after_bytes")
    from ..render.fit import describe_placement

    return {
        "what": f"n_ctx {best.settings.n_ctx}, {best.settings.type_k}/{best.settings.type_v} KV, "
                f"{describe_placement(best.placement, result.n_layer_all)}",
        "where": "GPU, NVML" if gpu_build else "system RAM, CPU build",
        "parts": parts, "predicted_total": predicted, "measured_total": measured_total,
        "rss_delta": alloc_event["rss_after_bytes"] - alloc_event["rss_before_bytes"],
        "gpu_delta": None if gb is None or ga is None else ga - gb,
        "budget": budget - best.parts.reserve, "ok": abs(measured_total - predicted) <= tolerance,
        "n_ctx": best.settings.n_ctx,
    }
