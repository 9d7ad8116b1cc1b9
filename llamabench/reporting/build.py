"""Write a report folder from merged records: record.json, report.md and the plots. Runs no model."""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime, timezone
from pathlib import Path

from ..core.errors import LlamabenchError
from ..core.safe_text import shown_path
from ..core.units import MIB
from ..memory import speed, speed_fit
from ..memory.footprint import KvPoint, compute_footprint, kv_curve
from ..memory.inspection import Inspection, f16_kv_bytes_per_token
from ..memory.placement import PlacementKind
from ..model.layout import geometry_from_metadata
from ..records.bench import BenchRecord
from ..records.quality import F16_BASE
from ..render.bench import memory_table, noisy, speed_table
from ..render.fit import markdown_report
from ..render.quality import render_quality_rows
from ..render.table import compress_indices, render_markdown
from ..settings.params import Params
from ..world import catalog
from ..world.outputs import make_folder, write_atomically
from . import plots
from .kv_record import KIND_WORDS, KvEfficiencyRecord, MeasuredQuality, build_record
from .load import ModelResults
from .runtimes import comparison_md

FOLDER_NAME_MAX = 100  # characters (ASCII: bytes too), far below the 255 a file system allows
_NOT_FOLDER_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def folder_name(label: str) -> str:
    """A model label (read from a results file: untrusted) as one safe folder name: [A-Za-z0-9._-] only, no
    leading dot or dash, at most FOLDER_NAME_MAX characters, never empty; where cleaning changed the label, a
    short hash of it is added, so that two labels never land silently in one folder."""
    name = _NOT_FOLDER_SAFE.sub("-", label).lstrip(".-")
    if name and name == label and len(name) <= FOLDER_NAME_MAX:
        return name
    digest = hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{name[:FOLDER_NAME_MAX - 11]}-{digest}" if name else f"model-{digest}"


def report_folder(parent: Path, label: str) -> Path:
    """parent / the label's folder name, checked to resolve inside parent."""
    target = parent / folder_name(label)
    try:
        inside = target.resolve().is_relative_to(parent.resolve())
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise LlamabenchError(f"{target}: cannot be resolved ({exc})") from None
    if not inside:
        raise LlamabenchError(f"{target}: resolves outside {parent} (a link?): not written")
    return target


def _kv_at(curve: tuple[KvPoint, ...], ins: Inspection, n_ctx: int) -> int:
    for point in curve:
        if point.n_ctx == n_ctx:
            return point.kv_bytes
    if ins.footprint.shape.n_ctx == n_ctx:
        return ins.footprint.kv_bytes
    raise LlamabenchError(f"no theory for n_ctx {n_ctx}: run `llamabench inspect --ctx {n_ctx} --results ...` too")


def _comparison_curve(model_id: str, max_ctx: int) -> tuple[str, tuple[KvPoint, ...]]:
    entry = catalog.get_entry(model_id)
    geometry = geometry_from_metadata(entry.metadata)
    per_token = f16_kv_bytes_per_token(geometry)
    return f"{entry.name} ({per_token:,} B/token, theory)", kv_curve(geometry, Params(n_ctx=0), max_ctx)


def _components(results: ModelResults) -> list[tuple[str, float | None, float | None]]:
    """Theory against llama.cpp per component, from the first timed run (else the dry run)."""
    timed = [r for r in results.bench if r.ok and r.allocations and r.footprint]
    if timed:
        r = timed[0]
        alloc, fp = r.allocations, r.footprint
        weights = r.model.size_bytes
        mapped = max(alloc.model_buffers_mib.values()) if alloc.model_buffers_mib else None
        return [("KV cache", fp.kv_bytes / MIB, alloc.kv_mib),
                ("recurrent state", fp.recurrent_state_bytes / MIB, alloc.recurrent_mib),
                ("compute buffer", None, alloc.compute_mib),
                ("weights (mapped)", weights / MIB if weights else None, mapped)]
    checked = [v for v in results.verify if v.footprint is not None]  # a theory to set beside llama.cpp's
    if checked:
        v = checked[-1]
        return [("KV cache", v.footprint.kv_bytes / MIB, v.allocations.kv_mib),
                ("recurrent state", v.footprint.recurrent_state_bytes / MIB, v.allocations.recurrent_mib),
                ("compute buffer", None, v.allocations.compute_mib)]
    return []


