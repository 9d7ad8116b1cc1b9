"""`inspect` in words: the layer table and the footprint lines, from an Inspection."""

from __future__ import annotations

from ..inspection import Inspection
from ..layout import LayerGeometry
from ..units import mib, thousands
from .table import compress_indices, render_table


def _layer_signature(layer: LayerGeometry, r_width: int, s_width: int) -> tuple:
    has_r = layer.has_recurrent_state
    return (
        str(layer.kind),
        layer.n_head_kv if layer.has_kv else 0,
        layer.k_width,
        layer.v_width,
        r_width if has_r else 0,
        s_width if has_r else 0,
    )


def layer_rows(result: Inspection) -> list[list[str]]:
    g = result.geometry
    groups: dict[tuple, list[int]] = {}
    for layer in g.layers:
        groups.setdefault(_layer_signature(layer, g.recurrent_r_width, g.recurrent_s_width), []).append(layer.index)
    rows = []
    for (kind, n_kv, k_w, v_w, r_w, s_w), indices in sorted(groups.items(), key=lambda kv: kv[1][0]):
        dash = lambda v: thousands(v) if v else "-"  # noqa: E731
        rows.append([compress_indices(indices), str(len(indices)), kind, dash(n_kv), dash(k_w), dash(v_w), dash(r_w), dash(s_w)])
    return rows


def render_inspection(result: Inspection) -> str:
    g, fp, s = result.geometry, result.footprint, result.footprint.settings
    meta = result.metadata
    out = [f"{meta.display_name} ({g.architecture}), {g.n_layer} layers"
           + (f" ({g.n_layer_nextn} NextN, outside the main cache)" if g.n_layer_nextn else "")
           + f", from {meta.source}"]
    out.append("All numbers below are computed from the GGUF metadata (theory); `llamabench verify` checks them against llama.cpp.")
    out.append("")
    out.append(render_table(
        ["layers", "count", "kind", "KV heads", "K width", "V width", "R width (f32)", "S width (f32)"],
        layer_rows(result),
        align="llllrrrr",
    ))
    out.append("Widths are elements per token (K, V) or per sequence (recurrent R = conv state, S = SSM/delta state).")
    out.append("")

    shape = fp.shape
    streams = f"{s.n_seq} sequence{'s' if s.n_seq > 1 else ''}, {shape.n_stream} stream{'s' if shape.n_stream > 1 else ''} of {thousands(shape.n_ctx_seq)} cells"
    rounded = f" (requested {thousands(s.n_ctx)})" if s.n_ctx != shape.n_ctx else ""
    out.append(f"Context          n_ctx {thousands(shape.n_ctx)}{rounded}, {streams}; K {s.type_k}, V {s.type_v}, "
               f"flash attention {'on' if s.flash_attn else 'off'}")
    out.append(f"Trained context  {thousands(g.n_ctx_train)} ({g.architecture}.context_length)"
               + (": n_ctx is beyond it" if result.beyond_trained_context else ""))
    reduction = fp.reduction
    out.append(f"Growing KV       {thousands(fp.kv_bytes_per_token)} B/token over {fp.n_kv_layers} cached non-SWA layers")
    out.append(f"Full-GQA basis   {thousands(fp.full_gqa_kv_bytes_per_token)} B/token if all {len(g.mixer_layers)} mixer layers "
               f"were cached as full attention"
               + (f": a {reduction:.2f}x reduction" if reduction else ""))
    if result.entry is not None and result.entry.published_kv_bytes_per_token is not None:
        verdict = "matches" if result.published_kv_matches else "DIFFERS from the f16 value computed here"
        out.append(f"Published        {thousands(result.entry.published_kv_bytes_per_token)} B/token (f16) in the catalog: {verdict}")
    out.append(f"KV at n_ctx      {thousands(fp.kv_bytes)} B = {mib(fp.kv_bytes)}"
               f" (K {mib(fp.k_bytes + fp.swa_k_bytes)}, V {mib(fp.v_bytes + fp.swa_v_bytes)})")
    if g.has_swa:
        out.append(f"  of which SWA   {thousands(fp.swa_kv_bytes)} B = {mib(fp.swa_kv_bytes)} "
                   f"({fp.n_swa_layers} layers, window {g.n_swa}, {thousands(shape.swa_cells)} cells per stream"
                   + (", swa_full" if s.swa_full else "") + ")")
    if fp.n_recurrent_layers:
        out.append(f"Recurrent state  {thousands(fp.recurrent_state_bytes)} B = {mib(fp.recurrent_state_bytes)} "
                   f"(R {mib(fp.recurrent_r_bytes)} + S {mib(fp.recurrent_s_bytes)}, {fp.n_recurrent_layers} layers, "
                   f"{s.n_seq} seq, f32)")
    if meta.tensors:
        out.append(f"Weights          {thousands(meta.weights_bytes)} B = {mib(meta.weights_bytes)} (sum of {len(meta.tensors)} tensor infos)")
    elif result.entry is not None and result.entry.published_quants:
        quants = ", ".join(f"{q.name} {q.bytes / 1024**3:.2f} GiB" for q in result.entry.published_quants)
        out.append(f"Weights          not in the catalog entry; published file sizes: {quants}")
    elif result.entry is not None:
        out.append("Weights          unknown: a catalog entry holds no tensor infos and no published size")
    else:
        out.append("Weights          0 B (the file holds no tensors)")
    return "\n".join(out)
