"""How long a step takes on a machine: bytes over its bandwidth and FLOPs over its throughput, at the efficiencies
one llama.cpp backend reaches. Pure.

A decoded token (`memory.speed.TokenCost`) takes
    weights and state / (bandwidth x e_weights) + KV / (bandwidth x e_kv)
    + attention FLOPs / (attention rate x e_attention)
    + matrix-vector FLOPs / (FP32 rate x e_vector) + layers x a launch time;
a ubatch of a prompt (`UbatchCost`)
    weights it touches / (bandwidth x e) + matrix FLOPs / (matmul rate x e_matmul) x (1 + half / tokens per matrix)
    + flash attention FLOPs / (attention rate x e_flash) + recurrent state updates / (FP32 rate x e_scan)
    + layers x a launch time.
The rates are the machine's published figures (`settings.cards`): matrix products on the units each backend's
kernels use (`REFERENCES`), attention on the FP16 matrix units where the machine has them. The efficiencies are
the backend's, fitted once on published llama-bench runs (`settings.speed_rates`, `memory.speed_fit`): one set a
backend, the same for every model and card, not a fit per model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from ..settings.params import Params
from ..settings.speed_rates import RATES
from .speed import ACTIVATION_BYTES, ModelWork, TokenCost, UbatchCost, decode_cost, ubatch_cost, ubatches


class Term(StrEnum):
    """One term of the time of a step: what it divides and by which of the machine's figures."""

    WEIGHTS = "weights"  # decode: weight, state and KV bytes / bandwidth
    KV = "kv"  # decode: KV bytes / bandwidth, what reading the cache costs beyond the weights' rate
    ATTENTION = "attention"  # decode: attention FLOPs / attention rate
    SCORES = "scores"  # decode: softmax exponentials (query head x cell) / FP32 rate
    VECTOR = "vector"  # decode: matrix-vector FLOPs / FP32 rate
    LAYER = "layer"  # decode: layers x 1 us
    PREFILL_WEIGHTS = "prefill_weights"  # a ubatch: weights touched / bandwidth
    MATMUL = "matmul"  # a ubatch: matrix FLOPs / matmul rate
    MATMUL_SMALL = "matmul_small"  # a ubatch: (matrix FLOPs / tokens per matrix) / matmul rate
    FLASH = "flash"  # a ubatch: attention FLOPs / attention rate
    FLASH_STREAM = "flash_stream"  # a ubatch: attention FLOPs / bandwidth (K and V streamed once per Q tile)
    FLASH_SCORES = "flash_scores"  # a ubatch: softmax exponentials / FP32 rate
    SCAN = "scan"  # a ubatch: recurrent state elements updated token after token / FP32 rate
    PREFILL_LAYER = "prefill_layer"  # a ubatch: layers x 1 us


DECODE_TERMS = (Term.WEIGHTS, Term.KV, Term.ATTENTION, Term.SCORES, Term.VECTOR, Term.LAYER)
PREFILL_TERMS = (Term.PREFILL_WEIGHTS, Term.MATMUL, Term.MATMUL_SMALL, Term.FLASH, Term.FLASH_STREAM,
                 Term.FLASH_SCORES, Term.SCAN, Term.PREFILL_LAYER)
US = 1e-6


@dataclass(frozen=True)
class Machine:
    """What a machine can do, as published (or measured, for this one): bytes/s and FLOP/s."""

    name: str
    bandwidth: float  # bytes/s of the memory the weights are in
    fp32: float  # FLOP/s of the shader (or CPU vector) units
    fp16_matrix: float | None = None  # FLOP/s of the FP16 matrix units (FP32 accumulate); None: none
    int8_matrix: float | None = None  # op/s of the INT8 matrix units
    source: str = ""


class Backend(StrEnum):
    CUDA = "cuda"
    VULKAN = "vulkan"  # KHR_coopmat (AMD, Intel) or none
    VULKAN_COOPMAT2 = "vulkan-coopmat2"  # NVIDIA's driver: NV_coopmat2, shaders of their own
    ROCM = "rocm"
    METAL = "metal"
    CPU = "cpu"


# the unit each backend's kernels multiply on: llama.cpp's CUDA MMQ kernels multiply quantized weights as INT8 on the
# tensor cores (ggml-cuda/mmq.cuh); on AMD, HIP's large batches go to rocBLAS / hipBLASLt as FP16 after dequantizing
# (ggml-cuda/mmq.cu, ggml_cuda_should_use_mmq: MMQ for many experts), Vulkan's coopmat shaders as FP16
# (ggml-vulkan.cpp, mul_mm with KHR_coopmat / NV_coopmat2), Metal's simdgroup_matrix on the shader cores; flash
# attention runs FP16 tiles (fattn-mma-f16, rocWMMA, coopmat) where there are matrix units
REFERENCES: dict[Backend, tuple[str, str]] = {
    Backend.CUDA: ("int8_matrix", "fp16_matrix"),
    Backend.ROCM: ("fp16_matrix", "fp16_matrix"),
    Backend.VULKAN: ("fp16_matrix", "fp16_matrix"),
    Backend.VULKAN_COOPMAT2: ("fp16_matrix", "fp16_matrix"),
    Backend.METAL: ("fp16_matrix", "fp16_matrix"),
    Backend.CPU: ("fp32", "fp32"),
}


