"""The speed model against published llama-bench runs: fit each backend's coefficients, hold them out, write them.

Reads benchmarks/published_runs/<backend>.toml (each run: its source, card, catalog id and quant recipe, and its
rows as printed), prices every row with the speed model's terms (`memory.speed_model`) on the run's card, fits one
set of coefficients per backend (`memory.speed_fit`, non-negative least squares on the relative error of each
row's time), and holds them out: each machine left out in turn (each model, where a backend has one machine), its
rows predicted by the coefficients of the rest. Prints the residuals per backend and per machine.

    .venv/bin/python benchmarks/speed_published.py            # the table
    .venv/bin/python benchmarks/speed_published.py --rows     # every row, measured and predicted
    .venv/bin/python benchmarks/speed_published.py --write    # write llamabench/settings/speed_rates.py

The first run builds each catalog model's shape twin in its quant recipe (llama.cpp's dry run; cached).
"""

from __future__ import annotations

import argparse
import pprint
import re
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llamabench.core.errors import LlamabenchError  # noqa: E402
from llamabench.core.units import GIB  # noqa: E402
from llamabench.jobs.source import resolve  # noqa: E402
from llamabench.jobs.twin.shape import published_weights  # noqa: E402
from llamabench.memory import speed, speed_fit  # noqa: E402
from llamabench.memory.speed_model import DECODE_TERMS, PREFILL_TERMS, Machine, Rates, SpeedModel, machine_of  # noqa: E402
from llamabench.model.layout import geometry_from_metadata  # noqa: E402
from llamabench.settings.cards import card  # noqa: E402
from llamabench.settings.params import Params  # noqa: E402

RUNS = ROOT / "benchmarks" / "published_runs"
OUT = ROOT / "llamabench" / "settings" / "speed_rates.py"
TEST = re.compile(r"^(pp|tg)(\d+)(?: @ d(\d+))?$")
UNIT = {str(t): 1.0 for t in (*DECODE_TERMS, *PREFILL_TERMS)}
PROFILE_MODELS, PROFILE_ROWS = 4, 12  # a machine's own coefficients need this many of its models and rows
HELD_OUT_MACHINES = 3  # a band of whole machines held out needs this many machines of 3 rows or more


def works():
    cache = {}

    def work(catalog: str, quant: str, size_gib: float | None):
        key = (catalog, quant, size_gib)
        if key not in cache and catalog.endswith(".gguf"):  # a real GGUF of the tests (this machine's CPU runs)
            from tests.support import real_model
            path, why = real_model.fetch(next(m for m in (real_model.GEMMA, real_model.QWEN) if m.name == catalog))
            if path is None:
                raise LlamabenchError(why)
            source = resolve(str(path))
            geometry = geometry_from_metadata(source.metadata)
            cache[key] = speed.model_work(source.metadata, geometry, speed.weights_of(source.metadata, geometry))
        if key not in cache:
            shape = published_weights(resolve(catalog), quant)
            geometry = geometry_from_metadata(shape.meta)
            scale = (speed.WeightsScale(round(size_gib * GIB), True) if size_gib
                     else speed.WeightsScale(shape.scale, shape.by_bytes))
            cache[key] = speed.model_work(shape.meta, geometry, speed.weights_of(shape.meta, geometry, scale))
        return cache[key]
    return work


