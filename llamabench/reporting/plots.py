"""The four report plots (PNG and SVG), drawn from records only. matplotlib is imported here alone."""

from __future__ import annotations

from pathlib import Path

from ..core.stats import SPREAD_WARNING
from ..core.units import GIB
from ..jobs.fit.advice import short_placement
from ..memory.footprint import KvPoint
from ..records.quality import F16_BASE
from ..settings.params import DEFAULT_N_CTX
from ..world.outputs import write_with

CARDS = (16, 24)
# every part of memory.placement.Parts, so the bars add up to its total: label -> (Parts field, colour)
BAR_PARTS = {"weights": ("weights", "#4c72b0"), "KV": ("kv", "#dd8452"), "recurrent": ("recurrent", "#55a868"),
             "compute": ("compute", "#8172b3"), "reserve": ("reserve", "#937860"),
             "mmproj": ("projector", "#c44e52")}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3, "font.size": 10})
    return plt


def _twin_note(what: str) -> str:
    """The subtitle line of a plot drawn from a geometry twin's run: without it a catalog id's numbers (the twin's
    44 MiB of weights, its t/s) read as the published model's."""
    return f"\ntimed on its geometry twin (the real layer layout, tiny widths): {what}"


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    import matplotlib.pyplot as plt

    def saver(ext: str):
        return lambda tmp: fig.savefig(tmp, format=ext, bbox_inches="tight")

    try:
        return [write_with(out_dir / f"{name}.{ext}", saver(ext), "report file") for ext in ("png", "svg")]
    finally:
        fig.clear()
        plt.close(fig)


