"""`fit --verify`: create placements for real, in a child, and set each device's allocation against the prediction.

On a GPU build the card is the GPU; without one it is an emulated card: llama.cpp's RPC backend
serving this machine's CPU as a device on 127.0.0.1 (llama/rpc.py), where llama.cpp places layers,
KV, recurrent state and compute buffers exactly as on a GPU. Weights, KV and recurrent state must
equal the prediction to llama.cpp's printed 0.01 MiB; the compute buffer is checked against
llama.cpp's own dry run of the same placement. With --ram there is no card: totals in system RAM.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict

from ..llama.alloc_log import MIB, Allocations
from ..llama.worker import run_child
from ..verification import TOLERANCE_MIB
from .result import FitResult
from .search import Fitter, FitRow, recommend

PARTS = ("weights", "kv", "recurrent", "compute")
EXACT_BYTES = round(TOLERANCE_MIB * MIB) + 1  # llama.cpp prints %.2f MiB: a byte count matches within half a hundredth


def _is_host(buffer_name: str) -> bool:
    """System RAM: CPU, CPU_Mapped, CPU_REPACK, AMX, and a GPU backend's pinned host buffers (CUDA_Host)."""
    return buffer_name.startswith("CPU") or buffer_name == "AMX" or buffer_name.endswith("_Host")


def _side(buffers: dict[str, float], host: bool) -> int:
    return round(sum(v for k, v in buffers.items() if _is_host(k) == host) * MIB)


def device_parts(alloc: Allocations, host: bool) -> dict[str, int]:
    """Bytes llama.cpp reported for the card (host=False) or for system RAM (host=True)."""
    compute = _side(alloc.compute_buffers_mib, host) + (_side(alloc.output_buffers_mib, True) if host else 0)
    return {"weights": _side(alloc.model_buffers_mib, host), "kv": _side(alloc.kv_buffers_mib, host),
            "recurrent": _side(alloc.rs_buffers_mib, host), "compute": compute}


def _card_name(alloc: Allocations) -> str:
    names = [k for d in (alloc.model_buffers_mib, alloc.compute_buffers_mib) for k in d if not _is_host(k)]
    return names[0] if names else "card"


def rows_to_verify(result: FitResult, given: bool) -> list[FitRow]:
    label, _ = result.budgets[0]
    rows = result.rows_for(label, result.contexts[0])
    if given:  # the placements asked for, with the first cache types asked for
        return [r for r in rows if r.settings == rows[0].settings]
    best = recommend(rows)
    return [best] if best else []


def verify_fit(result: FitResult, session, *, given: bool = False) -> dict:
    rows = rows_to_verify(result, given)
    if not rows:
        label, n_ctx = result.budgets[0][0], result.contexts[0]
        return {"ok": False, "error": f"nothing fits {label} at n_ctx {n_ctx}, so there is nothing to create",
                "devices": []}
    fitter = Fitter(session.geometry, session.weights, session.probe, reserve=session.reserve,
                    ram_mode=session.ram_mode)
    emulated = not session.gpu_build and not session.ram_mode
    from ..llama.rpc import emulated_card

    checks = []
    with (emulated_card() if emulated else nullcontext(None)) as endpoint:
        for row in rows:
            checks.append(_verify_row(row, fitter, session, result, endpoint))
    return {"ok": all(c["ok"] for c in checks), "where": checks[0]["where"], "placements": checks,
            "devices": checks[0]["devices"]}


def _verify_row(row: FitRow, fitter: Fitter, session, result: FitResult, endpoint: str | None) -> dict:
    from ..render.fit import describe_placement

    p = row.placement
    on_card = not session.ram_mode
    job = {"job": "create", "path": session.verify_path, "settings": asdict(row.settings), "extra_bufts": False,
           "dry_run_first": on_card, "n_threads": 2,
           "n_gpu_layers": p.n_gpu_layers(result.n_layer_all) if on_card else 0, "n_cpu_moe": p.n_cpu_moe,
           "rpc": endpoint}
    events: list[dict] = []
    outcome = run_child(job, events.append)
    by_kind = {e.get("event"): e for e in events}
    what = (f"n_ctx {row.settings.n_ctx}, {row.settings.type_k}/{row.settings.type_v} KV, "
            f"{describe_placement(p, result.n_layer_all)}")
    where = ("system RAM (--ram)" if session.ram_mode else "the GPU" if session.gpu_build
             else f"an emulated card (llama.cpp RPC device on {endpoint})")
    if "alloc" not in by_kind:
        return {"ok": False, "what": what, "where": where, "devices": [],
                "error": f"llama.cpp could not create the context: {outcome.failure}"}
    event = by_kind["alloc"]
    alloc = Allocations.from_dict(event["allocations"])
    common = {"what": what, "where": where, "n_ctx": row.settings.n_ctx,
              "rss_delta": event["rss_after_bytes"] - event["rss_before_bytes"],
              "gpu_delta": (None if event.get("gpu_used_before_bytes") is None
                            else event["gpu_used_after_bytes"] - event["gpu_used_before_bytes"])}
    if session.ram_mode:
        return common | _verify_ram(row, alloc)
    dry = Allocations.from_dict(by_kind["dry"]["allocations"])
    (card_kv, card_rec), (host_kv, host_rec) = fitter.cache_split(row.settings, p)
    predicted = {
        _card_name(alloc): {"weights": row.parts.weights, "kv": card_kv, "recurrent": card_rec,
                            "compute": device_parts(dry, host=False)["compute"]},
        "system RAM": {"weights": fitter.host_weights(p), "kv": host_kv, "recurrent": host_rec,
                       "compute": device_parts(dry, host=True)["compute"]},
    }
    allocated = {name: device_parts(alloc, host=name == "system RAM") for name in predicted}
    devices = []
    for name in predicted:
        parts_ok = {k: abs(allocated[name][k] - predicted[name][k]) <= EXACT_BYTES for k in PARTS}
        devices.append({"name": name, "predicted": predicted[name], "allocated": allocated[name],
                        "parts_ok": parts_ok, "ok": all(parts_ok.values())})
    card = devices[0]
    card_total = sum(card["allocated"].values())
    return common | {
        "devices": devices, "ok": all(d["ok"] for d in devices),
        # the projector (--mmproj) is not created here: its share of the budget stays set aside
        "fit_compute_estimate": row.parts.compute, "budget": row.budget_bytes - row.parts.reserve - row.parts.projector,
        "card_total": card_total,
        "within_budget": card_total <= row.budget_bytes - row.parts.reserve - row.parts.projector,
    }


def _verify_ram(row: FitRow, alloc: Allocations) -> dict:
    p = row.parts
    allocated = {"weights": alloc.weights_bytes, "kv": alloc.kv_bytes, "recurrent": alloc.recurrent_bytes,
                 "compute": alloc.compute_and_output_bytes}
    predicted = {"weights": p.weights, "kv": p.kv, "recurrent": p.recurrent, "compute": p.compute}
    total_p, total_a = sum(predicted.values()), sum(allocated.values())
    tolerance = 2 * MIB + total_p // 200  # printed MiB rounding and file-mapping padding
    ok = abs(total_a - total_p) <= tolerance
    return {"devices": [{"name": "system RAM", "predicted": predicted, "allocated": allocated, "ok": ok,
                         "parts_ok": dict.fromkeys(PARTS, ok)}],
            "ok": ok, "budget": row.budget_bytes, "card_total": total_a,
            "within_budget": total_a <= row.budget_bytes, "fit_compute_estimate": p.compute}