def observations(backend: str, work) -> tuple[list, list]:
    """(decode rows, prefill rows) of a backend's published runs, as speed_fit.Observation."""
    data = tomllib.loads((RUNS / f"{backend}.toml").read_text())
    decode, prefill = [], []
    for run in data["run"]:
        try:
            w = work(run["catalog"], run["quant"], run.get("size_gib"))
        except LlamabenchError as exc:
            print(f"  skipped {run['catalog']} {run['quant']}: {exc}")
            continue
        settings = Params(n_ubatch=run["n_ubatch"], n_batch=max(run["n_batch"], run["n_ubatch"]),
                          type_k=run["type_k"], type_v=run["type_v"])
        figures = (Machine(run["card"], run["bandwidth_gbps"] * 1e9, run["fp32_tflops"] * 1e12)
                   if "bandwidth_gbps" in run else machine_of(card(run["card"])))  # this machine: as measured
        unit = SpeedModel(figures, Rates(backend, UNIT))
        trained = w.n_ctx_train
        for test, avg_ts, _ in run["rows"]:
            m = TEST.match(test.strip())
            if not m:
                continue
            kind, n, depth = m[1], int(m[2]), int(m[3] or 0)
            if trained and depth + n > trained:  # past the trained context (Llama 2 at 32k): no one runs it
                continue
            terms = {str(t): v for t, v in unit.test_terms(w, settings, kind, n, depth).items()}
            label = f"{run['catalog']} {run['quant']} ub{run['n_ubatch']} {test}"
            o = speed_fit.Observation(terms, float(avg_ts), run["card"], run["catalog"], label)
            single = kind == "pp" and min(run["n_ubatch"], n) == 1  # one token a ubatch: the decode's kernels
            (decode if kind == "tg" or single else prefill).append(o)
    return decode, prefill


def band_of(residuals, how, machines):
    lo, hi = speed_fit.spread([r for _, r in residuals])
    return {"low": round(lo, 4), "high": round(hi, 4), "runs": len(residuals), "machines": machines, "how": how}