def kv_vs_context(out_dir: Path, name: str, curve: tuple[KvPoint, ...], comparisons: dict[str, tuple[KvPoint, ...]],
                  weights_on_card: int | None, reserve: int, mark_ctx: int = DEFAULT_N_CTX, *, compute: int = 0,
                  n_ctx_train: int = 0) -> list[Path]:
    """KV (+ recurrent state) against n_ctx: this model, the same model if every layer were full attention,
    comparisons, and each card's room left after the weights, the reserve and the compute buffers (fit's)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    x = [p.n_ctx / 1024 for p in curve]
    ax.plot(x, [p.cache_bytes / GIB for p in curve], lw=2.5, label=f"{name} (KV + recurrent state)")
    ax.plot(x, [p.full_gqa_kv_bytes / GIB for p in curve], ls="--", lw=1.5,
            label=f"{name} if every layer were full attention (GQA)")
    for label, points in comparisons.items():
        ax.plot([p.n_ctx / 1024 for p in points], [p.cache_bytes / GIB for p in points], lw=1.8, label=label)
    if weights_on_card is not None:
        taken = weights_on_card + reserve + compute
        what = "weights, reserve" + (" and compute" if compute else "")
        for card in CARDS:
            left = (card * GIB - taken) / GIB
            if left > 0:
                ax.axhline(left, color="grey", ls=":", lw=1.2)
                ax.annotate(f"{card} GiB card: room left after {what} ({left:.1f} GiB)", (x[0], left),
                            textcoords="offset points", xytext=(2, 3), fontsize=8, color="dimgrey")
            else:
                ax.annotate(f"{card} GiB card: no room, the {what} ({taken / GIB:.1f} GiB) already exceed it",
                            (x[0], 0), textcoords="offset points", xytext=(2, 4), fontsize=8, color="dimgrey")
    mark = f"{mark_ctx // 1024}k"
    ax.axvline(mark_ctx / 1024, color="crimson", lw=1, alpha=0.7,
               label=f"{mark} (n_ctx {mark_ctx:,}): the context llamabench sizes for unless told (-c)")
    ax.annotate(mark, (mark_ctx / 1024, ax.get_ylim()[1] * 0.95), color="crimson", fontsize=9, xytext=(3, 0),
                textcoords="offset points")
    if n_ctx_train and n_ctx_train < curve[-1].n_ctx:  # the axis runs past what the model was trained for
        ax.axvspan(n_ctx_train / 1024, x[-1], color="grey", alpha=0.12, lw=0)
        ax.annotate(f"past the trained {n_ctx_train // 1024}k", (n_ctx_train / 1024, ax.get_ylim()[1] * 0.88),
                    fontsize=8, color="dimgrey", xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel("context length (thousands of tokens, n_ctx / 1024)")
    ax.set_ylabel("cache memory (GiB)")
    ax.set_title(f"{name}: KV cache against context length\n(f16, one sequence (-np 1; recurrent state is per "
                 "sequence, llama-server's 4 slots hold 4), computed from the metadata)", fontsize=10)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    fig.legend(fontsize=8, loc="outside lower center", ncol=2)  # below the axes: inside, it covered the curve
    return _save(fig, out_dir, "kv_vs_context")


def _bars(row) -> list[tuple[str, object, int, bool]]:
    """(label suffix, parts, budget bytes, fits) per bar: one per card of a machine with several."""
    if getattr(row, "multi", False):
        return [(f" · c{i} {c.name}", c.parts, c.budget, c.fits) for i, c in enumerate(row.devices)]
    return [("", row.parts, row.budget_bytes, row.fits)]


def _spec(row) -> str:
    """A row's speculative decoding, where it has one: its bar is not the plain row's (one label, one bar)."""
    kind = getattr(row.settings, "spec_type", "none")
    return "" if kind == "none" else ", MTP" if kind == "draft-mtp" else f", {kind}"


def budget_bars(out_dir: Path, name: str, rows: list, n_ctx: int) -> list[Path]:
    """Stacked horizontal bars per card and choice (memory.placement.FitRow): every part, the projector's too;
    a machine with several cards gets one bar per card, each against its own budget (red mark)."""
    plt = _plt()
    cards = list(dict.fromkeys(r.budget_label for r in rows))
    heights = [sum(len(_bars(r)) for r in rows if r.budget_label == c) for c in cards]
    fig, axes = plt.subplots(len(cards), 1, figsize=(8.5, 1.4 + 0.45 * sum(heights) + 0.6 * len(cards)),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights}, layout="constrained")
    for ax, card in zip(axes[:, 0], cards):
        bars = [(f"{r.settings.type_k}/{r.settings.type_v}, {short_placement(r.placement)}{_spec(r)}{suffix}", parts,
                 budget, ok)
                for r in [r for r in rows if r.budget_label == card][::-1]
                for suffix, parts, budget, ok in _bars(r)[::-1]]
        labels = [b[0] for b in bars]
        left = [0.0] * len(bars)
        for label, (part, colour) in BAR_PARTS.items():
            values = [getattr(b[1], part) / GIB for b in bars]
            if part == "projector" and not any(values):
                continue
            ax.barh(labels, values, left=left, color=colour, label=label, height=0.6)
            left = [a + v for a, v in zip(left, values)]
        for y, b in enumerate(bars):  # the verdict right of the bar and of its budget, never across the red mark
            ax.annotate("fits" if b[3] else "does not fit", (max(left[y], b[2] / GIB), y), xytext=(5, -3),
                        textcoords="offset points", fontsize=8, color="darkgreen" if b[3] else "crimson")
        ax.set_xlim(0, max(max(left), max(b[2] / GIB for b in bars)) * 1.2)  # room for the verdicts
        budgets = {b[2] for b in bars}
        if len(budgets) == 1:
            ax.axvline(budgets.pop() / GIB, color="crimson", lw=1.5)
            title = f"{card} at n_ctx {n_ctx:,}: budget {bars[0][2] / GIB:.2f} GiB (red line)"
        else:
            for y, b in enumerate(bars):
                ax.plot([b[2] / GIB] * 2, [y - 0.4, y + 0.4], color="crimson", lw=1.5)
            title = f"{card} at n_ctx {n_ctx:,}: one bar per card, each card's budget a red mark"
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
    axes[-1, 0].set_xlabel("memory on the card (GiB): weights, KV and state (theory), compute (llama.cpp dry run)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncol=len(labels))  # clear of every title
    fig.suptitle(f"{name}: what fits on the card" + ("s" if any(getattr(r, "multi", False) for r in rows) else ""))
    return _save(fig, out_dir, "budget")


def speed_vs_depth(out_dir: Path, name: str, bench: list) -> list[Path]:
    """Prefill and decode t/s against depth: one line per machine and context configuration."""
    plt = _plt()
    # constrained: the twin's second subtitle line ran over the panel titles without it
    fig, (ax_pp, ax_tg) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    series: dict[tuple, dict[str, list]] = {}
    for r in bench:
        if not r.ok:
            continue
        p = r.params
        key = (r.series, p.n_ctx, p.type_k, p.type_v, p.flash_attn)
        s = series.setdefault(key, {"pp": [], "tg": []})
        s[str(r.test.kind)].append((r.test.depth, r.avg_ts, r.stddev_ts))
        s.setdefault("noisy", []).append(bool(r.spread and r.spread > SPREAD_WARNING))
    several = len({k[0] for k in series}) > 1
    for (machine, n_ctx, tk, tv, fa), s in sorted(series.items()):
        label = ((f"{machine}: " if several else "") + f"n_ctx {n_ctx:,}, {tk}/{tv}, fa {'on' if fa else 'off'}"
                 + (f" (noisy: t/s varied > {SPREAD_WARNING:.0%})" if any(s.get("noisy", ())) else ""))
        for ax, kind in ((ax_pp, "pp"), (ax_tg, "tg")):
            pts = sorted(s[kind])
            if pts:
                ax.errorbar([q[0] for q in pts], [q[1] for q in pts], yerr=[q[2] for q in pts], marker="o",
                            capsize=3, label=label)
    for ax, title in ((ax_pp, "prefill (pp)"), (ax_tg, "decode (tg)")):
        ax.set_xlabel("depth (tokens already in the context)")
        ax.set_ylabel("tokens per second (measured)")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    twin = any(r.model.is_twin for r in bench)
    machines = sorted({k[0] for k in series})
    stand_in = _twin_note("how speed changes with depth, not the published model's speed")
    fig.suptitle(f"{name}: speed at depth" + (stand_in if twin else "")
                 + ("" if several or not machines else f", {machines[0]}"), fontsize=10)
    return _save(fig, out_dir, "speed_vs_depth")


def theory_vs_measured(out_dir: Path, name: str, components: list[tuple[str, float | None, float | None]], *,
                       twin: bool = False) -> list[Path]:
    """Grouped bars per component: theory against what llama.cpp allocated (MiB); `twin`: sized on the geometry
    twin, whose KV and state are the published model's but whose weights and compute buffer are its own."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.4) if twin else (7.5, 4.2), layout="constrained")
    xs = range(len(components))
    theory = [c[1] if c[1] is not None else 0 for c in components]
    measured = [c[2] if c[2] is not None else 0 for c in components]
    ax.bar([x - 0.2 for x in xs], theory, width=0.4, label="theory (from the GGUF)", color="#4c72b0")
    ax.bar([x + 0.2 for x in xs], measured, width=0.4, label="llama.cpp allocated", color="#dd8452")
    for x, (label, t, m) in zip(xs, components):
        ax.annotate("no theory" if t is None else f"{t:.2f}", (x - 0.2, t or 0), ha="center", fontsize=7,
                    xytext=(0, 2), textcoords="offset points")
        if m is not None:
            ax.annotate(f"{m:.2f}", (x + 0.2, m), ha="center", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(list(xs), [c[0] for c in components])
    ax.set_ylabel("MiB")
    stand_in = _twin_note("KV and state are the published model's, the weights and compute buffer the twin's")
    ax.set_title(f"{name}: theory against llama.cpp's allocation" + (stand_in if twin else ""), fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "theory_vs_measured")


# the left roofline panel's three lines per series: the series is the colour, these the style
ROOFLINE_STYLES = {"measured": {"marker": "o", "ls": ""}, "model": {"ls": "-", "lw": 1.5},
                   "the same model as full GQA": {"ls": "--", "lw": 1.2}}


def _roofline_legend(fig, series_handles: list, single: bool, counterfactual: bool = True) -> None:
    """One legend below both panels: a colour per series (the same in both), then what each line style means."""
    from matplotlib.lines import Line2D

    key_colour = "C0" if single else "dimgrey"  # one series: its own colour; several: a neutral key
    keys = [Line2D([], [], color=key_colour, label=label, **style) for label, style in ROOFLINE_STYLES.items()
            if counterfactual or label != "the same model as full GQA"]
    handles = keys if single else series_handles + keys
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=3 if single else 2, frameon=False)


