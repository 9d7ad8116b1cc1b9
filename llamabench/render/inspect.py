"""`inspect` in words: the layer table and the footprint lines, from an Inspection."""

from __future__ import annotations

from ..core.safe_text import shown_path
from ..core.units import file_size, mib, thousands
from ..model.geometry import LayerGeometry, LayerKind, ModelGeometry
from ..records.inspect import InspectRecord
from .fields import Field, table
from .table import compress_indices


def _layer_signature(layer: LayerGeometry, r_width: int, s_width: int) -> tuple:
    has_r = layer.has_recurrent_state
    return (
        str(layer.kind),
        layer.n_head_kv if layer.has_kv else 0,
        layer.k_width,
        layer.v_width,
        r_width if has_r else 0,
        s_width if has_r else 0,
        layer.kv_from,
        layer.index_k_width,
        layer.index_v_width,
        layer.p_width,
    )


def _dash(v: int) -> str:
    return thousands(v) if v else "-"


def _source(v: int | None) -> str:
    return "-" if v is None else f"layer {v}"


# one layer group per row: (indices, kind, KV heads, K width, V width, R width, S width, reads, idx K, idx V, P width)
LAYER_FIELDS = (
    Field("layers", "layers", lambda g: compress_indices(g[0])),
    Field("count", "count", lambda g: len(g[0])),
    Field("kind", "kind", lambda g: g[1]),
    Field("n_head_kv", "KV heads", lambda g: g[2], _dash),
    Field("k_width", "K width", lambda g: g[3], _dash, "r"),
    Field("v_width", "V width", lambda g: g[4], _dash, "r"),
    Field("r_width", "R width (f32)", lambda g: g[5], _dash, "r"),
    Field("s_width", "S width (f32)", lambda g: g[6], _dash, "r"),
)
# columns shown only for a model that has such layers (KV sharing, indexer caches, a PLE row)
OPTIONAL_FIELDS = (
    Field("kv_from", "reads KV of", lambda g: g[7], _source),
    Field("index_k_width", "idx K width", lambda g: g[8] or None, _dash, "r"),
    Field("index_v_width", "idx V width", lambda g: g[9] or None, _dash, "r"),
    Field("p_width", "P width (f32)", lambda g: g[10] or None, _dash, "r"),
)


def layer_fields(groups: list[tuple]) -> tuple[Field, ...]:
    """The layer table's columns: the optional ones where some layer group has a value there."""
    shown = tuple(f for f in OPTIONAL_FIELDS if any(f.get(g) is not None for g in groups))
    return LAYER_FIELDS + shown


def layer_groups(record: InspectRecord) -> list[tuple]:
    g = record.inspection.geometry
    groups: dict[tuple, list[int]] = {}
    for layer in g.layers:
        groups.setdefault(_layer_signature(layer, g.recurrent_r_width, g.recurrent_s_width), []).append(layer.index)
    return [(indices, *sig) for sig, indices in sorted(groups.items(), key=lambda kv: kv[1][0])]


def render_layers(record: InspectRecord, fmt: str) -> str:
    groups = layer_groups(record)
    return table(groups, layer_fields(groups), fmt)


def _nextn_words(g: ModelGeometry) -> str:
    if not g.n_layer_nextn:
        return ""
    held = sum(1 for layer in g.layers if layer.index >= g.n_layer - g.n_layer_nextn and layer.has_kv)
    where = "in the main cache" if held == g.n_layer_nextn else "outside the main cache" if not held else \
        f"{held} in the main cache"
    return f" ({g.n_layer_nextn} NextN, {where})"


def _cache_lines(record: InspectRecord) -> list[str]:
    """KV at n_ctx (SWA, indexer and KV sharing parts), then the recurrent state."""
    result = record.inspection
    g, fp, s = result.geometry, result.footprint, result.footprint.params
    out = [f"KV at n_ctx      {thousands(fp.kv_bytes)} B = {mib(fp.kv_bytes)}"
           f" (K {mib(fp.k_bytes + fp.swa_k_bytes + fp.index_k_bytes)}, "
           f"V {mib(fp.v_bytes + fp.swa_v_bytes + fp.index_v_bytes)})"]
    if g.has_swa:
        out.append(f"  of which SWA   {thousands(fp.swa_kv_bytes)} B = {mib(fp.swa_kv_bytes)} "
                   f"({fp.n_swa_layers} layers, window {g.n_swa}, {thousands(fp.shape.swa_cells)} cells per stream"
                   + (", swa_full" if s.swa_full else "") + ")")
    if fp.n_index_layers:
        out.append(f"  of which index {thousands(fp.index_kv_bytes)} B = {mib(fp.index_kv_bytes)} "
                   f"({fp.n_index_layers} layers of sparse-attention indexer keys"
                   + (", K only" if not fp.index_v_bytes else "") + ")")
    shared = [layer for layer in g.layers if layer.kind is LayerKind.SHARED]
    if shared:
        sources = sorted({layer.kv_from for layer in shared})
        out.append(f"  KV sharing     {len(shared)} layers own no cache: they read layer "
                   + " or ".join(str(i) for i in sources) + "'s")
    if fp.n_recurrent_layers:
        ple = f" + P {mib(fp.recurrent_p_bytes)}" if fp.recurrent_p_bytes else ""
        out.append(f"Recurrent state  {thousands(fp.recurrent_state_bytes)} B = {mib(fp.recurrent_state_bytes)} "
                   f"(R {mib(fp.recurrent_r_bytes)} + S {mib(fp.recurrent_s_bytes)}{ple}, {fp.n_recurrent_layers} "
                   f"layers, {s.n_seq} seq, f32)")
    elif not fp.n_kv_layers + fp.n_swa_layers:
        out.append("No cache         llama.cpp creates no KV cache and no recurrent state for this architecture")
    out += _mtp_lines(result)
    return out


