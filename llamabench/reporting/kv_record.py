"""kv_efficiency records: the layout in words, the theory, and measured_* only where a timed run backs them. Pure."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core import serial
from ..memory.allocations import bytes_equal
from ..memory.fit_result import FitResult
from ..memory.footprint import compute_footprint, pad
from ..memory.inspection import Inspection
from ..records.bench import BenchRecord
from ..records.inspect import VerifyRecord
from ..records.quality import QualityRow, ScoredTextRef
from ..render.table import compress_indices
from ..settings.values import Runtime

KIND_WORDS = {
    "full": "full_attention",
    "swa": "sliding_window_attention",
    "recurrent": "linear_attention/SSM (fixed recurrent state)",
    "full+recurrent": "attention and SSM in parallel",
    "mla": "MLA (compressed, K-only)",
    "none": "FFN-only (no cache)",
}
BYTES_PER_ELEMENT = {"f32": "4 bytes", "f16": "2 bytes", "bf16": "2 bytes"}


@dataclass(frozen=True)
class KvEfficiencyRecord:
    """One kv_efficiency record (record.json): measured_* are None where no timed run backs them."""

    id: str
    model: str
    kv_bytes_basis: str
    methodology: str
    notes: str
    engine_id: str
    context_length: int
    n_ctx_train: int
    kv_bytes_per_token: int
    full_gqa_kv_bytes_per_token: int
    kv_bytes_at_context: int
    recurrent_state_bytes: int
    measured_kv_bytes: int | None = None
    measured_prefill_tok_s: float | None = None
    measured_decode_tok_s: float | None = None
    measured_depth: int | None = None
    measured_bytes_per_token_basis: str | None = None
    type_k: str = "f16"  # the KV types of the figures; f16 is the base the quality of the others is measured against
    type_v: str = "f16"
    # a lossy KV type's measured quality against f16 KV (llamabench quality); None where no run measured it
    measured_kld_mean: float | None = None
    measured_kld_p99: float | None = None
    measured_ppl_ratio: float | None = None
    measured_same_top_p: float | None = None  # %
    measured_quality_text: str | None = None  # the text, its tokens and sha256
    measured_quality_n_ctx: int | None = None
    measured_quality_chunks: int | None = None

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "KvEfficiencyRecord":
        return serial.from_dict(cls, data)


def _per_token_formula(ins: Inspection) -> str:
    cached = [layer for layer in ins.geometry.layers if layer.kind in ("full", "full+recurrent", "mla")]
    total = ins.footprint.kv_bytes_per_token
    type_k, type_v = ins.footprint.params.type_k, ins.footprint.params.type_v
    widths = {(layer.n_head_kv, layer.k_width, layer.v_width) for layer in cached}
    if len(widths) == 1 and type_k == type_v and type_k in BYTES_PER_ELEMENT:
        heads, k_width, v_width = widths.pop()
        unit = f"{BYTES_PER_ELEMENT[type_k]} ({type_k})"
        if v_width == 0:
            return f"{len(cached)} x {k_width} latent K values x {unit} = {total:,} B/token"
        if k_width == v_width and heads:
            return (f"{len(cached)} x {heads} KV heads x {k_width // heads} head dim x 2 (K and V) x {unit} "
                    f"= {total:,} B/token")
        return f"{len(cached)} x ({k_width} K + {v_width} V values) x {unit} = {total:,} B/token"
    return f"{len(cached)} cached layers at K {type_k} / V {type_v} = {total:,} B/token"


def kv_bytes_basis(ins: Inspection) -> str:
    layers = ins.geometry.layers
    fp = ins.footprint
    groups: dict[str, list[int]] = {}
    for layer in layers:
        groups.setdefault(str(layer.kind), []).append(layer.index)
    parts = []
    for kind, indices in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        text = f"{len(indices)} are {KIND_WORDS.get(kind, kind)}"
        if len(indices) < len(layers):
            text += f" (indices {compress_indices(indices).replace(', ', ',')})"
        parts.append(text)
    head = f"{ins.geometry.n_layer} layers, of which " + (" and ".join(parts) if len(parts) <= 2 else
                                                           ", ".join(parts[:-1]) + " and " + parts[-1])
    text = head + "; growing KV: " + _per_token_formula(ins)
    if fp.swa_kv_bytes:
        text += (f"; sliding-window layers hold at most {fp.shape.swa_cells:,} cells "
                 f"({fp.swa_kv_bytes / 2**20:.2f} MiB at n_ctx {fp.shape.n_ctx:,})")
    n_mixer = len(ins.geometry.mixer_layers)
    if fp.reduces:
        text += (f", against {fp.full_gqa_kv_bytes_per_token:,} B/token if all {n_mixer} layers were full GQA: "
                 f"a {fp.reduction:.1f}x reduction")
    elif fp.reduction:  # every mixer layer is full attention already: no reduction to speak of
        text += f", as full GQA (all {n_mixer} layers cache full attention)"
    if fp.recurrent_state_bytes:
        text += (f"; plus {state_per_sequence(fp):,} B of recurrent state per sequence, "
                 f"independent of context length")
    return text


def state_per_sequence(fp) -> int:
    """One sequence's recurrent state: the record's basis, whatever slots the inspection was sized for."""
    return fp.recurrent_state_bytes // max(1, fp.params.n_seq)


@dataclass(frozen=True)
class MeasuredQuality:
    """A quality row of a lossy KV type against f16 KV, and the text it was scored on."""

    row: QualityRow
    text: ScoredTextRef

    @property
    def text_words(self) -> str:
        return f"{self.text.name}, {self.text.n_tokens:,} tokens, sha256 {self.text.sha256[:16]}"


def _timed(bench: list[BenchRecord], n_ctx: int, kv_types: tuple[str, str] = ("f16", "f16")) -> list[BenchRecord]:
    """The timed tests of these KV types at this context from one machine (the one measured last); Llama() contexts
    where there are any (the methodology's), else llama-server's."""
    ok = [r for r in bench if r.ok and pad(r.params.n_ctx) == n_ctx and (r.params.type_k, r.params.type_v) == kv_types]
    ok = [r for r in ok if r.runtime != Runtime.LLAMA_SERVER] or ok
    if not ok:
        return []
    series = max(ok, key=lambda r: r.timestamp).series
    return [r for r in ok if r.series == series]


def _by_depth(timed: list[BenchRecord]) -> list[dict]:
    """Prefill and decode t/s of the timed tests at each depth, shallowest first."""
    out = []
    for d in sorted({r.test.depth for r in timed}):
        pp = [r for r in timed if r.test.depth == d and r.test.kind == "pp"]
        tg = [r for r in timed if r.test.depth == d and r.test.kind == "tg"]
        out.append({"depth": d, "prefill_tok_s": round(pp[0].avg_ts, 2) if pp else None,
                    "decode_tok_s": round(tg[0].avg_ts, 2) if tg else None,
                    "tests": [r.test.name for r in pp + tg]})
    return out


def _quality_methodology(kv_types: tuple[str, str], quality: MeasuredQuality | None) -> str:
    if kv_types == ("f16", "f16"):
        return "f16 K/V is the base the quality of lossy KV types is measured against: no quality delta of its own"
    if quality is None:
        return (f"no quality run for K {kv_types[0]} / V {kv_types[1]}: measured_kld_* and the other quality fields "
                "are null (llamabench quality MODEL -ctk ... -ctv ... measures them)")
    row = quality.row
    return (f"measured_kld_mean, measured_kld_p99, measured_ppl_ratio and measured_same_top_p are K {row.type_k} / V "
            f"{row.type_v} against f16 KV of the same model, measured as llama-perplexity --kl-divergence measures "
            f"them (llamabench quality) on {quality.text_words}, n_ctx {row.n_ctx:,}, {row.chunks} chunks "
            f"({row.n_tokens_scored:,} tokens scored)")


def _methodology(context_length: int, verify: list[VerifyRecord], timed: list[BenchRecord], by_depth: list[dict],
                 fit: FitResult | None, kv_types: tuple[str, str] = ("f16", "f16"),
                 quality: MeasuredQuality | None = None) -> list[str]:
    """How each figure of the record was obtained."""
    verified = [v for v in verify if v.params.n_ctx == context_length and v.footprint is not None
                and (v.params.type_k, v.params.type_v) == kv_types]
    types = "f16 K/V" if kv_types == ("f16", "f16") else f"K {kv_types[0]} / V {kv_types[1]}"
    methodology = [f"kv_bytes_per_token, kv_bytes_at_context and recurrent_state_bytes are derived from the GGUF "
                   f"metadata with llama.cpp's sizing rules (llamabench inspect), {types}, 1 sequence, "
                   f"n_ctx {context_length:,} after llama.cpp's rounding"]
    methodology.append("the runtime of these figures: one llama.cpp context as llama-cpp-python's Llama() and "
                       "llama-bench create it (1 sequence)")
    if fit is not None:
        rows = [r for r in fit.rows if r.settings.n_ctx == context_length
                and (r.settings.type_k, r.settings.type_v) == kv_types]
        sized = f"the fit in this report was sized for {fit.runtime.describe()}"
        if rows:
            sized += (f"; its context at n_ctx {context_length:,} holds {rows[0].parts.kv + rows[0].host.kv:,} B of "
                      f"KV and {rows[0].parts.recurrent + rows[0].host.recurrent:,} B of recurrent state")
        methodology.append(sized)
    if verified:
        ok = all(v.ok for v in verified)
        methodology.append("checked against llama.cpp's own `llama_kv_cache: size` / `llama_memory_recurrent: size` "
                           f"lines in a no_alloc dry run (llamabench verify): {'equal' if ok else 'MISMATCH'}")
    if timed:
        first = timed[0]
        methodology.append(
            f"measured_kv_bytes is the KV that a real llama.cpp context at n_ctx {context_length:,} allocated "
            f"(its printed MiB x 2^20); measured_prefill_tok_s / measured_decode_tok_s are the mean over "
            f"{first.repetitions} repetitions of {', '.join(by_depth[-1]['tests'])} at depth {by_depth[-1]['depth']:,} "
            f"in a timed run on {first.series} ({first.params.n_threads} threads)")
    else:
        methodology.append("no timed run at this context: measured_kv_bytes and the measured speeds are null")
    methodology.append(_quality_methodology(kv_types, quality))
    return methodology


def _notes(ins: Inspection, bench: list[BenchRecord], timed: list[BenchRecord], by_depth: list[dict],
           context_length: int, kv_bytes_at_context: int, measured_kv: int | None) -> list[str]:
    notes = []
    if timed and timed[0].model.is_twin:
        notes.append("timed on the geometry twin (real layer layout, KV and recurrent geometry; tiny hidden size, "
                     "vocabulary and experts): KV bytes are the real model's, tok/s show how speed changes with "
                     "depth, not the real model's absolute speed")
    if timed and by_depth:
        notes.append("by depth: " + "; ".join(
            f"d{b['depth']}: prefill {b['prefill_tok_s']} t/s, decode {b['decode_tok_s']} t/s" for b in by_depth))
    others = (sorted({r.series for r in bench if r.ok and pad(r.params.n_ctx) == context_length} - {timed[0].series})
              if timed else [])
    if others:
        notes.append("also measured on: " + ", ".join(others) + " (see report.md)")
    if measured_kv is not None and not bytes_equal(measured_kv, kv_bytes_at_context):
        notes.append(f"measured KV differs from theory by {(measured_kv - kv_bytes_at_context) / 2**20:+.2f} MiB")
    if ins.beyond_trained_context:
        notes.append(f"n_ctx {context_length:,} is beyond the trained context {ins.geometry.n_ctx_train:,}")
    return notes


def _bytes_basis(timed: list[BenchRecord], depth: int | None) -> str | None:
    """What decode at the deepest timed depth reads per token, and the bandwidth that makes."""
    deepest_tg = [r for r in timed if r.test.kind == "tg" and r.test.depth == depth and r.roofline]
    if not deepest_tg:
        return None
    rf = deepest_tg[0].roofline
    return (f"decode at depth {depth:,} reads {rf.bytes_per_token:,} B per token (weights "
            f"{rf.weights_bytes:,} + KV {rf.kv_read_bytes:,} + recurrent state read and written "
            f"{rf.recurrent_bytes:,}); at {deepest_tg[0].avg_ts:.2f} t/s that is "
            f"{rf.achieved_gbps} GB/s" + (f", {rf.mbu * 100:.1f}% of the measured {rf.peak_gbps} GB/s"
                                          if rf.mbu else ""))


def build_record(label: str, model_name: str, ins: Inspection, verify: list[VerifyRecord], bench: list[BenchRecord],
                 context_length: int, kv_bytes_at_context: int, fit: FitResult | None = None, *,
                 kv_types: tuple[str, str] = ("f16", "f16"),
                 quality: MeasuredQuality | None = None) -> KvEfficiencyRecord:
    """One kv_efficiency record at one context length and KV types (f16 unless said); measured_* stay None without a
    timed run, and a lossy type's quality fields without a quality run."""
    hybrid = any(layer.kind != "full" for layer in ins.geometry.layers)
    ctx_k = f"{context_length // 1024}k" if context_length % 1024 == 0 else str(context_length)
    if kv_types != ("f16", "f16"):
        ins = replace(ins, footprint=compute_footprint(ins.geometry, ins.footprint.params.replace(
            type_k=kv_types[0], type_v=kv_types[1])))
    timed = _timed(bench, context_length, kv_types)
    by_depth = _by_depth(timed)
    measured_kv = (timed[0].allocations.kv_bytes if timed[0].allocations else None) if timed else None
    if timed and timed[0].footprint is not None:  # theory of the context the timed run created (its sequences:
        kv_bytes_at_context = timed[0].footprint.kv_bytes  # Llama()'s one, where inspect sizes llama-server's four)
    depth = by_depth[-1]["depth"] if by_depth else None
    measured_pp = by_depth[-1]["prefill_tok_s"] if by_depth else None
    measured_tg = by_depth[-1]["decode_tok_s"] if by_depth else None
    build = None
    for source in timed[:1] or verify[:1]:
        build = source.versions.llama_cpp_python
    engine_id = f"llama-cpp (llama-cpp-python {build})" if build else "llama-cpp"
    methodology = _methodology(context_length, verify, timed, by_depth, fit, kv_types, quality)
    notes = _notes(ins, bench, timed, by_depth, context_length, kv_bytes_at_context, measured_kv)
    fp = ins.footprint
    types = "" if kv_types == ("f16", "f16") else (
        f"-{kv_types[0]}" if kv_types[0] == kv_types[1] else f"-k{kv_types[0]}-v{kv_types[1]}")
    row = quality.row if quality else None
    return KvEfficiencyRecord(
        id=f"kv-efficiency/{label}-{'hybrid-' if hybrid else ''}kv-{ctx_k}{types}", model=model_name,
        kv_bytes_basis=kv_bytes_basis(ins), methodology="; ".join(methodology), notes="; ".join(notes),
        engine_id=engine_id, context_length=context_length, n_ctx_train=ins.geometry.n_ctx_train,
        kv_bytes_per_token=fp.kv_bytes_per_token, full_gqa_kv_bytes_per_token=fp.full_gqa_kv_bytes_per_token,
        kv_bytes_at_context=kv_bytes_at_context, recurrent_state_bytes=state_per_sequence(fp),
        measured_kv_bytes=measured_kv, measured_prefill_tok_s=measured_pp, measured_decode_tok_s=measured_tg,
        measured_depth=depth, measured_bytes_per_token_basis=_bytes_basis(timed, depth),
        type_k=kv_types[0], type_v=kv_types[1],
        measured_kld_mean=row.kld_mean if row else None, measured_kld_p99=row.kld_p99 if row else None,
        measured_ppl_ratio=row.ppl_ratio if row else None, measured_same_top_p=row.same_top_p if row else None,
        measured_quality_text=quality.text_words if quality else None,
        measured_quality_n_ctx=row.n_ctx if row else None, measured_quality_chunks=row.chunks if row else None)
