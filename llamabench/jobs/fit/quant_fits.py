"""`fit -hf OWNER/REPO --quant all`'s answer: every quant fitted from its header, each said in lines, and the largest
file that fits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

from ...core import serial
from ...core.errors import LlamabenchError
from ...core.safe_text import escaped
from ...records.fit import FitRecord
from ...records.quality import QualityRow
from ...runtimes.registry import run_line
from ..source import resolve
from ..twin.shape import file_in_quant, published_weights
from .advice import describe_row
from .quants import QuantLine, ReadQuant, RepoQuants, SweepWatch


@dataclass(frozen=True)
class QuantFit:
    """One quant of a repository: its file, size and bits per weight, and its whole fit answer (None: its header
    could not be read, `error` says why)."""

    quant: str
    file: str
    model: str  # hf://OWNER/REPO/FILE
    size_bytes: int
    n_params: int
    record: FitRecord | None = None
    error: str | None = None
    quality: QualityRow | None = None  # the weights' KLD against a base, where the results file measured it

    @property
    def bits_per_weight(self) -> float | None:
        return self.size_bytes * 8 / self.n_params if self.n_params and self.size_bytes else None

    def lines(self) -> tuple[QuantLine, ...]:
        """The answer at each budget and context (without speculative decoding)."""
        if self.record is None:
            return ()
        result = self.record.fit
        out = []
        for budget in result.budgets:
            for n_ctx in result.contexts:
                rows = result.rows_for(budget.label, n_ctx)
                if not rows:
                    continue
                best = result.recommended(budget.label, n_ctx)
                row = best or min(rows, key=lambda r: r.short_by)
                out.append(QuantLine(budget.label, n_ctx, f"{row.settings.type_k}/{row.settings.type_v}",
                                     describe_row(row, result.n_layer_all), best is not None,
                                     0 if best else row.short_by, max(r.max_n_ctx for r in rows),
                                     run_line(result, best) if best else ""))
        return tuple(out)


@dataclass(frozen=True)
class QuantFits:
    """`fit -hf OWNER/REPO --quant all`: every quant asked, fitted from its header, and the largest that fits."""

    repo: str
    quants: tuple[QuantFit, ...]
    bytes_read: int = 0
    seconds: float = 0.0

    def best(self, budget: str | None = None, n_ctx: int | None = None) -> tuple[QuantFit, QuantLine] | None:
        """The largest file that fits the (first) budget and context with some KV type."""
        fitting = [(q, line) for q in self.quants for line in q.lines() if line.fits
                   and (budget is None or line.budget == budget) and (n_ctx is None or line.n_ctx == n_ctx)]
        first = fitting[0][1] if fitting else None
        if budget is None and first is not None:  # the first budget and context of the answer
            fitting = [(q, line) for q, line in fitting if (line.budget, line.n_ctx) == (first.budget, first.n_ctx)]
        return max(fitting, key=lambda pair: pair[0].size_bytes, default=None)

    def to_dict(self) -> dict:
        best = self.best()
        quants = [{"quant": q.quant, "file": q.file, "model": q.model, "size_bytes": q.size_bytes,
                   "bits_per_weight": q.bits_per_weight, "error": q.error,
                   "quality": serial.to_dict(q.quality) if q.quality else None,
                   "fit": q.record.to_dict() if q.record else None} for q in self.quants]
        return {"repo": self.repo, "bytes_read": self.bytes_read, "seconds": self.seconds, "quants": quants,
                "summary": {"best": {"quant": best[0].quant, "budget": best[1].budget, "n_ctx": best[1].n_ctx,
                                     "command": best[1].command} if best else None}}


def outcome(q: QuantFit) -> str:
    """A quant's answer in a few words, for its progress line."""
    if q.record is None:
        return "not fitted: " + escaped(q.error or "no answer")
    fits = [line for line in q.lines() if line.fits]
    return f"fits {fits[0].budget} at n_ctx {fits[0].n_ctx} with {fits[0].kv} KV" if fits else "fits no budget asked"


def _weighed(watch: SweepWatch, q: QuantFit) -> QuantFit:
    size = f", {q.size_bytes / 10**9:.2f} GB" if q.size_bytes else ""
    watch.weighed(f"{q.quant} ({escaped(q.file)}{size})", outcome(q))
    return q


def fit_each(found: RepoQuants, read: Iterable[ReadQuant], measured: dict[str, QualityRow], *,
             fit_one: Callable, keep: Callable[[FitRecord], FitRecord], watch: SweepWatch) -> tuple[QuantFit, ...]:
    """Each quant whose header was read, fitted as it arrives (`fit_one(url, source)`) and kept (`keep`: saved where
    asked), said to `watch` and within its deadline; one that cannot be read or fitted carries its error, and the
    others still answer. A quant's size is the file's as read (the server's size of each part: the tensors end
    within it), never the listing's where the header was read: a listing may say anything."""
    quants = []
    watch.total = len(found.quants)
    for r in read:
        watch.check()
        url = found.url(r.quant)
        if r.source is None:
            quants.append(_weighed(watch, QuantFit(r.quant.tag, r.quant.file, url, r.quant.size_bytes, 0,
                                                   error=r.error)))
            continue
        meta = r.source.metadata
        n_params = sum(math.prod(t.shape) for t in meta.tensors)
        try:
            record = fit_one(url, r.source)
        except LlamabenchError as exc:
            quants.append(_weighed(watch, QuantFit(r.quant.tag, r.quant.file, url, meta.file_bytes, n_params,
                                                   error=str(exc))))
            continue
        quants.append(_weighed(watch, QuantFit(r.quant.tag, r.quant.file, url, meta.file_bytes, n_params,
                                               keep(record), quality=measured.get(r.source.label))))
    return tuple(quants)


def fit_catalog_quants(model: str, names: tuple[str, ...], *, fit_one: Callable[[str], FitRecord],
                       keep: Callable[[FitRecord], FitRecord], watch: SweepWatch) -> tuple[QuantFit, ...]:
    """Each quant of a catalog model weighed (its published file, else llama.cpp's recipe for the file type on the
    model's shape twin), or of a GGUF file here (llama.cpp's recipe asked of the file itself), and fitted
    (`fit_one(name)`: fit with that --quant), said to `watch` and within its deadline; one that cannot be weighed or
    fitted carries its error, and the others still answer."""
    source = resolve(model)
    out = []
    watch.total = len(names)
    for name in names:
        watch.check()
        hint = f"{model}-{name}.gguf"
        try:
            weighed = published_weights(source, name) if source.entry else file_in_quant(source, name)
            size = weighed.scale or weighed.meta.weights_bytes
            n_params = sum(math.prod(t.shape) for t in weighed.meta.tensors)
            record = fit_one(name)
        except LlamabenchError as exc:
            out.append(_weighed(watch, QuantFit(name, hint, model, 0, 0, error=str(exc))))
            continue
        out.append(_weighed(watch, QuantFit(name, weighed.hint, model, size, n_params, keep(record))))
    return tuple(out)