def _cost(r: BenchRecord) -> speed.TokenCost:
    rf = r.roofline
    return speed.TokenCost(r.test.depth, rf.weights_bytes, rf.kv_read_bytes, rf.recurrent_bytes, rf.attention_flops)


def roofline_series(bench: list, *, twin: bool = False) -> list[dict]:
    """Per machine and configuration with tg at two depths or more: time per token = bytes / bandwidth + attention
    FLOPs / compute, fitted on every measured depth bench did not mark noisy (non-negative least squares on the
    relative error, `memory.speed_fit`; not an exact fit through two points), its prediction at every measured
    depth, and the full-GQA counterfactual (left out on a geometry twin: its weights are a few MiB where the model's
    are GiB, so the bytes its KV saves weigh several times what they weigh in the model; None)."""
    out = []
    for records in speed.tg_groups([r for r in bench if r.roofline and r.roofline.full_gqa_bytes_per_token]):
        if len(records) < 2:
            continue
        p = records[0].params
        machine, n_ctx, tk, tv = records[0].series, p.n_ctx, p.type_k, p.type_v
        kept = [r for r in records if not noisy(r)] or records
        obs = [speed_fit.Observation({"bytes": _cost(r).total_bytes, "flops": _cost(r).attention_flops}, r.avg_ts,
                                     machine, "", r.test.name) for r in kept]
        fitted = speed_fit.fit(obs, ("bytes", "flops"))

        def tok_s(total_bytes: int, flops: int) -> float:
            return 1 / (fitted["bytes"] * total_bytes + fitted["flops"] * flops)

        left_out = len(records) - len(kept)
        basis = (f"fitted on {len(kept)} measured depths" + (f" ({left_out} noisy left out)" if left_out else ""))
        points = [{"depth": r.test.depth, "measured": r.avg_ts,
                   "predicted": tok_s(_cost(r).total_bytes, _cost(r).attention_flops),
                   "calibrated": r in kept, "noisy": noisy(r),
                   "full_gqa": None if twin else tok_s(r.roofline.full_gqa_bytes_per_token,
                                                       r.roofline.full_gqa_attention_flops),
                   "mbu": r.roofline.mbu, "bytes_per_token": r.roofline.bytes_per_token,
                   "achieved_gbps": r.roofline.achieved_gbps}
                  for r in records]
        out.append({"label": f"{machine}, n_ctx {n_ctx:,}, {tk}/{tv}", "basis": basis, "points": points,
                    "line": points, "bandwidth_gbps": 1 / fitted["bytes"] / 1e9 if fitted["bytes"] else math.inf,
                    "compute_tflops": 1 / fitted["flops"] / 1e12 if fitted["flops"] else math.inf,
                    "peak_gbps": records[0].roofline.peak_gbps})
    return out


