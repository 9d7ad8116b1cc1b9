"""The `fit` job: gather the four parts (weights, KV + state, compute, reserve), search, verify.

The I/O side of fit.py: picks the file llama.cpp sizes (the GGUF itself, or a full-size shape twin
for a catalog id), runs the dry runs that give the compute buffer, and renders the verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

from . import engine, gguf_file
from .alloc_log import MIB
from .errors import LlamabenchError
from .fit import FitRow, Fitter, recommend
from .footprint import CacheSettings
from .layout import geometry_from_metadata
from .model_source import ResolvedModel
from .tables import render_table
from .units import GIB
from .weights import WeightsBreakdown, breakdown

GGML_TYPE_IDS = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}


class ComputeProbe:
    """llama.cpp's compute (+ output) buffer for given settings, from no_alloc dry runs, memoised."""

    def __init__(self, path: str):
        self.path = path
        self._model: engine.DryRunModel | None = None
        self._memo: dict[tuple, int] = {}
        self.backends: set[str] = set()
        self.calls = 0

    def __call__(self, settings: CacheSettings) -> int:
        key = (settings.n_ctx, settings.type_k, settings.type_v, settings.flash_attn, settings.n_ubatch, settings.n_seq)
        if key not in self._memo:
            if self._model is None:
                self._model = engine.DryRunModel(self.path)
            dry = self._model.context(settings)
            self.calls += 1
            alloc = dry.allocations
            self.backends |= set(alloc.compute_buffers_mib)
            mib = sum(alloc.compute_buffers_mib.values()) + sum(alloc.output_buffers_mib.values())
            self._memo[key] = round(mib * MIB)
        return self._memo[key]

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None


