"""Memory budgets as the user writes them: one card, one machine's cards joined by +, a reserve per card.
Pure: no file, no llama.cpp."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..core.errors import UsageError
from ..core.suggest import closest
from ..core.units import GIB, MIB
from .cards import CARDS, families, find_card
from .values import LLAMA_MAX_DEVICES

_SIZE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(gib|gb|mib|mb|tib|tb|g|m)?\s*$", re.IGNORECASE | re.ASCII)
# GB, MB and TB are read as GiB, MiB and TiB: a "24 GB" card (3090, 4090) holds 24 GiB, as its maker and
# nvidia-smi count it, and RAM is sold the same way; taking 24 x 10^9 would size a 22.35 GiB card
_UNITS = {None: GIB, "gib": GIB, "g": GIB, "gb": GIB, "mib": MIB, "m": MIB, "mb": MIB, "tib": 1024 * GIB,
          "tb": 1024 * GIB}
MAX_SIZE = 1024**5  # a PiB: no card or machine is bigger


@dataclass(frozen=True)
class Card:
    """One device of a machine: its memory, and where it is (a remote ggml-rpc-server, or None: this machine)."""

    label: str
    bytes: int
    endpoint: str | None = None

    @property
    def remote(self) -> bool:
        return self.endpoint is not None


DEFAULT_OS_RESERVE = 4 * GIB  # a unified machine: kept for the OS and its apps out of the RAM (--reserve)


@dataclass(frozen=True)
class UnifiedPool:
    """A machine whose GPU shares the system RAM (Metal, Vulkan with uma: 1, CUDA on GB10): one pool, two limits.
    The device's buffers must fit its own ceiling (the budget's bytes); the device's, the host's and the mapped
    weights together must fit the RAM less what the OS keeps."""

    ram: int  # the machine's physical RAM, bytes
    backend: str  # metal, vulkan, rocm, cuda
    ceiling_basis: str  # where the device's ceiling comes from, in words
    os_reserve: int = DEFAULT_OS_RESERVE

    @property
    def usable(self) -> int:
        return self.ram - self.os_reserve

    @property
    def maps_file(self) -> bool:
        """Metal maps the GGUF into its device buffer (buffer_from_host_ptr): the buffer spans the file's tensors,
        once per mapping (llama_model_loader::get_mapping_range)."""
        return self.backend == "metal"

    @property
    def ceiling_name(self) -> str:
        return "working set" if self.backend == "metal" else "device memory"


@dataclass(frozen=True)
class Budget:
    """A memory budget as the user wrote it (its label) and in bytes: one card, or one machine's cards
    (`--vram 24GiB+12GiB`, remote hosts first as llama.cpp orders its devices), `bytes` their sum."""

    label: str
    bytes: int
    cards: tuple[Card, ...] = ()  # () : one card of `bytes`
    pool: UnifiedPool | None = None  # a unified machine: `bytes` is its device's ceiling within the RAM

    @property
    def devices(self) -> tuple[Card, ...]:
        return self.cards or (Card(self.label, self.bytes),)

    @property
    def multi(self) -> bool:
        return len(self.devices) > 1


def _size_value(text) -> tuple[str, float]:
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"'{text}' is not a size (write e.g. 16GiB, 24, 512MiB; plain numbers are GiB)")
    unit = m[2].lower() if m[2] else None
    label = str(text).strip().replace(" ", "")
    if unit is None:
        label += "GiB"  # a plain number is GiB, and the label says so
    # 24GB stays 24GB as written (round 3: "64GB" printed as 64GiB read as a different size); it holds 24 GiB, as its
    # maker and nvidia-smi count it, and every budget line prints its GiB beside the label
    return label, float(m[1]) * _UNITS[unit]


def budget(text) -> Budget:
    """A memory size: 16GiB, 24, 512MiB, 2GB (plain numbers are GiB, GB is GiB); positive, at most a PiB. Sizes joined
    by + are one machine's cards, in device order: 24GiB+12GiB."""
    if isinstance(text, Budget):
        return text
    if "+" in str(text).strip().lstrip("+"):
        pieces = str(text).split("+")
        if any(not x.strip() for x in pieces):
            raise UsageError(f"'{text}' is not a list of cards (write e.g. 24GiB+12GiB)")
        if len(pieces) >= LLAMA_MAX_DEVICES:
            raise UsageError(f"'{text}': llama.cpp takes at most {LLAMA_MAX_DEVICES - 1} devices")
        cards = tuple(Card(b.label, b.bytes) for b in map(budget, pieces))
        return Budget("+".join(c.label for c in cards), sum(c.bytes for c in cards), cards)
    named = find_card(str(text))
    if named is not None and named.unified:  # a unified machine by name: its device's ceiling within its RAM
        ceiling = int((named.ceiling_mib or named.vram_gib * 1024) * MIB)
        return Budget(named.id, ceiling, pool=UnifiedPool(int(named.vram_gib * GIB), named.backend,
                                                          named.ceiling_source))
    if named is not None:  # a card by name, as roofline --card spells it: its memory
        return Budget(named.id, int(named.vram_gib * GIB))
    if not _SIZE.match(str(text)) and re.search(r"[a-z]{2}", str(text), re.IGNORECASE):  # a name, misspelt
        close = closest(str(text), [c.id for c in CARDS])
        raise UsageError(f"'{text}' is not a size, nor a card's name" + (f"; did you mean {close}?" if close else ""),
                         hint="write a size (24GiB) or a card name: " + families())
    label, value = _size_value(text)
    if re.fullmatch(r"\s*\d{4}\s*", str(text)):  # 4090 read as GiB would fit anything: a card's model number
        named = closest(str(text), [c.id for c in CARDS])
        guess = f"; did you mean {named} ({find_card(named).vram_gib:g} GiB)?" if named else ": a card's number?"
        raise UsageError(f"'{text}' would be {text.strip()} GiB{guess}",
                         hint="write a size (24GiB) or a card name: " + families())
    if value <= 0:
        raise UsageError(f"'{text}' must be positive")
    if value < 1:
        raise UsageError(f"'{text}' is less than a byte: give a size, e.g. 512MiB")
    if value > MAX_SIZE:
        raise UsageError(f"'{text}' is larger than any machine")
    return Budget(label, int(value))


