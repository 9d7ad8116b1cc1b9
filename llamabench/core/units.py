"""Display formatting at the edge: bytes are stored, MiB/GiB are derived."""

MIB = 1024**2
GIB = 1024**3


def mib(n_bytes: int | float) -> str:
    return f"{n_bytes / MIB:.2f} MiB"


def gib(n_bytes: int | float) -> str:
    return f"{n_bytes / GIB:.2f} GiB"


def file_size(n_bytes: int | float) -> str:
    """A file size as the tool's tables and --vram count it (GiB; --vram reads a "16 GB" card as 16 GiB) and as its
    publisher states it (GB of 10^9 bytes, said so): the same file is then never 21.20 GB in one command and
    19.74 GiB in another without both in view."""
    return f"{n_bytes / GIB:.2f} GiB ({n_bytes / 1e9:.2f} GB of 10^9 bytes)"


def thousands(n: int) -> str:
    return f"{n:,}"


def duration(seconds: float) -> str:
    """A time for people: 45 s, 12 min, 3.2 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def plural(n: int, word: str) -> str:
    """The word for n of it: cell for 1, cells for any other count."""
    return word if n == 1 else word + "s"


def count(n: int, word: str) -> str:
    """1 cell, 2 cells, 1,024 cells."""
    return f"{n:,} {plural(n, word)}"
