"""`llamabench roofline MODEL`: predicted decode t/s at depth on a card, beside the same model as full GQA."""

from __future__ import annotations

import argparse
import json

from .. import source as model_source
from ..errors import UsageError
from . import options

HELP = "predict decode t/s at depths up to n_ctx from bytes per token, for a card or a bandwidth"
EXAMPLES = """examples:
  llamabench roofline qwen3-5-35b-a3b --card rtx-4090 --ctx 131072
  llamabench roofline model.gguf --bandwidth 936 --tflops 35.6 --ctx 32768
  llamabench roofline model.gguf --results bench.jsonl        # calibrated on your own measured depths
Time per token = bytes read / bandwidth + attention FLOPs / compute. A card's published bandwidth
and FP32 throughput are scaled by stated efficiencies (--bw-eff 0.70, --compute-eff 0.30); with
--results the two ceilings are calibrated from two measured tg depths of this model instead.
The full-GQA column is the same model with every mixer layer cached as full attention.
"""


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..speed import CARDS

    options.add_model(parser)
    parser.add_argument("--card", default=None, help="a card from the table: " + ", ".join(c.id for c in CARDS))
    parser.add_argument("--bandwidth", type=positive_float, default=None, help="memory bandwidth in GB/s (instead of --card)")
    parser.add_argument("--tflops", type=positive_float, default=None, help="FP32 TFLOPS with --bandwidth (default: bytes only)")
    parser.add_argument("--bw-eff", type=positive_float, default=None, help="bandwidth efficiency (default 0.70)")
    parser.add_argument("--compute-eff", type=positive_float, default=None, help="compute efficiency (default 0.30)")
    parser.add_argument("--results", type=__import__("pathlib").Path, default=None, metavar="FILE",
                        help="bench results of this model: calibrate on two measured tg depths")
    parser.add_argument("-c", "--ctx", dest="n_ctx", type=options.ctx_int, default=131072, help="deepest depth (default 131072)")
    parser.add_argument("--quant", default="Q4_K_M", help="published quant of a catalog model (default Q4_K_M)")
    options.add_cache_types(parser, listed=False)
    options.add_output(parser)


def run(args: argparse.Namespace) -> int:
    from .. import speed
    from ..footprint import CacheSettings
    from ..layout import geometry_from_metadata
    from ..render.speed import render_roofline

    source = model_source.resolve(args.model)
    if args.n_ctx == 0:
        raise UsageError("--ctx 0: give the deepest depth")
    meta, weights_basis, scale = _weights_source(source, args.quant)
    geometry = geometry_from_metadata(meta)
    _, active = speed.weights_per_token(meta, geometry, scale_to_bytes=scale)
    settings = CacheSettings(n_ctx=args.n_ctx, type_k=args.type_k, type_v=args.type_v)
    measured, offset = {}, 0
    if args.results:
        model, measured, offset = _calibrated(args.results, source, geometry, settings, active)
    elif args.card:
        eff = {k: v for k, v in (("bandwidth_efficiency", args.bw_eff), ("compute_efficiency", args.compute_eff)) if v}
        model = speed.model_for_card(speed.card(args.card), **eff)
    elif args.bandwidth:
        bw_eff = args.bw_eff or speed.BANDWIDTH_EFFICIENCY
        compute = args.tflops * 1e12 * (args.compute_eff or speed.COMPUTE_EFFICIENCY) if args.tflops else float("inf")
        model = speed.SpeedModel(args.bandwidth * 1e9 * bw_eff, compute,
                                 f"{args.bandwidth:g} GB/s x {bw_eff:g}"
                                 + (f", {args.tflops:g} TFLOPS x {args.compute_eff or speed.COMPUTE_EFFICIENCY:g}"
                                    if args.tflops else ", attention compute not limiting"))
    else:
        raise UsageError("give --card NAME, --bandwidth GB/s or --results FILE")
    depths = sorted({0, *(args.n_ctx * f // 16 for f in (1, 2, 4, 8, 16)), *measured})
    rows = []
    for d in depths:
        ours = speed.token_cost(geometry, settings, active, d + offset)  # measured tg: its middle token
        gqa = speed.token_cost(geometry, settings, active, d + offset, as_full_gqa=True)
        rows.append({"depth": d, "bytes_per_token": ours.total_bytes, "kv_read_bytes": ours.kv_bytes,
                     "recurrent_bytes": ours.recurrent_bytes, "tok_s": model.tokens_per_second(ours),
                     "full_gqa_bytes_per_token": gqa.total_bytes, "full_gqa_tok_s": model.tokens_per_second(gqa),
                     "measured_tok_s": measured.get(d)})
    result = {"model": source.name, "architecture": geometry.architecture, "weights_read_per_token": active,
              "weights_basis": weights_basis, "speed_model": model.basis, "bandwidth_gbps": model.bandwidth / 1e9,
              "compute_tflops": model.compute / 1e12, "cache_types": [args.type_k, args.type_v], "depths": rows}
    if args.output == options.OutputFormat.JSON:
        print(json.dumps(result, indent=2))
    else:
        print(render_roofline(result))
    return 0


def _weights_source(source, quant: str):
    """Metadata with tensor infos, words for them, and a published size to scale to (catalog ids)."""
    if source.path is not None:
        return source.metadata, f"tensor infos of {source.path.name}", None
    from ..twin.shape import published_weights

    _, meta, q = published_weights(source, quant)
    if q is None:
        return meta, f"no published {quant} size in the catalog: the shape twin's q4_0 tensors (estimate)", None
    return meta, f"published {q.name} size {q.bytes / 1e9:.2f} GB spread over the real tensor shapes (estimate)", q.bytes


def _calibrated(path, source, geometry, settings, active):
    from .. import speed
    from ..results.records import BenchRecord, read_records

    records = [r for r in read_records(path).records if isinstance(r, BenchRecord) and r.model.label == source.label]
    groups = [g for g in speed.tg_groups(records) if len(g) >= 2]
    if not groups:
        raise UsageError(f"{path}: calibrating needs tg tests of {source.label} at two depths or more, on one machine "
                         "with one context configuration")
    group = groups[0]  # the one with the most depths
    n_tokens = group[0].params["n_tokens"]
    cost = lambda d: speed.token_cost(geometry, settings, active, d + n_tokens // 2)  # noqa: E731
    lo, hi = group[0], group[-1]
    by_depth = {r.params["depth"]: r.avg_ts for r in group}
    model = speed.calibrate(cost(lo.params["depth"]), lo.avg_ts, cost(hi.params["depth"]), hi.avg_ts)
    return model, by_depth, n_tokens // 2
