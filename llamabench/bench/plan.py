"""The sweep plan: configuration cells and the tests inside each. Pure."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from enum import StrEnum

from ..footprint import CacheSettings


class TestKind(StrEnum):
    __test__ = False  # not a pytest class
    PP = "pp"  # prompt processing (prefill)
    TG = "tg"  # token generation (decode)


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
    no_repack: bool = False  # llama-bench's -nr: no repacked copy of the weights (CPU_REPACK, AMX)
    poll: int = 50  # the CPU threadpool, as llama-bench attaches it: --poll, --cpu-mask, --cpu-strict
    cpu_mask: str = "0x0"
    cpu_strict: bool = False

    @property
    def key(self) -> str:
        return (f"c{self.n_ctx}/k{self.type_k}/v{self.type_v}/fa{int(self.flash_attn)}/ngl{self.n_gpu_layers}"
                f"/b{self.n_batch}/ub{self.n_ubatch}/t{self.n_threads}" + ("/nr1" if self.no_repack else "")
                + (f"/poll{self.poll}" if self.poll != 50 else "")
                + (f"/mask{self.cpu_mask}" if self.cpu_mask != "0x0" else "") + ("/strict" if self.cpu_strict else ""))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Cell":
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})

    def settings(self) -> CacheSettings:
        """The context parameters of this cell: the one place a cell becomes CacheSettings."""
        return CacheSettings(n_ctx=self.n_ctx, type_k=self.type_k, type_v=self.type_v, flash_attn=self.flash_attn,
                             n_batch=self.n_batch, n_ubatch=self.n_ubatch)


@dataclass(frozen=True)
class Test:
    __test__ = False  # not a pytest class
    kind: TestKind
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
    no_repack: tuple[bool, ...] = (False,)
    poll: tuple[int, ...] = (50,)
    cpu_mask: tuple[str, ...] = ("0x0",)
    cpu_strict: tuple[bool, ...] = (False,)
    prio: int = 0
    repetitions: int = 3


def cells(spec: SweepSpec) -> list[Cell]:
    combos = itertools.product(spec.n_ctx, spec.type_k, spec.type_v, spec.flash_attn, spec.n_gpu_layers,
                               spec.n_batch, spec.n_ubatch, spec.n_threads, spec.no_repack, spec.poll, spec.cpu_mask,
                               spec.cpu_strict)
    return [Cell(*combo) for combo in combos]


def tests(spec: SweepSpec) -> list[Test]:
    """Tests in the order a child runs them: depths ascending, prompt tests then generation tests."""
    out = []
    for depth in sorted(set(spec.depths)):
        out += [Test(TestKind.PP, p, depth) for p in spec.n_prompt if p > 0]
        out += [Test(TestKind.TG, n, depth) for n in spec.n_gen if n > 0]
    return out


def record_key(cell: Cell, test: Test) -> str:
    return f"{cell.key}|{test.name}"