def _roofline_md(series: list[dict]) -> str:
    lines = []
    for s in series:
        tflops = s["compute_tflops"]
        compute = (", attention compute not limiting" if not math.isfinite(tflops)
                   else f" + attention FLOPs / {tflops:.2f} TFLOPS" if tflops >= 1
                   else f" + attention FLOPs / {tflops * 1e3:.3g} GFLOPS")
        lines.append(f"**{s['label']}**: time per token = bytes / {s['bandwidth_gbps']:.1f} GB/s{compute} "
                     f"({s['basis']}); measured peak bandwidth {s['peak_gbps']} GB/s\n")
        rows = [[f"{p['depth']:,}", f"{p['bytes_per_token'] / MIB:.1f}",
                 f"{p['measured']:.2f}" + (" (noisy)" if p.get("noisy") else ""),
                 f"{p['predicted']:.2f}", f"{(p['predicted'] - p['measured']) / p['measured'] * 100:+.1f}%"
                 + ("" if p.get("calibrated") else " (left out)"),
                 "-" if p["mbu"] is None else f"{p['mbu'] * 100:.1f}%",
                 "-" if p["full_gqa"] is None else f"{p['full_gqa']:.2f}"] for p in s["points"]]
        lines.append(render_markdown(["depth", "MiB/token", "measured t/s", "model t/s", "error", "MBU",
                                      "full GQA t/s (model)"], rows, align="rrrrrrr"))
        lines.append("")
    return "\n".join(lines)


def _layout_md(ins: Inspection) -> str:
    groups: dict[tuple, list[int]] = {}
    for layer in ins.geometry.layers:
        key = (str(layer.kind), layer.n_head_kv if layer.has_kv else 0, layer.k_width, layer.v_width)
        groups.setdefault(key, []).append(layer.index)
    rows = [[compress_indices(ix), str(len(ix)), KIND_WORDS.get(kind, kind), str(h or "-"), str(k or "-"),
             str(v or "-")] for (kind, h, k, v), ix in sorted(groups.items(), key=lambda kv: kv[1][0])]
    return render_markdown(["layers", "count", "kind", "KV heads", "K width", "V width"], rows, align="lrlrrr")