def roofline(out_dir: Path, name: str, series: list[dict], *, twin: bool = False) -> list[Path]:
    """Measured decode t/s against depth, the calibrated speed model, its full-GQA counterfactual, and the MBU."""
    plt = _plt()
    fig, (ax, ax_mbu) = plt.subplots(1, 2, figsize=(10, 4.4), gridspec_kw={"width_ratios": [3, 2]},
                                     layout="constrained")
    series_handles = []
    for i, s in enumerate(series):
        colour = f"C{i}"  # set, not cycled: each panel's cycle gave one series two colours (and one colour two)
        pts, line = s["points"], s["line"]
        ax.plot([p["depth"] for p in pts], [p["measured"] for p in pts], color=colour, **ROOFLINE_STYLES["measured"])
        for key, style in (("predicted", "model"), ("full_gqa", "the same model as full GQA")):
            if any(p[key] is None for p in line):  # a twin: no full-GQA counterfactual (reporting.build)
                continue
            ax.plot([p["depth"] for p in line], [p[key] for p in line], color=colour, **ROOFLINE_STYLES[style])
        series_handles += ax_mbu.plot([p["depth"] for p in pts], [100 * (p["mbu"] or 0) for p in pts], "o-",
                                      color=colour, label=s["label"])
    ax.set_xlabel("depth (tokens in the context)")
    ax.set_ylabel("decode tokens per second")
    ax.set_title("decode speed: measured, modelled" + ("" if twin else ", full-GQA counterfactual"), fontsize=10)
    ax.set_ylim(bottom=0)
    ax_mbu.set_xlabel("depth (tokens in the context)")
    ax_mbu.set_ylabel("memory bandwidth utilisation (%)")
    ax_mbu.set_title("bytes per token x t/s / measured peak", fontsize=10)
    ax_mbu.set_ylim(bottom=0)
    # below the figure, not under the left panel: as wide as a panel, the long names squeezed both apart
    _roofline_legend(fig, series_handles, len(series) == 1, counterfactual=not twin)
    fig.suptitle(f"{name}: decode speed against the bytes each token reads"
                 + (_twin_note("how decode speed changes with depth, not the published model's speed") if twin else "")
                 + (f"\n{series[0]['label']}; model {series[0]['basis']}" if len(series) == 1 else ""), fontsize=10)
    return _save(fig, out_dir, "roofline")