def reserve(text) -> "int | tuple[int, ...]":
    """The reserve: one size for every card, or one per card joined by + (512MiB+1GiB), in device order."""
    if isinstance(text, (list, tuple)):
        return tuple(size_or_zero(x) for x in text)
    if "+" in str(text).strip().lstrip("+"):
        pieces = str(text).split("+")
        if any(not x.strip() for x in pieces):
            raise UsageError(f"'{text}' is not a list of sizes (write e.g. 512MiB+1GiB)")
        return tuple(size_or_zero(x) for x in pieces)
    return size_or_zero(text)


def size_or_zero(text) -> int:
    """Bytes of a size that may be 0 (a reserve)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise UsageError(f"{text} cannot be negative")
        if text > MAX_SIZE:
            raise UsageError(f"{text} bytes is larger than any machine")
        return text
    label, value = _size_value(text)
    if value < 0:
        raise UsageError(f"'{text}' cannot be negative")
    return 0 if value == 0 else budget(text).bytes


def metal_working_set(ram_bytes: int) -> int:
    """recommendedMaxWorkingSetSize by the RAM, where it is not known: 2/3 of it up to 36 GiB, 3/4 above, as
    llama.cpp's Metal logs of 8 to 192 GB Macs print it (the newest macOS gives a 16 GB M4 74%: --wired-limit gives
    the real one)."""
    return ram_bytes * 3 // 4 if ram_bytes > 36 * GIB else ram_bytes * 2 // 3


def unified_budget(b: Budget, backend: str) -> Budget:
    """A plain size made a unified machine's RAM (--unified): on Metal its working set a share of it, elsewhere the
    RAM itself (the heaps' budget on Vulkan, MemAvailable on GB10: the RAM limit binds first)."""
    if b.multi or b.pool is not None or find_card(b.label) is not None:
        raise UsageError(f"--unified takes one size per machine, its RAM (e.g. --vram 24GB --unified), not {b.label}",
                         hint="a named unified machine (apple-m4-pro-24gb, dgx-spark) needs no --unified")
    if backend == "metal":
        share = "3/4" if b.bytes > 36 * GIB else "2/3"
        return Budget(b.label, metal_working_set(b.bytes),
                      pool=UnifiedPool(b.bytes, backend, f"{share} of the RAM, macOS's recommendedMaxWorkingSetSize as "
                                       "llama.cpp's Metal logs show it (--wired-limit gives the real one)"))
    return Budget(b.label, b.bytes, pool=UnifiedPool(b.bytes, backend, "the RAM (the device reports the pool)"))


WIRED_LIMIT_DEFAULT = 0  # iogpu.wired_limit_mb=0: macOS's own ceiling, recommendedMaxWorkingSetSize (its default)


def with_wired_limit(b: Budget, wired_limit_mib: int) -> Budget:
    """A Mac's working set raised (or lowered) as `sudo sysctl iogpu.wired_limit_mb=N` does; 0 is what the sysctl's 0
    is, macOS's default ceiling (recommendedMaxWorkingSetSize), not a GPU of 0 bytes."""
    if b.pool is None or b.pool.backend != "metal":
        raise UsageError(f"--wired-limit is macOS's iogpu.wired_limit_mb: {b.label} is not a Mac",
                         hint="name one (--vram apple-m4-pro-24gb), or give --vram SIZE --unified --backend metal")
    if wired_limit_mib == WIRED_LIMIT_DEFAULT:
        return replace(b, pool=replace(b.pool, ceiling_basis=f"{b.pool.ceiling_basis}; --wired-limit 0 is "
                                                             "iogpu.wired_limit_mb=0, macOS's default"))
    if wired_limit_mib * MIB > b.pool.ram:
        raise UsageError(f"--wired-limit {wired_limit_mib} is more than {b.label}'s {b.pool.ram / GIB:g} GiB of RAM")
    basis = f"iogpu.wired_limit_mb={wired_limit_mib} (--wired-limit)"
    return Budget(b.label, wired_limit_mib * MIB, pool=replace(b.pool, ceiling_basis=basis))


def ram(text) -> Budget:
    """--ram: one machine's system RAM, one size (a + would make two cards of it, and a card's name is no RAM)."""
    if isinstance(text, Budget):
        return text
    if "+" in str(text).strip().lstrip("+") or find_card(str(text)) is not None:
        raise UsageError(f"--ram {text}: one size, the machine's system RAM (e.g. 64GiB)",
                         hint="cards are --vram's: 24GiB+12GiB")
    return budget(text)