def rate_of(machine: Machine, unit: str) -> tuple[float, str]:
    """A machine's FLOP/s on a unit, falling back to FP16 matrix units, then the FP32 shader rate."""
    for name in (unit, "fp16_matrix", "fp32"):
        value = getattr(machine, name)
        if value:
            return value, name
    raise ValueError(f"{machine.name}: no throughput figure")


@dataclass(frozen=True)
class Band:
    """The spread of the leave-one-out residuals (predicted / measured - 1) of a backend's published runs."""

    low: float
    high: float
    runs: int  # rows held out
    machines: int
    how: str  # "leave one machine out", "leave one model out"

    def text(self) -> str:
        return f"{self.low * 100:+.0f}% to {self.high * 100:+.0f}% ({self.how}, {self.runs} rows, {self.machines} " \
               f"machine{'s' if self.machines != 1 else ''})"


@dataclass(frozen=True)
class Rates:
    """A backend's coefficients: for each term, seconds per (unit / figure), i.e. 1 / its efficiency (0: the term
    never limits); LAYER and PREFILL_LAYER in microseconds per layer. Fitted on published runs."""

    backend: str
    coefficients: dict[str, float]
    decode_band: Band | None = None
    prefill_band: Band | None = None
    basis: str = ""  # where they come from, in words

    def efficiency(self, term: Term) -> float | None:
        c = self.coefficients.get(str(term), 0.0)
        return 1.0 / c if c else None