@dataclass
class FitResult:
    model_name: str
    architecture: str
    basis: dict[str, str]
    rows: list[FitRow]
    budgets: list[tuple[str, int]]
    contexts: list[int]
    n_layer_all: int
    model_hint: str
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def recommended(self, label: str, n_ctx: int) -> FitRow | None:
        return recommend([r for r in self.rows if r.budget_label == label and r.settings.n_ctx == n_ctx])

    def to_dict(self) -> dict:
        def row(r: FitRow) -> dict:
            return {"budget": r.budget_label, "budget_bytes": r.budget_bytes, "n_ctx": r.settings.n_ctx,
                    "type_k": r.settings.type_k, "type_v": r.settings.type_v, "flash_attn": r.settings.flash_attn,
                    "placement": r.placement.describe(self.n_layer_all), "n_gpu_layers": r.placement.n_gpu_layers(self.n_layer_all),
                    "n_cpu_moe": r.placement.n_cpu_moe, "weights_bytes": r.parts.weights, "kv_bytes": r.parts.kv,
                    "recurrent_bytes": r.parts.recurrent, "compute_bytes": r.parts.compute, "reserve_bytes": r.parts.reserve,
                    "total_bytes": r.parts.total, "fits": r.fits, "short_by_bytes": r.short_by, "max_n_ctx": r.max_n_ctx}

        recs = []
        for label, _ in self.budgets:
            for n_ctx in self.contexts:
                best = self.recommended(label, n_ctx)
                recs.append({"budget": label, "n_ctx": n_ctx, "fits": best is not None,
                             "row": row(best) if best else None,
                             "llama_cpp": self.llama_cpp_command(best) if best else None,
                             "python": self.python_call(best) if best else None})
        return {"model": self.model_name, "architecture": self.architecture, "basis": self.basis,
                "rows": [row(r) for r in self.rows], "recommendations": recs, "seconds": round(self.seconds, 3),
                "notes": self.notes}

    def llama_cpp_command(self, r: FitRow) -> str:
        s, p = r.settings, r.placement
        ngl = "99" if p.kind in ("all", "n_cpu_moe") else str(p.value)
        cmd = f"llama-server -m {self.model_hint} -c {s.n_ctx} -ngl {ngl} -fa {'on' if s.flash_attn else 'off'}"
        cmd += f" -ctk {s.type_k} -ctv {s.type_v}"
        if p.kind == "n_cpu_moe":
            cmd += f" --n-cpu-moe {p.value}"
        return cmd

    def python_call(self, r: FitRow) -> str:
        if r.placement.kind == "n_cpu_moe":
            # Llama() has no tensor buffer overrides, so it cannot keep experts in RAM: offer the -ngl row
            alt = [x for x in self.rows if x.budget_label == r.budget_label and x.settings == r.settings
                   and x.placement.kind == "ngl" and x.fits]
            if not alt:
                return "# llama_cpp.Llama() cannot keep experts in RAM (no tensor buffer overrides): use llama-server"
            return self.python_call(alt[0]) + "  # Llama() cannot keep experts in RAM: fewer layers on the card instead"
        s, p = r.settings, r.placement
        ngl = "-1" if p.kind == "all" else str(p.value)
        return (f'llama_cpp.Llama(model_path="{self.model_hint}", n_ctx={s.n_ctx}, n_gpu_layers={ngl}, '
                f"flash_attn={s.flash_attn}, type_k={GGML_TYPE_IDS[s.type_k]}, type_v={GGML_TYPE_IDS[s.type_v]}, "
                f"swa_full=False)")

    def render(self) -> str:
        gib = lambda b: f"{b / GIB:.2f}"  # noqa: E731
        out = [f"{self.model_name} ({self.architecture}): fit at n_ctx {', '.join(map(str, self.contexts))}"]
        out += [f"  {k:<10} {v}" for k, v in self.basis.items()]
        for label, budget in self.budgets:
            for n_ctx in self.contexts:
                rows = [r for r in self.rows if r.budget_label == label and r.settings.n_ctx == n_ctx]
                out.append("")
                out.append(f"{label} (budget {gib(budget)} GiB) at n_ctx {n_ctx}, flash attention "
                           f"{'on' if rows[0].settings.flash_attn else 'off'}; parts in GiB")
                table = [[f"{r.settings.type_k}/{r.settings.type_v}", r.placement.describe(self.n_layer_all),
                          gib(r.parts.weights), gib(r.parts.kv), gib(r.parts.recurrent), gib(r.parts.compute),
                          gib(r.parts.reserve), gib(r.parts.total), "yes" if r.fits else f"no (-{gib(r.short_by)})",
                          str(r.max_n_ctx) if r.max_n_ctx else "none"] for r in rows]
                out.append(render_table(["K/V", "placement", "weights", "KV", "recurrent", "compute", "reserve",
                                         "total", "fits", "max n_ctx"], table, align="llrrrrrrlr"))
                best = recommend(rows)
                if best:
                    out.append(f"-> fits with {best.settings.type_k}/{best.settings.type_v} KV, "
                               f"{best.placement.describe(self.n_layer_all)}:")
                    out.append(f"   {self.llama_cpp_command(best)}")
                    out.append(f"   {self.python_call(best)}")
                else:
                    closest = min(rows, key=lambda r: r.short_by)
                    out.append(f"-> nothing fits: closest is {closest.settings.type_k}/{closest.settings.type_v} KV, "
                               f"{closest.placement.describe(self.n_layer_all)}, short by {gib(closest.short_by)} GiB; "
                               f"largest context that fits: "
                               f"{max((r.max_n_ctx for r in rows), default=0) or 'none'}")
        out += [""] + [f"note: {n}" for n in self.notes]
        out.append(f"({len(self.rows)} rows in {self.seconds:.1f} s)")
        return "\n".join(out)