def summary(name, obs, terms, show_rows):
    """Fit, the machines' own scales, and the two held-out bands: a model left out on machines the fit knows (their
    own scales applied), and a machine left out (the backend's coefficients alone, as for a card with no runs)."""
    coefficients = speed_fit.fit(obs, terms)
    scales = speed_fit.machine_scales(coefficients, obs)
    fitted = [speed_fit.residual(coefficients, o, scales.get(o.machine, 1.0)) for o in obs]
    known = speed_fit.leave_one_out(obs, terms, lambda o: o.model, own_scales=True)
    counts = {m: sum(1 for o in obs if o.machine == m) for m in {o.machine for o in obs}}
    big = {m for m, n in counts.items() if n >= speed_fit.MIN_CARD_ROWS}
    other = speed_fit.leave_one_out([o for o in obs if o.machine in big], terms, lambda o: o.machine) \
        if len(big) >= HELD_OUT_MACHINES else []
    print(f"  {name}: {len(obs)} rows on {len(counts)} machines; fitted rms "
          f"{np.sqrt(np.mean(np.square(fitted))) * 100:.1f}%")
    for label, rows in (("a model held out, known machine", known), ("a machine held out", other)):
        resid = [r for _, r in rows]
        if not resid:
            print(f"    {label}: none (fewer than {HELD_OUT_MACHINES} machines with {speed_fit.MIN_CARD_ROWS} rows)")
            continue
        lo, hi = speed_fit.spread(resid)
        print(f"    {label}: 90% within {lo * 100:+.1f}%..{hi * 100:+.1f}%, worst {max(map(abs, resid)) * 100:.1f}%, "
              f"within 10%: {sum(abs(r) <= 0.10 for r in resid)}/{len(resid)}, within 25%: "
              f"{sum(abs(r) <= 0.25 for r in resid)}/{len(resid)}")
        by_machine = defaultdict(list)
        for o, r in rows:
            by_machine[o.machine].append(r)
        for m, rs in sorted(by_machine.items()):
            print(f"      {m}: {len(rs)} rows, median {np.median(rs) * 100:+.1f}%, "
                  f"worst {max(rs, key=abs) * 100:+.1f}%")
    print("    coefficients: " + ", ".join(f"{t} {coefficients[t]:.3g}" for t in terms))
    print("    machine scales: " + ", ".join(f"{m} {v:.3f}" for m, v in sorted(scales.items())))
    profiles = {}
    for m in sorted(counts):
        own = [o for o in obs if o.machine == m]
        if len({o.model for o in own}) < PROFILE_MODELS or len(own) < PROFILE_ROWS:
            continue
        held = speed_fit.leave_one_out(own, terms, lambda o: o.model)
        resid = [r for _, r in held]
        lo, hi = speed_fit.spread(resid)
        words = f"a model left out of {m}'s own runs"
        profiles[m] = {"coefficients": speed_fit.fit(own, terms), "band": band_of(held, words, 1)}
        print(f"    {m}'s own fit, a model held out: 90% within {lo * 100:+.1f}%..{hi * 100:+.1f}%, worst "
              f"{max(map(abs, resid)) * 100:.1f}%, within 10%: {sum(abs(r) <= 0.10 for r in resid)}/{len(resid)}, "
              f"within 25%: {sum(abs(r) <= 0.25 for r in resid)}/{len(resid)}")
    if show_rows:
        held = {id(o): r for o, r in known}
        for o in sorted(obs, key=lambda x: (x.machine, x.label)):
            print(f"      {o.machine:24} {o.label:56} meas {o.measured_ts:9.2f}  model held out "
                  f"{held.get(id(o), float('nan')) * 100:+6.1f}%  fitted "
                  f"{speed_fit.residual(coefficients, o, scales.get(o.machine, 1.0)) * 100:+6.1f}%")
    machines = len(big)
    return coefficients, profiles, band_of(known, "a model left out, its machine known", len(counts)), \
        band_of(other, "a machine left out", machines) if other else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", action="append", help="only these (default: every file in published_runs/)")
    ap.add_argument("--rows", action="store_true")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    work = works()
    out = {}
    for path in sorted(RUNS.glob("*.toml")):
        backend = path.stem
        if a.backend and backend not in a.backend:
            continue
        decode, prefill = observations(backend, work)
        print(f"{backend}:")
        d_coef, d_prof, d_known, d_other = summary("decode", decode, [str(t) for t in DECODE_TERMS], a.rows)
        p_coef, p_prof, p_known, p_other = summary("prefill", prefill, [str(t) for t in PREFILL_TERMS], a.rows)
        sources = sorted({r["source"] for r in tomllib.loads(path.read_text())["run"]})
        machines = {}
        for m in sorted(set(d_prof) & set(p_prof)):  # a machine's own coefficients where both kinds have enough
            machines[m] = {"coefficients": {**d_prof[m]["coefficients"], **p_prof[m]["coefficients"]},
                           "decode_band": d_prof[m]["band"], "prefill_band": p_prof[m]["band"]}
        out[backend] = {"coefficients": {**d_coef, **p_coef}, "machines": machines,
                        "decode_band": d_known, "prefill_band": p_known, "decode_band_other": d_other,
                        "prefill_band_other": p_other, "rows": len(decode) + len(prefill), "sources": sources}
    if a.write:
        write(out)


def write(out: dict) -> None:
    def rounded(x):
        if isinstance(x, float):
            return float(f"{x:.6g}")
        if isinstance(x, dict):
            return {k: rounded(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(rounded(v) for v in x)
        return x

    header = ('"""Each llama.cpp backend\'s speed-model coefficients, fitted on published llama-bench runs.\n'
              "Generated by benchmarks/speed_published.py --write from benchmarks/published_runs/ (do not edit by\n"
              "hand). Pure data.\n\n"
              "coefficients: seconds per unit of each term over the machine's figure, i.e. 1 / the efficiency (0:\n"
              "the term never limits); layer terms in microseconds per layer. machines: a machine's own coefficients,\n"
              "fitted on its own runs where they cover enough models. Bands: the leave-one-out residuals (predicted /\n"
              "measured - 1) that hold 90% of the held-out rows: a model left out on a known machine, and ('_other')\n"
              'a whole machine left out."""\n\n')
    OUT.write_text(header + "RATES = " + pprint.pformat(rounded(out), width=116, sort_dicts=False) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