@dataclass(frozen=True)
class SpeedModel:
    """A machine run by a backend: seconds of a decoded token and of a ubatch."""

    machine: Machine
    rates: Rates
    basis: str = ""
    decode_scale: float = 1.0  # a calibration on the user's own run (`calibrated_scale`)
    prefill_scale: float = 1.0
    notes: tuple[str, ...] = field(default=())

    def _divisors(self) -> dict[Term, float]:
        backend = Backend(self.rates.backend)
        matmul, _ = rate_of(self.machine, REFERENCES[backend][0])
        attention, _ = rate_of(self.machine, REFERENCES[backend][1])
        bw, fp32 = self.machine.bandwidth, self.machine.fp32
        return {Term.WEIGHTS: bw, Term.KV: bw, Term.ATTENTION: attention, Term.SCORES: fp32, Term.VECTOR: fp32,
                Term.LAYER: 1 / US, Term.FLASH_SCORES: fp32,
                Term.PREFILL_WEIGHTS: bw, Term.MATMUL: matmul, Term.MATMUL_SMALL: matmul, Term.FLASH: attention,
                Term.FLASH_STREAM: bw, Term.SCAN: fp32, Term.PREFILL_LAYER: 1 / US}

    def decode_terms(self, cost: TokenCost) -> dict[Term, float]:
        """Each term's seconds for one decoded token."""
        # the KV is read at the weights' rate at best (one stream of bytes): KV's own term is what it costs beyond
        units = {Term.WEIGHTS: cost.weights_bytes + cost.recurrent_bytes + cost.kv_bytes, Term.KV: cost.kv_bytes,
                 Term.ATTENTION: cost.attention_flops, Term.SCORES: cost.attention_scores,
                 Term.VECTOR: cost.matmul_flops, Term.LAYER: cost.layers}
        return self._seconds(units, self.decode_scale)

    def ubatch_terms(self, cost: UbatchCost) -> dict[Term, float]:
        units = {Term.PREFILL_WEIGHTS: cost.weights_bytes + cost.kv_bytes, Term.MATMUL: cost.matmul_flops,
                 Term.MATMUL_SMALL: cost.matmul_small_flops, Term.FLASH: cost.attention_flops,
                 Term.FLASH_STREAM: cost.attention_flops, Term.FLASH_SCORES: cost.attention_scores,
                 Term.SCAN: cost.state_elements,
                 Term.PREFILL_LAYER: cost.layers}
        return self._seconds(units, self.prefill_scale)

    def _seconds(self, units: dict[Term, float], scale: float) -> dict[Term, float]:
        divisors = self._divisors()
        return {t: scale * self.rates.coefficients.get(str(t), 0.0) * u / divisors[t] for t, u in units.items()}

    def seconds(self, cost: TokenCost) -> float:
        return sum(self.decode_terms(cost).values())

    def tokens_per_second(self, cost: TokenCost) -> float:
        return 1.0 / self.seconds(cost)

    def ubatch_seconds(self, cost: UbatchCost) -> float:
        return sum(self.ubatch_terms(cost).values())

    # llama-bench's tests ---------------------------------------------------------------------------
    def test_terms(self, work: ModelWork, settings: Params, kind: str, n_tokens: int, depth: int) -> dict[Term, float]:
        """Each term's seconds per token of llama-bench's `pp N @ dD` (a ubatch at a time; a ubatch of one token
        runs the decode's kernels, without the output matrix) or `tg N @ dD` (each token at its own depth: the
        middle one's cost, the cost being linear in the depth)."""
        if kind == "tg":
            return self.decode_terms(decode_cost(work, settings, depth + n_tokens // 2))
        total: dict[Term, float] = {}
        for start, n in ubatches(settings, n_tokens, depth):
            terms = (self.decode_terms(decode_cost(work, settings, start, output=False)) if n == 1
                     else self.ubatch_terms(ubatch_cost(work, settings, start, n)))
            for t, v in terms.items():
                total[t] = total.get(t, 0.0) + v
        return {t: v / max(1, n_tokens) for t, v in total.items()}

    def test_tokens_per_second(self, work: ModelWork, settings: Params, kind: str, n_tokens: int, depth: int) -> float:
        """What llama-bench prints for the test (its avg_ts)."""
        return 1.0 / sum(self.test_terms(work, settings, kind, n_tokens, depth).values())

    def prefill_seconds(self, work: ModelWork, settings: Params, n_prompt: int, depth: int = 0) -> float:
        """Seconds to prefill `n_prompt` tokens onto `depth` cached ones."""
        if n_prompt <= 0:
            return 0.0
        return n_prompt / self.test_tokens_per_second(work, settings, "pp", n_prompt, depth)

    def scaled(self, decode: float, prefill: float, basis: str) -> "SpeedModel":
        return replace(self, decode_scale=decode, prefill_scale=prefill, basis=basis)


def machine_of(c) -> Machine:
    """A named card's or machine's figures (`settings.cards.Card`), in bytes/s and FLOP/s."""
    tera = 1e12
    return Machine(c.name, c.bandwidth_gbps * 1e9, c.fp32_tflops * tera,
                   c.fp16_matrix_tflops * tera if c.fp16_matrix_tflops else None,
                   c.int8_matrix_tops * tera if c.int8_matrix_tops else None, c.source)


def split_seconds(costs: dict[int, TokenCost], devices: tuple[int | None, ...], models: tuple[SpeedModel, ...],
                  link, n_embd: int) -> tuple[float, tuple[float, ...]]:
    """Seconds per decoded token over a layer split (`layer_split.layer_devices`), and each card's share.

    A decoded token passes the cards one after another (pipeline parallelism overlaps only the ubatches of a
    prompt): each card reads its own layers' bytes at its own bandwidth, and each hop from one device to
    the next moves the token's activations (n_embd f32) over the link (`speed.Link`) and pays its latency.
    """
    per_card = [0.0] * len(models)
    for il, cost in costs.items():
        d = devices[il] if il < len(devices) else None
        if d is not None:
            per_card[d] += models[d].seconds(cost)
    used = list(dict.fromkeys(x for x in devices if x is not None))
    hops = max(0, len(used) - 1)
    transfer = hops * (n_embd * ACTIVATION_BYTES / link.bandwidth + link.latency_s)
    return sum(per_card) + transfer, tuple(per_card)


def rates_for(backend: str, machine: str | None = None) -> Rates:
    """A backend's fitted coefficients (settings.speed_rates, written by benchmarks/speed_published.py): the machine's
    own where its published runs cover enough models (with the band of a model left out of them), else the
    backend's (with the band of a whole machine left out: a card with no runs of its own)."""
    data = RATES[str(backend)]

    def band(b) -> Band | None:
        return Band(b["low"], b["high"], b["runs"], b["machines"], b["how"]) if b and b.get("runs") else None

    own = data.get("machines", {}).get(machine or "")
    runs = f"benchmarks/published_runs/{backend}.toml"
    if own is not None:
        return Rates(str(backend), dict(own["coefficients"]), band(own["decode_band"]), band(own["prefill_band"]),
                     f"coefficients fitted on this machine's own published llama-bench runs ({runs})")
    def other(kind: str) -> Band | None:
        """A whole machine held out; where the runs cover too few machines for that, a model held out, said so."""
        held = band(data.get(f"{kind}_band_other"))
        if held is not None:
            return held
        known = band(data.get(f"{kind}_band"))
        return None if known is None else replace(known, how=known.how + "; too few machines to hold one out, so a "
                                                  "card without runs of its own may fall further")

    return Rates(str(backend), dict(data["coefficients"]), other("decode"), other("prefill"),
                 f"the {backend} backend's coefficients, fitted on {data['rows']} rows of published llama-bench runs "
                 f"on other machines ({len(data['sources'])} sources, {runs})")