class FitSession:
    def __init__(self, *, name, architecture, geometry, weights: WeightsBreakdown, probe: ComputeProbe, basis: dict,
                 model_hint: str, gpu_build: bool, verify_path: str | None, flash_attn: bool, n_ubatch: int,
                 reserve: int, notes: list[str]):
        self.name, self.architecture, self.geometry, self.weights = name, architecture, geometry, weights
        self.probe, self.basis, self.model_hint, self.gpu_build = probe, basis, model_hint, gpu_build
        self.verify_path, self.flash_attn, self.n_ubatch, self.reserve, self.notes = verify_path, flash_attn, n_ubatch, reserve, notes

    @classmethod
    def open(cls, resolved: ResolvedModel, *, flash_attn: bool, n_ubatch: int, reserve: int, verify: bool) -> "FitSession":
        from .twin.cache import cached_twin
        from .twin.shape import cached_shape_twin

        gpu_build = engine.supports_gpu_offload()
        backend = "CUDA/GPU" if gpu_build else "CPU"
        notes = []
        if verify or resolved.path:
            path = str(resolved.path) if resolved.path else str(cached_twin(resolved.metadata, resolved.label))
            meta = gguf_file.read_metadata(path)
            what = "the GGUF's tensor infos" if resolved.path else "the geometry twin's tensor infos (verify runs on the twin)"
            weights_basis = f"{what}: {sum(t.n_bytes for t in meta.tensors) / GIB:.2f} GiB"
            scale = None
            hint = path
        else:
            path = str(cached_shape_twin(resolved.metadata, resolved.label))
            meta = gguf_file.read_metadata(path)
            quants = resolved.entry.published_quants if resolved.entry else ()
            chosen = next((q for q in quants if q.name == "Q4_K_M"), quants[0] if quants else None)
            if chosen:
                scale = chosen.bytes
                weights_basis = (f"published {chosen.name} file size {chosen.bytes / 1e9:.2f} GB (models.toml), spread over "
                                 f"tensors by parameter count: an estimate")
                hint = f"{resolved.label}-{chosen.name}.gguf"
            else:
                scale = None
                weights_basis = "no published size in the catalog: every matrix at q4_0 (estimate)"
                hint = f"{resolved.label}.gguf"
        geometry = geometry_from_metadata(meta)
        recurrent = {layer.index for layer in geometry.layers if layer.has_recurrent_state}
        weights = breakdown(meta.tensors, geometry.n_layer, recurrent, basis=weights_basis, scale_to_bytes=scale)
        compute_source = ("the GGUF" if resolved.path else
                          "the geometry twin" if verify else "a full-size shape twin (real shapes and vocabulary, zero data)")
        ram_mode = verify and not gpu_build
        basis = {
            "weights": weights_basis + ("; all in system RAM (CPU build, --ram budget)" if ram_mode
                                        else "; token embeddings stay in system RAM, as in llama.cpp"),
            "KV": "computed from the GGUF metadata (exact; `llamabench verify` checks it against llama.cpp)",
            "recurrent": "computed from the GGUF metadata (exact, f32)",
            "compute": f"llama.cpp's own no_alloc dry run of {compute_source} on the {backend} backend"
                       + ("" if gpu_build else "; a CUDA build may differ"),
            "reserve": ("none in system RAM (the --ram budget is all usable)" if ram_mode
                        else f"{reserve / MIB:.0f} MiB kept free for the driver and display (--reserve)"),
        }
        if geometry.has_swa:
            notes.append("SWA layers sized with swa_full off (llama-server's default; Llama(swa_full=False))")
        return cls(name=resolved.metadata.display_name, architecture=geometry.architecture, geometry=geometry,
                   weights=weights, probe=ComputeProbe(path), basis=basis, model_hint=hint, gpu_build=gpu_build,
                   verify_path=path if verify else None, flash_attn=flash_attn, n_ubatch=n_ubatch, reserve=reserve,
                   notes=notes)

    def evaluate(self, budgets: list[tuple[str, int]], contexts: list[int], pairs: list[tuple[str, str]]) -> FitResult:
        ram_mode = self.verify_path is not None and not self.gpu_build
        fitter = Fitter(self.geometry, self.weights, self.probe, reserve=0 if ram_mode else self.reserve, ram_mode=ram_mode)
        rows = []
        try:
            for label, budget in budgets:
                for n_ctx in contexts:
                    for type_k, type_v in pairs:
                        settings = CacheSettings(n_ctx=n_ctx, type_k=type_k, type_v=type_v, flash_attn=self.flash_attn,
                                                 n_ubatch=self.n_ubatch)
                        try:
                            rows += fitter.rows(label, budget, settings)
                        except LlamabenchError as exc:
                            self.notes.append(f"{type_k}/{type_v}: {exc}")
        finally:
            self.probe.close()
        if not rows:
            raise LlamabenchError("no cache-type choice could be evaluated: " + "; ".join(self.notes))
        return FitResult(self.name, self.architecture, self.basis, rows, budgets, contexts, self.weights.n_layer,
                         self.model_hint, notes=self.notes)

    def verify(self, result: FitResult) -> dict:
        label, budget = result.budgets[0]
        n_ctx = result.contexts[0]
        candidates = [r for r in result.rows if r.budget_label == label and r.settings.n_ctx == n_ctx
                      and r.placement.kind != "n_cpu_moe"]
        best = recommend(candidates)
        if best is None:
            return {"ok": False, "error": f"nothing fits {label} at n_ctx {n_ctx}, so there is nothing to create"}
        n_gpu_layers = best.placement.n_gpu_layers(self.weights.n_layer) if self.gpu_build else 0
        job = {"path": self.verify_path, "n_ctx": best.settings.n_ctx, "type_k": best.settings.type_k,
               "type_v": best.settings.type_v, "flash_attn": best.settings.flash_attn, "n_ubatch": best.settings.n_ubatch,
               "n_gpu_layers": n_gpu_layers, "extra_bufts": False}
        proc = subprocess.run([sys.executable, "-m", "llamabench.fit_child"], input=json.dumps(job), capture_output=True,
                              text=True, timeout=600)
        try:
            measured = json.loads(proc.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return {"ok": False, "error": f"the verification child failed: {proc.stderr.strip()[-300:]}"}
        if "error" in measured:
            return {"ok": False, "error": measured["error"]}
        alloc = measured["allocations"]
        weights_m = round(sum(alloc["model_buffers_mib"].values()) * MIB)
        kv_m = round(sum(c["size_mib"] for c in alloc["kv_caches"]) * MIB)
        rec_m = round(sum(r["size_mib"] for r in alloc["recurrent"]) * MIB)
        comp_m = round((sum(alloc["compute_buffers_mib"].values()) + sum(alloc["output_buffers_mib"].values())) * MIB)
        p = best.parts
        parts = [("weights", p.weights, weights_m), ("KV", p.kv, kv_m), ("recurrent", p.recurrent, rec_m),
                 ("compute + output", p.compute, comp_m), ("reserve", p.reserve, None)]
        predicted = p.weights + p.kv + p.recurrent + p.compute
        measured_total = weights_m + kv_m + rec_m + comp_m
        tolerance = 2 * MIB + predicted // 200  # printed MiB rounding and file-mapping padding
        return {
            "what": f"n_ctx {best.settings.n_ctx}, {best.settings.type_k}/{best.settings.type_v} KV, "
                    f"{best.placement.describe(self.weights.n_layer)}",
            "where": "GPU, NVML" if self.gpu_build else "system RAM, CPU build",
            "parts": parts, "predicted_total": predicted, "measured_total": measured_total,
            "rss_delta": measured["rss_after_bytes"] - measured["rss_before_bytes"],
            "gpu_delta": None if measured.get("gpu_used_before_bytes") is None
            else measured["gpu_used_after_bytes"] - measured["gpu_used_before_bytes"],
            "budget": budget - best.parts.reserve, "ok": abs(measured_total - predicted) <= tolerance,
            "n_ctx": best.settings.n_ctx,
        }