def _mtp_lines(result) -> list[str]:
    """The MTP (NextN) layer: what llama-server --spec-type draft-mtp adds beside the main cache."""
    g, fp, s = result.geometry, result.footprint, result.footprint.params
    if not g.mtp_layers:
        return []
    layers = ", ".join(str(layer.index) for layer in g.mtp_layers)
    kv = result.mtp_kv_bytes
    if fp.mtp_kv_bytes:
        return [f"MTP context      {thousands(kv)} B = {mib(kv)} (--spec-type draft-mtp: layer {layers}'s KV, "
                f"K {s.type_k_draft}, V {s.type_v_draft} (-ctkd/-ctvd), at the same cells)"
                + (f"; recurrent state x{1 + s.n_rs_seq}: {s.n_rs_seq} rollback planes a sequence"
                   if fp.n_recurrent_layers and s.n_rs_seq else "")]
    return [f"MTP layer        layer {layers} (NextN): with llama-server --spec-type draft-mtp its draft context adds "
            f"{mib(kv)} of KV here (f16, -ctkd/-ctvd), and its weights load only then"]


def render_inspection(record: InspectRecord, fmt: str = "text") -> str:
    if fmt in ("csv", "md"):
        return render_layers(record, fmt)
    result = record.inspection
    g, fp, s = result.geometry, result.footprint, result.footprint.params
    out = [f"{result.name} ({g.architecture}), {g.n_layer} layers" + _nextn_words(g)
           + f", from {shown_path(result.source)}"]
    out.append("All numbers below are computed from the GGUF metadata (theory); "
               "`llamabench verify` checks them against llama.cpp.")
    out.append("")
    out.append(render_layers(record, "text"))
    out.append("Widths are elements per token (K, V) or per sequence (recurrent R = conv state, S = SSM/delta state).")
    out.append("")

    shape = fp.shape
    streams = (f"{s.n_seq} sequence{'s' if s.n_seq > 1 else ''}, "
               f"{shape.n_stream} stream{'s' if shape.n_stream > 1 else ''} of {thousands(shape.n_ctx_seq)} cells")
    rounded = f" (requested {thousands(s.n_ctx)})" if s.n_ctx != shape.n_ctx else ""
    out.append(f"Context          n_ctx {thousands(shape.n_ctx)}{rounded}, {streams}; K {s.type_k}, V {s.type_v}, "
               f"flash attention {'on' if s.flash_attn else 'off'}")
    if result.runtime:
        out.append(f"Runtime          {result.runtime}")
    out.append(f"Trained context  {thousands(g.n_ctx_train)} ({g.architecture}.context_length)"
               + (": n_ctx is beyond it" if result.beyond_trained_context else ""))
    reduction = fp.reduction
    out.append(f"Growing KV       {thousands(fp.kv_bytes_per_token)} B/token over {fp.n_kv_layers} "
               f"cached non-SWA layers")
    out.append(f"Full-GQA basis   {thousands(fp.full_gqa_kv_bytes_per_token)} B/token if all {len(g.mixer_layers)} "
               f"mixer layers were cached as full attention"
               + (f": a {reduction:.2f}x reduction" if fp.reduces
                  else ": the same, every mixer layer is full attention" if reduction else ""))
    published = result.published
    if published is not None and published.kv_bytes_per_token is not None:
        verdict = "matches" if result.published_kv_matches else "DIFFERS from the f16 value computed here"
        out.append(f"Published        {thousands(published.kv_bytes_per_token)} B/token (f16) in the catalog: "
                   f"{verdict}")
    out.extend(_cache_lines(record))
    if result.draft is not None:
        d, dfp = result.draft, result.draft.footprint
        weights = f"; weights {mib(d.weights_bytes)} (tensor infos)" if d.weights_bytes else ""
        out.append(f"Draft model      {d.label} ({d.architecture}), llama-server -md: its own context at the target's "
                   f"{thousands(dfp.shape.n_ctx)} cells and {dfp.params.n_seq} slots (K {dfp.params.type_k}, V "
                   f"{dfp.params.type_v}, -ctkd/-ctvd): KV {mib(dfp.kv_bytes)}, recurrent "
                   f"{mib(dfp.recurrent_state_bytes)}{weights}")
    if result.weights_basis:
        out.append(f"Weights          {thousands(result.weights_bytes)} B = {mib(result.weights_bytes)}: "
                   f"{result.weights_basis}")
    elif result.n_tensors:
        out.append(f"Weights          {thousands(result.weights_bytes)} B = {mib(result.weights_bytes)} "
                   f"(sum of {result.n_tensors} tensor infos)")
    elif published is not None and published.quants:
        quants = ", ".join(f"{q.name} {file_size(q.bytes)}" for q in published.quants)
        out.append(f"Weights          not in the catalog entry; published file sizes: {quants}")
    elif published is not None:
        out.append("Weights          unknown: a catalog entry holds no tensor infos and no published size")
    else:
        out.append("Weights          0 B (the file holds no tensors)")
    return "\n".join(out)
