"""`fit --verify`: create placements for real, in a child, and set each device's allocation against the prediction.

On a GPU build the card is the GPU; without one it is an emulated card: llama.cpp's RPC backend
serving this machine's CPU as a device on 127.0.0.1 (llama/rpc.py), where llama.cpp places layers,
KV, recurrent state and compute buffers exactly as on a GPU. Weights, KV and recurrent state must
equal the prediction to llama.cpp's printed 0.01 MiB; the compute buffers are the fit's own
figures, from llama.cpp's dry run of the same placement over the same kind of devices. With
--cpu-only there is no card: totals in system RAM.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace

from ...llama.devices import buffer_name, is_endpoint
from ...llama.ggml_devices import NO_DEVICE
from ...llama.messages import Alloc, CreateJob
from ...llama.rpc import emulated_card
from ...llama.worker import run_job
from ...memory.allocations import (
    HOST,
    PRINTED_TOLERANCE_BYTES,
    compute_tolerance,
    ram_tolerance,
)
from ...memory.backends import emulates
from ...memory.fit_result import FitResult
from ...memory.placement import FitRow, recommend
from ...memory.speculative import draft_context, uses_draft_model
from ...memory.unified import unified_memory
from ...records.fit import DeviceCheck, FitVerification, PlacementCheck
from .advice import describe_row
from .probe import positional_overrides
from .search import draft_placement


def rows_to_verify(result: FitResult, given: bool) -> list[FitRow]:
    """The recommended row of each --spec-type sized (or the placements asked for, first cache types)."""
    label, out = result.budgets[0].label, []
    for spec in result.spec_types:
        rows = result.rows_for(label, result.contexts[0], spec)
        if given and rows:
            out += [r for r in rows if r.settings == rows[0].settings]
        elif not given and (best := recommend(rows)):
            out.append(best)
    return out


def verify_fit(result: FitResult, session, *, given: bool = False) -> FitVerification:
    rows = rows_to_verify(result, given)
    if not rows:
        return FitVerification(error=f"nothing fits {result.budgets[0].label} at n_ctx {result.contexts[0]}, so "
                                     "there is nothing to create")
    n_local = max(max(len(r.devices), 1) - len(session.remote) for r in rows)
    with ExitStack() as stack:
        if session.ram_mode:  # the CPU alone, as the fit's dry runs (llama-server -dev none; Llama() has no choice)
            local = [NO_DEVICE] if session.gpu_build and session.runtime.is_server else []
        elif session.emulate or not session.gpu_build:  # (no RPC backend: emulated_card says so)
            local = [stack.enter_context(emulated_card()) for _ in range(n_local)]
        else:  # a GPU build's own devices, named as the fit's dry runs named them, after the remote hosts
            local = list(session.gpu_devices[:n_local])
        # emulated cards answer as the backend the fit sized for (op offload, allocation sizes), as in its dry runs
        rules = getattr(session, "backend", None)
        emulated = tuple(local) if rules is not None and emulates(rules.name) else ()
        backend = dict(backend=rules.name, backend_devices=emulated) if emulated else {}
        checks = []
        for row in rows:
            check, stalled = _verify_row(row, session, result, tuple(session.remote) + tuple(local), backend)
            checks.append(check)
            if stalled:  # a device that stopped answering: every other row would wait as long
                return FitVerification(tuple(checks), error=check.error)
        return FitVerification(tuple(checks))


def _verify_row(row: FitRow, session, result: FitResult, endpoints: tuple[str, ...],
                backend: dict) -> tuple[PlacementCheck, bool]:
    """The row created for real and set against its prediction; and whether its devices stalled."""
    p = row.placement
    params = p.params(row.settings, result.n_layer_all).replace(repack=False, n_threads=2)
    params = params.replace(tensor_overrides=positional_overrides(params, tuple(session.remote)), cpu_moe=False)
    n_devices = max(1, len(row.devices))
    devices = endpoints[:n_devices]
    allocs: list[Alloc] = []
    draft = {}
    if uses_draft_model(row.settings.spec_type) and session.draft is not None:  # -md: its model and context beside
        fitter, own = session.draft  # on the same devices, split in the same proportions (-ts), or on -devd's
        chosen = session.draft_devices
        draft = dict(draft_path=fitter.compute_bytes.path, draft_params=draft_placement(own, p, chosen).params(
            draft_context(row.settings), fitter.n_layer_all).replace(repack=False, n_threads=2),
            draft_rpc=None if chosen is None else [devices[i] for i in chosen] or [NO_DEVICE])
    outcome = run_job(CreateJob(session.verify_path, params, devices, **draft, **backend),
                      lambda e: allocs.append(e) if isinstance(e, Alloc) else None)
    what = (f"n_ctx {row.settings.n_ctx}, {row.settings.type_k}/{row.settings.type_v} KV, "
            f"{describe_row(row, result.n_layer_all)}"
            + ("" if row.settings.spec_type == "none" else f", --spec-type {row.settings.spec_type} (its draft "
               "context created beside)"))
    where = ("system RAM (--cpu-only)" if session.ram_mode else "the GPU" if not devices
             else f"{n_devices} devices ({', '.join(devices)})" if n_devices > 1
             else f"the GPU {devices[0]}" if not is_endpoint(devices[0])
             else f"the remote host {devices[0]}" if devices[0] in session.remote
             else f"an emulated card (llama.cpp RPC device on {devices[0]}"
             + (f", answering as {backend['backend']} does)" if backend else ")"))
    if not allocs:
        failed = PlacementCheck(what, where, row.settings.n_ctx, ram_mode=session.ram_mode,
                                error=f"llama.cpp could not create the context: {outcome.failure}")
        return failed, outcome.stalled
    event = allocs[-1]
    alloc = event.allocations
    common = dict(what=what, where=where, n_ctx=row.settings.n_ctx,
                  rss_delta=event.rss_after_bytes - event.rss_before_bytes,
                  gpu_delta=(None if event.gpu_used_before_bytes is None
                             else event.gpu_used_after_bytes - event.gpu_used_before_bytes),
                  fit_compute_estimate=row.parts.compute, ram_mode=session.ram_mode)
    if session.ram_mode:
        predicted, allocated = row.parts.buffers, alloc.parts
        device = DeviceCheck(HOST, predicted, allocated, ram_tolerance(predicted.total), by_total=True)
        return PlacementCheck(**common, devices=(device,), budget=row.budget_bytes,
                              card_total=allocated.total), False
    # the fit's own figures: compute from its dry run of this placement over the same devices; a draft context
    # (MTP, -md) prints its own lines beside the target's, each rounded to 0.01 MiB
    printed = PRINTED_TOLERANCE_BYTES * (1 if row.settings.spec_type == "none" else 2)
    host = DeviceCheck(HOST, row.host.buffers, alloc.device(HOST), tolerance_bytes=printed,
                       compute_tolerance_bytes=2 * printed)  # compute and output buffers: two lines a context
    if n_devices > 1:
        checks = []
        for i, (card, endpoint) in enumerate(zip(row.devices, devices)):
            predicted = card.parts.buffers
            checks.append(DeviceCheck(f"card {i} ({card.name})", predicted, alloc.device(buffer_name(endpoint)),
                                      tolerance_bytes=printed,
                                      compute_tolerance_bytes=compute_tolerance(predicted.compute)))
        room = [c.budget - c.parts.reserve - c.parts.projector for c in row.devices]
        over = tuple(check.name for check, r in zip(checks, room) if check.allocated.total > r)
        return PlacementCheck(**common, devices=(*checks, host), budget=sum(room),
                              card_total=sum(c.allocated.total for c in checks), cards_over_budget=over), False
    card = (alloc.card_names or ("card",))[0]
    predicted = row.parts.buffers
    if session.maps_file and devices and is_endpoint(devices[0]):  # an emulated card copies what Metal would map
        copied = session.fitter(row.settings.spec_type).evaluate_devices(row.settings, p, mapped=False)[0]
        predicted = replace(predicted, weights=copied.weights)
    devices_checked = (DeviceCheck(card, predicted, alloc.device(card), tolerance_bytes=printed,
                                   compute_tolerance_bytes=printed), host)
    if row.pooled:  # a unified machine: what was allocated, against the device's ceiling and the RAM less the OS's
        common["pool"] = unified_memory(card, row.budget.bytes, alloc, row.budget.pool.usable)
    # the projector (--mmproj) is not created here: its share of the budget stays set aside
    return PlacementCheck(**common, devices=devices_checked,
                          budget=row.budget_bytes - row.parts.reserve - row.parts.projector,
                          card_total=devices_checked[0].allocated.total), False
