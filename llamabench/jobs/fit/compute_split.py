"""llama.cpp's dry-run figures of one placement (its compute buffers, card and host apart, and where read the weights
and caches each device took), and the estimate between two of them. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ComputeSplit:
    """llama.cpp's dry-run figures of one placement: its compute (+ output) buffers on the card and on the
    host, and, where they were read from the backend (a GPU build, remote hosts), the weights each device took."""

    card: int
    host: int = 0
    cards: tuple[int, ...] = ()  # several devices: each one's, in device order (card is their sum)
    # the weights each device took in llama.cpp's dry run, in device order, and those left on the host (the
    # backend may refuse a tensor's type or size: llama_model::load_tensors keeps it on the CPU); (): not read
    weights: tuple[int, ...] = ()
    host_weights: int | None = None
    host_tensors: frozenset[str] | None = None  # the weight tensors it kept in system RAM, by name
    # the caches llama.cpp allocated: (KV, recurrent) on each device in device order, and in system RAM; what a
    # model without a layout rule is sized with (ModelGeometry.no_rule). (): not read
    caches: tuple[tuple[int, int], ...] = ()
    host_caches: tuple[int, int] = (0, 0)

    @property
    def total(self) -> int:
        return self.card + self.host

    def per_device(self, n_devices: int) -> tuple[int, ...]:
        if len(self.cards) == n_devices:
            return self.cards
        if n_devices == 1:
            return (self.card,)
        # an estimate of another device count (the pure tests' fakes): the same on each card
        return (self.card,) * n_devices


def interpolated(low: ComputeSplit, high: ComputeSplit, n_low: int, n_high: int, n: int) -> ComputeSplit:
    """The compute buffers at n between two dry runs, linearly (an estimate the search then checks)."""
    f = (n - n_low) / (n_high - n_low) if n_high > n_low else 1.0
    mix = lambda a, b: round(a + f * (b - a))  # noqa: E731
    cards = tuple(mix(a, b) for a, b in zip(low.cards, high.cards)) if len(low.cards) == len(high.cards) else ()
    return replace(high, card=mix(low.card, high.card), host=mix(low.host, high.host), cards=cards or high.cards)


def as_split(value: "ComputeSplit | int") -> ComputeSplit:
    """A compute callable may answer a plain int (all of it on the card): the pure tests' fakes do."""
    return value if isinstance(value, ComputeSplit) else ComputeSplit(int(value))
