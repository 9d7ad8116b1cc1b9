"""The sweep plan: configuration cells and the tests inside each. Pure."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Cell:
    """One context configuration: one child process, one llama.cpp context."""

    n_ctx: int
    type_k: str
    type_v: str
    flash_attn: bool
    n_gpu_layers: int
    n_batch: int
    n_ubatch: int
    n_threads: int

    @property
    def key(self) -> str:
        return (f"c{self.n_ctx}/k{self.type_k}/v{self.type_v}/fa{int(self.flash_attn)}/ngl{self.n_gpu_layers}"
                f"/b{self.n_batch}/ub{self.n_ubatch}/t{self.n_threads}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Test:
    kind: str  # "pp" (prompt processing) or "tg" (token generation)
    n_tokens: int
    depth: int

    @property
    def name(self) -> str:
        base = f"{self.kind}{self.n_tokens}"
        return base if self.depth == 0 else f"{base} @ d{self.depth}"


@dataclass(frozen=True)
class SweepSpec:
    n_ctx: tuple[int, ...] = (131072,)
    n_prompt: tuple[int, ...] = (512,)
    n_gen: tuple[int, ...] = (128,)
    depths: tuple[int, ...] = (0,)
    type_k: tuple[str, ...] = ("f16",)
    type_v: tuple[str, ...] = ("f16",)
    flash_attn: tuple[bool, ...] = (True,)
    n_gpu_layers: tuple[int, ...] = (0,)
    n_batch: tuple[int, ...] = (2048,)
    n_ubatch: tuple[int, ...] = (512,)
    n_threads: tuple[int, ...] = (2,)
    repetitions: int = 3


def cells(spec: SweepSpec) -> list[Cell]:
    combos = itertools.product(spec.n_ctx, spec.type_k, spec.type_v, spec.flash_attn, spec.n_gpu_layers,
                               spec.n_batch, spec.n_ubatch, spec.n_threads)
    return [Cell(*combo) for combo in combos]


def tests(spec: SweepSpec) -> list[Test]:
    """Tests in the order a child runs them: depths ascending, prompt tests then generation tests."""
    out = []
    for depth in sorted(set(spec.depths)):
        out += [Test("pp", p, depth) for p in spec.n_prompt if p > 0]
        out += [Test("tg", n, depth) for n in spec.n_gen if n > 0]
    return out


def record_key(cell: Cell, test: Test) -> str:
    return f"{cell.key}|{test.name}"