def quality(out_dir: Path, name: str, rows: list) -> list[Path]:
    """Mean KLD (with its ±) and its 99th percentile against context, one line per KV type; the weights against
    their base beside, where measured."""
    plt = _plt()
    kv = [r for r in rows if r.base == F16_BASE]
    weights = [r for r in rows if r.base != F16_BASE]
    panels = [p for p in (kv, weights) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
    for ax, group in zip(axes[0], panels):
        series: dict[str, list] = {}
        for r in group:
            series.setdefault(r.label if r.base == F16_BASE else f"{r.label} vs {r.base}", []).append(r)
        for label, points in sorted(series.items()):
            points.sort(key=lambda r: r.n_ctx)
            xs = [r.n_ctx for r in points]
            line = ax.errorbar(xs, [max(r.kld_mean, 1e-6) for r in points], yerr=[r.kld_mean_unc or 0 for r in points],
                               marker="o", capsize=3, label=f"{label}: mean")
            ax.plot(xs, [max(r.kld_p99, 1e-6) for r in points], linestyle="--", marker=".",
                    color=line[0].get_color(), label=f"{label}: p99")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n_ctx (tokens per chunk; the second half scored)")
        ax.set_ylabel("KL divergence against the base (nats, measured)")
        ax.set_title("KV types against f16 KV" if group is kv else "weights against the base model")
        ax.legend(fontsize=7)
    fig.suptitle(f"{name}: what the lossy choices cost (as llama-perplexity --kl-divergence)", fontsize=10)
    return _save(fig, out_dir, "quality")
