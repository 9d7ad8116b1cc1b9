"""Display formatting at the edge: bytes are stored, MiB/GiB are derived."""

MIB = 1024**2
GIB = 1024**3


def mib(n_bytes: int | float) -> str:
    return f"{n_bytes / MIB:.2f} MiB"


def gib(n_bytes: int | float) -> str:
    return f"{n_bytes / GIB:.2f} GiB"


def file_size(n_bytes: int | float) -> str:
    """A file size as its publisher states it (GB, 10^9 bytes) and as the tool's tables count it (GiB): the same
    file is then never 21.20 GB in one command and 19.74 GiB in another without both in view."""
    return f"{n_bytes / 1e9:.2f} GB ({n_bytes / GIB:.2f} GiB)"


def thousands(n: int) -> str:
    return f"{n:,}"