def write_report(results: ModelResults, out_dir: Path, *, compare: list[str],
                 sources: list[str]) -> tuple[list[str], list[KvEfficiencyRecord]]:
    """Write record.json, report.md and the plots; (files written, kv_efficiency records)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise LlamabenchError(f"{out_dir}: exists and is not a folder (give --out-dir a folder)")
    ins_record = results.latest_inspect
    if ins_record is None:
        raise LlamabenchError(f"{results.label}: the results hold no inspect record "
                              f"(run `llamabench inspect MODEL --results FILE` for this model)")
    make_folder(out_dir, "report folder")
    inspection, curve = ins_record.inspection, ins_record.kv_curve
    name = results.name or inspection.name

    contexts = sorted({inspection.footprint.shape.n_ctx} | {r.params.n_ctx for r in results.bench if r.ok})
    records = []
    for n_ctx in contexts:
        try:
            kv_at = _kv_at(curve, inspection, n_ctx)
        except LlamabenchError:
            continue
        records.append(build_record(results.label, name, inspection, results.verify, results.bench, n_ctx, kv_at,
                                    results.latest_fit.fit if results.latest_fit else None))
    records += _lossy_records(results, name, inspection, contexts)
    stored = [r.to_dict() for r in records]
    record_json = json.dumps(stored if len(stored) > 1 else stored[0], indent=2) + "\n"
    write_atomically(out_dir / "record.json", record_json, "report file")

    fit = results.latest_fit.fit if results.latest_fit else None
    all_rows = [r for r in fit.rows if r.placement.kind is PlacementKind.ALL] if fit else []
    weights_on_card = all_rows[0].parts.weights if all_rows else None
    reserve = all_rows[0].parts.reserve if all_rows else 0
    compute = all_rows[0].parts.compute if all_rows else 0  # fit's, at its n_ctx: the room line leaves it out too
    written = []
    if curve:  # an inspect record read back may hold none
        comparisons = dict(_comparison_curve(c, curve[-1].n_ctx) for c in compare)
        written += plots.kv_vs_context(out_dir, name, curve, comparisons, weights_on_card, reserve, compute=compute,
                                       n_ctx_train=inspection.geometry.n_ctx_train)
    fit_rows = [r for r in fit.rows if r.settings.n_ctx == fit.contexts[0]] if fit else []
    if fit_rows:
        written += plots.budget_bars(out_dir, name, fit_rows, fit.contexts[0])
    series = roofline_series(results.bench, twin=any(r.model.is_twin for r in results.bench))
    if results.bench:
        written += plots.speed_vs_depth(out_dir, name, results.bench)
    if series:
        written += plots.roofline(out_dir, name, series, twin=any(r.model.is_twin for r in results.bench))
    components = _components(results)
    if components:
        twin = any(r.model.is_twin for r in [*results.bench, *results.verify])  # a catalog id: sized on its twin
        written += plots.theory_vs_measured(out_dir, name, components, twin=twin)
    quality_rows = [row for row, _ in results.quality_rows]
    if quality_rows:
        written += plots.quality(out_dir, name, quality_rows)

    md = _markdown(results, name, inspection, stored, fit, components, written, sources, series)
    write_atomically(out_dir / "report.md", md, "report file")
    return [str(p) for p in written] + [str(out_dir / "record.json"), str(out_dir / "report.md")], records


def _lossy_records(results: ModelResults, name: str, inspection: Inspection,
                   contexts: list[int]) -> list[KvEfficiencyRecord]:
    """A kv_efficiency record per lossy KV type a quality run measured, at each context of the report: its quality
    against f16 KV at that context where measured there, else at the deepest context it was measured at (the
    record says which)."""
    measured: dict[tuple[str, str], list[MeasuredQuality]] = {}
    for row, record in results.quality_rows:
        if row.base == F16_BASE:
            measured.setdefault((row.type_k, row.type_v), []).append(MeasuredQuality(row, record.text))
    out = []
    fit = results.latest_fit.fit if results.latest_fit else None
    for types, found in sorted(measured.items()):
        for n_ctx in contexts:
            at = next((m for m in found if m.row.n_ctx == n_ctx), max(found, key=lambda m: m.row.n_ctx))
            params = inspection.footprint.params.replace(n_ctx=n_ctx, type_k=types[0], type_v=types[1])
            kv_at = compute_footprint(inspection.geometry, params).kv_bytes
            out.append(build_record(results.label, name, inspection, results.verify, results.bench, n_ctx, kv_at, fit,
                                    kv_types=types, quality=at))
    return out


def _speed_md(bench_records: list[BenchRecord], plot_names: set[str]) -> list[str]:
    """The report's "Speed at depth" section, as lines: the timed runs, their plot, llama-server beside Llama()."""
    ok = [r for r in bench_records if r.ok]
    bench = sorted(bench_records, key=lambda r: (r.series, r.params.label, r.test.depth, r.test.kind != "pp"))
    several = len({r.series for r in bench}) > 1
    lines = ["## Speed at depth (measured)", "", speed_table(bench, "md", with_series=several), "",
             memory_table(bench, "md"), ""]
    if not several and bench:
        lines += [f"Measured on {bench[0].series}.", ""]
    if any(r.model.is_twin for r in ok):
        lines += ["Timed on the geometry twin: the KV and recurrent geometry are the real model's, the hidden "
                  "size, vocabulary and experts are tiny, so t/s show the shape of the depth curve, not the "
                  "real model's speed.", ""]
    if "speed_vs_depth" in plot_names:
        lines += ["![speed against depth](speed_vs_depth.png)", ""]
    side_by_side = comparison_md(bench_records)
    if side_by_side:
        lines += ["### llama-server beside Llama() at the same depth", "",
                  "The same test on the same machine and KV settings: a Llama() context timed in a child (as "
                  "llama-bench), and llama-server through its HTTP API (one request at a time, the context filled "
                  "through its prompt cache; the client's clock, the server's own timings beside it).", "",
                  side_by_side, ""]
    return lines


