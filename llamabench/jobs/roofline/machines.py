"""The machine a roofline prices: a named card (or several), a bare bandwidth, or this machine's CPU; each with the
llama.cpp backend that runs it and that backend's fitted coefficients (`memory.speed_model.rates_for`)."""

from __future__ import annotations

from dataclasses import replace

from ...core.errors import UsageError
from ...memory.speed_model import Machine, Rates, SpeedModel, Term, machine_of, rates_for
from ...settings.cards import DDR5_DESKTOP_GBPS, DDR5_SOURCE, Card, card
from ...settings.sweep import parse_value
from ...world import bandwidth as bandwidth_probe
from ...world import sysinfo

INF = float("inf")


def backend_for(c: Card, given) -> str:
    """--backend as given (one the card runs), else the card's own."""
    if given is None:
        return c.backend
    chosen = parse_value("backend", given, listed=False)
    if chosen not in c.runs:
        raise UsageError(f"{c.id} runs llama.cpp's {' or '.join(c.runs)} backend, not {chosen}",
                         hint=f"give --backend {c.runs[0]}" + (f" or --backend {c.runs[1]}" if len(c.runs) > 1 else ""))
    return chosen


def overridden(rates: Rates, bw_eff, compute_eff) -> Rates:
    """--bw-eff sets the share of the bandwidth a decoded token's weights and KV are read at; --compute-eff the share
    of the matrix throughput a prompt's products run at."""
    coefficients = dict(rates.coefficients)
    notes = []
    if bw_eff is not None:
        eff = parse_value("bw_eff", bw_eff, listed=False)
        coefficients[str(Term.WEIGHTS)] = coefficients[str(Term.KV)] = 1 / eff
        notes.append(f"bandwidth efficiency {eff:g} (--bw-eff)")
    if compute_eff is not None:
        eff = parse_value("compute_eff", compute_eff, listed=False)
        coefficients[str(Term.MATMUL)] = 1 / eff
        notes.append(f"matrix efficiency {eff:g} (--compute-eff)")
    if not notes:
        return rates
    return replace(rates, coefficients=coefficients, basis=rates.basis + "; " + ", ".join(notes))


def card_model(c: Card, backend, bw_eff=None, compute_eff=None) -> SpeedModel:
    chosen = backend_for(c, backend)
    rates = overridden(rates_for(c.rates_key(chosen), c.id), bw_eff, compute_eff)
    return SpeedModel(machine_of(c), rates, f"{c.name} on llama.cpp's {chosen} backend: {c.bandwidth_gbps:g} GB/s, "
                                             f"{_matrix_words(c)} ({c.source}); {rates.basis}")


def _matrix_words(c: Card) -> str:
    parts = [f"{c.fp32_tflops:g} FP32 TFLOPS"]
    if c.fp16_matrix_tflops:
        parts.append(f"{c.fp16_matrix_tflops:g} FP16 matrix TFLOPS")
    if c.int8_matrix_tops:
        parts.append(f"{c.int8_matrix_tops:g} INT8 TOPS")
    return ", ".join(parts)


def cards_of(text: str) -> list[Card]:
    return [card(x.strip()) for x in str(text).split("+")]


def this_machine_model(bw_eff=None, compute_eff=None, threads: int = 0) -> SpeedModel:
    """This machine's CPU as the card: its measured memory bandwidth (the probe's best, cached a day) and its vector
    peak, at the CPU backend's coefficients (fitted on bench runs of real GGUFs on this kind of machine)."""
    probe = bandwidth_probe.cached_measure()
    gbps = max(probe.copy_gbps, probe.triad_gbps)
    peak = sysinfo.cpu_peak(threads)
    rates = overridden(rates_for("cpu"), bw_eff, compute_eff)
    machine = Machine(f"this machine ({sysinfo.cpu_model()})", gbps * 1e9, peak.flops, source=probe.method)
    return SpeedModel(machine, rates, f"this machine's CPU on llama.cpp's CPU backend: {gbps:g} GB/s measured "
                                      f"({probe.method}), {peak.flops / 1e12:.2f} FP32 TFLOPS ({peak.words}); "
                                      f"{rates.basis}")


def bandwidth_model(bandwidth, tflops, backend, bw_eff=None, compute_eff=None) -> SpeedModel:
    """--bandwidth GB/s (and --tflops, FP32): a card of those figures run by --backend (default cuda); without
    --tflops, FLOPs are not priced (decode's bytes alone, no prefill)."""
    bw = parse_value("bandwidth", bandwidth, listed=False)
    tf = parse_value("tflops", tflops, listed=False) if tflops else None
    chosen = parse_value("backend", backend, listed=False) if backend is not None else "cuda"
    rates = overridden(rates_for(chosen), bw_eff, compute_eff)
    machine = Machine(f"{bw:g} GB/s" + (f", {tf:g} TFLOPS" if tf else ""), bw * 1e9, tf * 1e12 if tf else INF,
                      source="--bandwidth" + (" and --tflops" if tf else ""))
    return SpeedModel(machine, rates, f"--bandwidth {bw:g} GB/s" + (f", --tflops {tf:g} (FP32; no matrix units "
                                                                     "assumed)" if tf else ", FLOPs not priced")
                      + f" on llama.cpp's {chosen} backend; {rates.basis}")


def host_model(c: Card | None, ram_bandwidth, bw_eff=None, *, this_machine: bool = False) -> SpeedModel:
    """The system RAM that holds the layers or experts kept off the card, read by the CPU backend: --ram-bandwidth
    GB/s, else the named card's typical host (a DDR4 or DDR5 desktop, its source said), else (a card given by its
    --bandwidth) a DDR5 desktop's; this machine's measured bandwidth only where the machine asked about is this one.
    Bytes only (a desktop CPU decodes the part in RAM as fast as it reads it)."""
    if ram_bandwidth:
        gbps, source = parse_value("ram_bandwidth", ram_bandwidth, listed=False), "--ram-bandwidth"
    elif c is not None and not c.unified:
        gbps, source = c.host_ram_gbps, f"{c.host_ram_source}, beside a {c.name}; --ram-bandwidth for yours"
    elif not this_machine:
        gbps, source = DDR5_DESKTOP_GBPS, f"{DDR5_SOURCE}; --ram-bandwidth for yours"
    else:
        probe = bandwidth_probe.cached_measure()
        gbps, source = max(probe.copy_gbps, probe.triad_gbps), f"this machine's, measured: {probe.method}"
    rates = overridden(rates_for("cpu"), bw_eff, None)
    weights_only = {str(Term.WEIGHTS): rates.coefficients.get(str(Term.WEIGHTS), 1.0),
                    str(Term.KV): rates.coefficients.get(str(Term.KV), 1.0)}
    return SpeedModel(Machine("system RAM", gbps * 1e9, INF, source=source), replace(rates, coefficients=weights_only),
                      f"system RAM {gbps:g} GB/s ({source})")
