"""Display formatting at the edge: bytes are stored, MiB/GiB are derived."""

MIB = 1024**2
GIB = 1024**3


def mib(n_bytes: int | float) -> str:
    return f"{n_bytes / MIB:.2f} MiB"


def gib(n_bytes: int | float) -> str:
    return f"{n_bytes / GIB:.2f} GiB"


def human_bytes(n_bytes: int | float) -> str:
    return gib(n_bytes) if abs(n_bytes) >= GIB else mib(n_bytes)


def thousands(n: int) -> str:
    return f"{n:,}"
