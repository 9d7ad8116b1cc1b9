"""Where a fit's numbers come from, in words: the speculative contexts sized, and a unified machine's pool."""

from __future__ import annotations

from ...core.units import GIB, MIB
from ...memory import speculative
from ...memory.runtimes import RuntimeConfig
from ...model.geometry import ModelGeometry
from ...settings.budget import Budget
from ...settings.params import Params


def spec_words(geometry: ModelGeometry, spec_types: tuple[str, ...], p: Params) -> str:
    """What the speculative rows add, in words."""
    kind = spec_types[-1]
    if kind == speculative.SIMPLE:
        return (f"--spec-type draft-simple beside none: the draft model (-md) and its context (below), the target's "
                f"outputs for 1 + {p.spec_draft_n_max} tokens a slot")
    if kind == speculative.EAGLE3:
        return (f"--spec-type draft-eagle3 beside none: the EAGLE3 head (-md) and its context (below: one layer's KV, "
                f"n_batch outputs, llama-server's {speculative.TOP_K_CHAIN}-candidate sampler chains on the device), "
                f"the target's outputs for 1 + {p.spec_draft_n_max} tokens a slot"
                + (f" and {p.spec_draft_n_max} recurrent rollback planes a sequence" if geometry.recurrent_layers
                   else ""))
    if kind != speculative.MTP:
        n_max = speculative.n_max(p.replace(spec_type=kind))
        return f"--spec-type {kind} beside none: no device memory of its own; {n_max} draft tokens widen the outputs"
    layers = ", ".join(str(i) for i in speculative.mtp_layer_indices(geometry))
    return (f"--spec-type draft-mtp beside none: the MTP layer's weights (blk.{layers}, loaded only with it), a second "
            f"context (the MTP draft context: layer {layers}'s KV at the same cells, {p.type_k_draft}/{p.type_v_draft} "
            "(-ctkd/-ctvd), and its own compute buffers from the same dry run), the target's outputs for "
            f"1 + {p.spec_draft_n_max} tokens a slot" + (f" and {p.spec_draft_n_max} recurrent rollback planes a "
                                                           "sequence" if geometry.recurrent_layers else ""))


def pool_basis(budgets: tuple[Budget, ...]) -> dict[str, str]:
    """The basis lines of unified machines: each one's pool and ceiling, and the OS's share (the reserve)."""
    pools = [b for b in budgets if b.pool is not None]
    lines = "; ".join(f"{b.label}: {b.pool.ram / GIB:g} GiB of RAM shared by GPU and CPU, the device's "
                      f"{b.pool.ceiling_name} {b.bytes / GIB:.2f} GiB ({b.pool.ceiling_basis})" for b in pools)
    maps = ("; Metal maps the GGUF into its buffer: the card's weights are the file's span it maps (the MTP context "
            "runs on the same model: nothing is mapped twice), the RAM holds each page once"
            if any(b.pool.maps_file for b in pools) else "")
    return {"pool": f"unified memory, one pool with two limits: the device's buffers within its ceiling, device, host "
                    f"and mapped weights within the RAM less the OS's share. {lines}{maps}",
            "reserve": f"{pools[0].pool.os_reserve / GIB:g} GiB of the RAM kept for the OS and its apps (--reserve); "
                       "none on the device",
            "host": "system RAM beside the device: mapped weights, host layers' caches, host compute and output "
                    "buffers, the prompt cache limit and the checkpoint bound; checked with the device's buffers "
                    "against the pool's RAM"}


def fit_basis(source, *, weights: str, geometry: ModelGeometry, devices, verify: bool,
           ram_mode: bool, n_cards: int, reserve, runtime: RuntimeConfig, ram: Budget | None) -> dict[str, str]:
    """Where each part's bytes come from, in words (`source`: the ModelSource; `devices`: the session's)."""
    compute_source = ("the GGUF" if source.path else "the geometry twin" if verify
                      else "a full-size shape twin (real shapes and vocabulary, zero data)")
    measured = (f"measured: llama.cpp's own buffers in its no_alloc dry run at each n_ctx tried, per device (no "
                f"layout rule for {geometry.architecture} in llamabench: {geometry.no_rule})")
    return {
        "weights": weights,
        "KV": measured if geometry.no_rule else
        "computed from the GGUF metadata (exact; `llamabench verify` checks it against llama.cpp)",
        "recurrent": measured if geometry.no_rule else "computed from the GGUF metadata (exact, f32)",
        "compute": f"llama.cpp's own no_alloc dry run of {compute_source}, same placement and context, over "
                   f"{devices.backend}: each card's and the host's buffers apart"
                   + ("; with several devices llama.cpp pipelines the layers (pipeline parallelism): every "
                      "card holds a compute buffer of its own" if n_cards > 1 else "")
                   + ("" if devices.gpu_build and not devices.emulate or devices.rules is not None
                      else "; a GPU build's buffers may differ (op offload of host weights)"),
        "reserve": ("none in system RAM (the --ram budget is all usable)" if ram_mode
                    else ("+".join(f"{r / MIB:.0f}" for r in reserve) + " MiB kept free on the cards, one each,"
                          if isinstance(reserve, tuple) else f"{reserve / MIB:.0f} MiB kept free")
                    + " for the driver and display (--reserve)"),
        "runtime": runtime.describe(geometry) + " (its context is what is sized; --runtime, -np, -kvu change it)",
        "host": ("system RAM beside the card: the weights kept there (the file's mapped span, or with --load-mode "
                 "none the tensors read into buffers), host layers' caches, host compute and output "
                 "buffers" + (", the prompt cache limit and the checkpoint bound (they grow while the server "
                              "runs)" if runtime.is_server else "")
                 + (f"; checked against --ram {ram.label}" if ram and not ram_mode else "; not checked (--ram SIZE)"
                    if not ram_mode else "")),
    }
