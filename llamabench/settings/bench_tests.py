"""The timed tests of one bench context, as llama-bench names them: pp512, tg128 @ d32768. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Iterable

from .sweep import MAX_TESTS, check_plan_size


class TestKind(StrEnum):
    __test__ = False  # not a pytest class
    PP = "pp"  # prompt processing (prefill)
    TG = "tg"  # token generation (decode)


@dataclass(frozen=True)
class BenchTest:
    """One timed test inside a context: llama-bench's pp512, tg128 @ d32768."""

    __test__ = False
    kind: TestKind
    n_tokens: int
    depth: int = 0

    @property
    def name(self) -> str:
        base = f"{self.kind}{self.n_tokens}"
        return base if self.depth == 0 else f"{base} @ d{self.depth}"


def bench_tests(n_prompt: Iterable[int], n_gen: Iterable[int], depths: Iterable[int]) -> list[BenchTest]:
    """The tests of one context in the order a child runs them: depths ascending, pp then tg."""
    n_prompt, n_gen, depths = list(n_prompt), list(n_gen), sorted(set(depths))
    check_plan_size("the tests of one context", {"-p/-n values": len(n_prompt) + len(n_gen), "depths": len(depths)},
                    MAX_TESTS)
    out = []
    for depth in depths:
        out += [BenchTest(TestKind.PP, p, depth) for p in n_prompt if p > 0]
        out += [BenchTest(TestKind.TG, n, depth) for n in n_gen if n > 0]
    return out