def _markdown(results: ModelResults, name, inspection, records, fit, components, written, sources, series) -> str:
    plot_names = {p.stem for p in written}
    lines = [f"# {name}: KV efficiency report", "",
             f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} by llamabench from "
             + ", ".join(f"`{shown_path(s)}`" for s in sources) + ". Nothing was run to write it: every number "
             "comes from the records in those files, and each says whether it is computed from the GGUF (theory) or "
             "measured (llama.cpp's allocation lines, timed runs).", "",
             "## Layer layout", "", _layout_md(inspection), "", records[0]["kv_bytes_basis"] + ".", "",
             f"Trained context: {inspection.geometry.n_ctx_train:,} tokens"
             + (f"; the report's n_ctx {inspection.footprint.shape.n_ctx:,} is beyond it"
                if inspection.beyond_trained_context else "") + ".", ""]
    if "kv_vs_context" in plot_names:
        lines += ["![KV against context](kv_vs_context.png)", ""]
    lines += ["## Theory against llama.cpp", ""]
    if components:
        lines.append(render_markdown(["component", "theory MiB", "llama.cpp MiB"],
                                     [[c, "-" if t is None else f"{t:.2f}", "-" if m is None else f"{m:.2f}"]
                                      for c, t, m in components], align="lrr"))
        lines += ["", "![theory against measured](theory_vs_measured.png)", ""]
    for v in results.verify:
        status = "all equal" if v.ok else "MISMATCH"
        lines.append(f"- dry run at n_ctx {v.params.n_ctx:,} (K {v.params.type_k}, V {v.params.type_v}) on "
                     f"{v.host}: {status} ({len(v.checks)} checks)")
    lines.append("")
    if fit:
        lines += ["## Does it fit?", "", markdown_report(fit), ""]
        if "budget" in plot_names:
            lines += ["![memory budget](budget.png)", ""]
    if results.bench:
        lines += _speed_md(results.bench, plot_names)
    if series:
        lines += ["## Speed against the bytes each token reads", "",
                  "Each decoded token reads its active weights, the KV of every cached layer up to its depth (SWA "
                  "layers up to their window) and the recurrent state; the model time per token = bytes / bandwidth "
                  "+ attention FLOPs / compute is fitted on every measured depth bench did not mark noisy (least "
                  "squares on the relative error, not an exact fit through two points); the error column says how "
                  "far each measured depth lies from it. The full-GQA column is the same model with every mixer "
                  "layer cached as full attention"
                  + ("; on a geometry twin it is left out ('-'): the twin's weights are a few MiB where the model's "
                     "are GiB, so the KV bytes the layout saves weigh many times what they weigh in the model (the "
                     "model's own: `llamabench roofline MODEL --card CARD`, which prices the full-GQA layout beside)"
                     if any(r.model.is_twin for r in results.bench) else "") + ".", "", _roofline_md(series)]
        if "roofline" in plot_names:
            lines += ["![roofline](roofline.png)", ""]
    if results.quality_rows:
        texts = {f"{r.text.name} ({r.text.n_tokens:,} tokens, sha256 {r.text.sha256[:16]})"
                 for _, r in results.quality_rows}
        lines += ["## What the lossy choices cost (measured)", "",
                  "Each row is a lossy choice against its base, measured as llama-perplexity --kl-divergence measures "
                  "it (llamabench quality): the KV types against f16 KV of the same model, the weights against the "
                  "base model's logits. Text: " + "; ".join(sorted(texts)) + ".", "",
                  render_quality_rows([row for row, _ in results.quality_rows], "md"), ""]
        if "quality" in plot_names:
            lines += ["![quality against context](quality.png)", ""]
    lines += ["## kv_efficiency record", "", "```json",
              json.dumps(records if len(records) > 1 else records[0], indent=2), "```", ""]
    source = (results.bench or results.verify or results.inspect)[-1]
    lines += ["## Machine and versions", "", "```json",
              json.dumps({k: v for k, v in source.to_dict().items() if k in ("machine", "versions")}, indent=2),
              "```", ""]
    return "\n".join(lines)
