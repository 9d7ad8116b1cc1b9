"""Display formatting at the edge: bytes are stored, MiB/GiB are derived."""

MIB = 1024**2
GIB = 1024**3


def mib(n_bytes: int | float) -> str:
    return f"{n_bytes / MIB:.2f} MiB"


def gib(n_bytes: int | float) -> str:
    return f"{n_bytes / GIB:.2f} GiB"


def thousands(n: int) -> str:
    return f"{n:,}"
