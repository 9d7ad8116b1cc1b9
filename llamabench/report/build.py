"""Write a report folder from merged records: record.json, report.md and the plots. Runs no model."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from .. import catalog
from ..bench.render import MEMORY_HEADERS, TS_HEADERS, memory_rows, ts_rows
from ..errors import LlamabenchError
from ..footprint import CacheSettings, compute_footprint
from ..layout import geometry_from_metadata
from ..tables import compress_indices, render_markdown
from ..units import GIB, MIB
from . import plots
from .kv_record import KIND_WORDS, build_record
from .load import ModelResults


def _kv_at(curve: list[list[int]], inspection: dict, n_ctx: int) -> int:
    for point in curve:
        if point[0] == n_ctx:
            return point[1]
    if inspection["n_ctx"] == n_ctx:
        return inspection["kv_bytes"]
    raise LlamabenchError(f"no theory for n_ctx {n_ctx}: run `llamabench inspect --ctx {n_ctx} --results ...` too")


def _comparison_curve(model_id: str, max_ctx: int) -> tuple[str, list[tuple[int, int]]]:
    entry = catalog.get_entry(model_id)
    geometry = geometry_from_metadata(entry.metadata)
    points = []
    for i in range(1, 65):
        n = max(256, round(max_ctx * i / 64 / 256) * 256)
        fp = compute_footprint(geometry, CacheSettings(n_ctx=n))
        points.append((fp.shape.n_ctx, fp.kv_bytes + fp.recurrent_state_bytes))
    per_token = compute_footprint(geometry, CacheSettings(n_ctx=256)).kv_bytes_per_token
    return f"{entry.name} ({per_token:,} B/token, theory)", points


def _components(results: ModelResults) -> list[tuple[str, float | None, float | None]]:
    """Theory against llama.cpp per component, from the first timed run (else the dry run)."""
    timed = [r for r in results.bench if r["status"] == "ok" and r.get("llama_cpp")]
    if timed:
        r = timed[0]
        alloc, theory = r["llama_cpp"], r["theory"]
        kv = sum(c["size_mib"] for c in alloc["kv_caches"])
        rec = sum(x["size_mib"] for x in alloc["recurrent"])
        compute = sum(alloc["compute_buffers_mib"].values())
        weights = r["model"].get("size_bytes")
        mapped = max(alloc["model_buffers_mib"].values()) if alloc["model_buffers_mib"] else None
        return [("KV cache", theory["kv_bytes"] / MIB, kv), ("recurrent state", theory["recurrent_state_bytes"] / MIB, rec),
                ("compute buffer", None, compute),
                ("weights (mapped)", weights / MIB if weights else None, mapped)]
    if results.verify:
        v = results.verify[-1]
        alloc = v["llama_cpp"]
        return [("KV cache", v["theory"]["kv_bytes"] / MIB, sum(c["size_mib"] for c in alloc["kv_caches"])),
                ("recurrent state", v["theory"]["recurrent_state_bytes"] / MIB, sum(x["size_mib"] for x in alloc["recurrent"])),
                ("compute buffer", None, sum(alloc["compute_buffers_mib"].values()))]
    return []


def _layout_md(inspection: dict) -> str:
    groups: dict[tuple, list[int]] = {}
    for layer in inspection["layers"]:
        groups.setdefault((layer["kind"], layer["n_head_kv"], layer["k_width"], layer["v_width"]), []).append(layer["index"])
    rows = [[compress_indices(ix), str(len(ix)), KIND_WORDS.get(kind, kind), str(h or "-"), str(k or "-"), str(v or "-")]
            for (kind, h, k, v), ix in sorted(groups.items(), key=lambda kv: kv[1][0])]
    return render_markdown(["layers", "count", "kind", "KV heads", "K width", "V width"], rows, align="lrlrrr")


def _fit_md(fit: dict) -> str:
    out = []
    for rec in fit["recommendations"]:
        rows = [r for r in fit["rows"] if r["budget"] == rec["budget"] and r["n_ctx"] == rec["n_ctx"]]
        table = [[f"{r['type_k']}/{r['type_v']}", r["placement"], f"{r['weights_bytes'] / GIB:.2f}",
                  f"{r['kv_bytes'] / GIB:.2f}", f"{r['recurrent_bytes'] / GIB:.2f}", f"{r['compute_bytes'] / GIB:.2f}",
                  f"{r['reserve_bytes'] / GIB:.2f}", f"{r['total_bytes'] / GIB:.2f}",
                  "yes" if r["fits"] else f"no (short {r['short_by_bytes'] / GIB:.2f})", str(r["max_n_ctx"] or "none")]
                 for r in rows]
        out.append(f"**{rec['budget']} card, n_ctx {rec['n_ctx']:,}** (GiB)\n")
        out.append(render_markdown(["K/V", "placement", "weights", "KV", "recurrent", "compute", "reserve", "total",
                                    "fits", "max n_ctx"], table, align="llrrrrrrlr"))
        if rec["fits"]:
            out.append(f"\nVerdict: fits. `{rec['llama_cpp']}`\n\n`{rec['python']}`\n")
        else:
            out.append("\nVerdict: nothing fits at this context.\n")
    out.append("Where each part comes from:\n")
    out += [f"- {k}: {v}" for k, v in fit["basis"].items()]
    return "\n".join(out)


def write_report(results: ModelResults, out_dir: Path, *, compare: list[str], sources: list[str]) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    ins_record = results.latest_inspect
    if ins_record is None:
        raise LlamabenchError(f"{results.label}: the results hold no inspect record "
                              f"(run `llamabench inspect {results.label} --results FILE`)")
    inspection, curve = ins_record["inspection"], ins_record["kv_curve"]
    name = results.name or inspection["model"]

    contexts = sorted({inspection["n_ctx"]} | {r["params"]["n_ctx"] for r in results.bench if r["status"] == "ok"})
    records = []
    for n_ctx in contexts:
        try:
            kv_at = _kv_at(curve, inspection, n_ctx)
        except LlamabenchError:
            continue
        records.append(build_record(results.label, name, inspection, results.verify, results.bench, n_ctx, kv_at))
    (out_dir / "record.json").write_text(json.dumps(records if len(records) > 1 else records[0], indent=2) + "\n")

    fit = results.latest_fit["fit"] if results.latest_fit else None
    all_rows = [r for r in fit["rows"] if r["placement"] == "all layers on the card"] if fit else []
    weights_on_card = all_rows[0]["weights_bytes"] if all_rows else None
    reserve = all_rows[0]["reserve_bytes"] if all_rows else 0
    comparisons = dict(_comparison_curve(c, curve[-1][0]) for c in compare)
    written = plots.kv_vs_context(out_dir, name, curve, comparisons, weights_on_card, reserve)
    if fit:
        n_ctx = fit["recommendations"][0]["n_ctx"]
        written += plots.budget_bars(out_dir, name, [r for r in fit["rows"] if r["n_ctx"] == n_ctx], n_ctx)
    if results.bench:
        written += plots.speed_vs_depth(out_dir, name, results.bench)
    components = _components(results)
    if components:
        written += plots.theory_vs_measured(out_dir, name, components)

    md = _markdown(results, name, inspection, records, fit, components, written, sources)
    (out_dir / "report.md").write_text(md)
    return {"out_dir": str(out_dir), "records": records, "files": [str(p) for p in written]
            + [str(out_dir / "record.json"), str(out_dir / "report.md")]}


def _markdown(results, name, inspection, records, fit, components, written, sources) -> str:
    plot_names = {p.stem for p in written}
    lines = [f"# {name}: KV efficiency report", "",
             f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} by llamabench from "
             + ", ".join(f"`{s}`" for s in sources) + ". Nothing was run to write it: every number comes from "
             "the records in those files, and each says whether it is computed from the GGUF (theory) or "
             "measured (llama.cpp's allocation lines, timed runs).", "",
             "## Layer layout", "", _layout_md(inspection), "", records[0]["kv_bytes_basis"] + ".", ""]
    if "kv_vs_context" in plot_names:
        lines += ["![KV against context](kv_vs_context.png)", ""]
    lines += ["## Theory against llama.cpp", ""]
    if components:
        lines.append(render_markdown(["component", "theory MiB", "llama.cpp MiB"],
                                     [[c, "-" if t is None else f"{t:.2f}", "-" if m is None else f"{m:.2f}"]
                                      for c, t, m in components], align="lrr"))
        lines += ["", "![theory against measured](theory_vs_measured.png)", ""]
    for v in results.verify:
        status = "all equal" if v["ok"] else "MISMATCH"
        lines.append(f"- dry run at n_ctx {v['settings']['n_ctx']:,} (K {v['settings']['type_k']}, V {v['settings']['type_v']}): "
                     f"{status} ({len(v['checks'])} checks)")
    lines.append("")
    if fit:
        lines += ["## Does it fit?", "", _fit_md(fit), ""]
        if "budget" in plot_names:
            lines += ["![memory budget](budget.png)", ""]
    if results.bench:
        ok = [r for r in results.bench if r["status"] == "ok"]
        lines += ["## Speed at depth (measured)", "",
                  render_markdown(TS_HEADERS, ts_rows(results.bench), align="lrrlrrrlllrr"), "",
                  render_markdown(MEMORY_HEADERS, memory_rows(results.bench), align="rlllrrrrrrl"), ""]
        if any(r["model"].get("is_twin") for r in ok):
            lines += ["Timed on the geometry twin: the KV and recurrent geometry are the real model's, the hidden "
                      "size, vocabulary and experts are tiny, so t/s show the shape of the depth curve, not the "
                      "real model's speed.", ""]
        if "speed_vs_depth" in plot_names:
            lines += ["![speed against depth](speed_vs_depth.png)", ""]
    lines += ["## kv_efficiency record", "", "```json", json.dumps(records if len(records) > 1 else records[0], indent=2),
              "```", ""]
    source = (results.bench or results.verify or results.inspect)[-1]
    lines += ["## Machine and versions", "", "```json",
              json.dumps({"machine": source.get("machine"), "versions": source.get("versions")}, indent=2), "```", ""]
    return "\n".join(lines)
