"""The one reader of llamabench's environment variables: where twins are cached, where reports go, which
catalog, the HTTP deadline. Each is read when it is used, never at import, and a bad value is one
UsageError naming the variable, not a traceback in every command.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..core import environment
from ..core.errors import CatalogError, UsageError

CACHE_ENV = "LLAMABENCH_CACHE_DIR"
REPORTS_ENV = "LLAMABENCH_REPORTS_DIR"
CATALOG_ENV = "LLAMABENCH_CATALOG"
HTTP_TIMEOUT_ENV = "LLAMABENCH_HTTP_TIMEOUT"
HTTP_LOW_SPEED_ENV = "LLAMABENCH_HTTP_LOW_SPEED"
RPC_TIMEOUT_ENV = "LLAMABENCH_RPC_TIMEOUT"
DEFAULT_RPC_TIMEOUT_S = 300.0
DEFAULT_LOW_SPEED = (1024, 15.0)  # as curl's --speed-limit 1024 --speed-time 15: fewer bytes in that long is a stall
SHIM_ENV = "LLAMABENCH_SHIM_DIR"
DEFAULT_HTTP_TIMEOUT_S = 120.0  # the whole header read: 30 MB of a big vocabulary over a slow link
MAX_HTTP_TIMEOUT_S = 3600.0


def _folder(name: str, default: Path) -> Path:
    """A folder variable: unset means the default; set, it must name a folder (an empty value is an error,
    not the working directory)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if not raw.strip():
        raise UsageError(f"{name} is set but empty: unset it or give a folder")
    if "\0" in raw:
        raise UsageError(f"{name} holds a NUL byte: give a folder")
    path = Path(raw)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{name}={raw}: not a folder")
    return path


def cache_dir() -> Path:
    return _folder(CACHE_ENV, Path.home() / ".cache" / "llamabench")


def shim_dir() -> Path:
    """Where the memory-breakdown shim is compiled to (llama/breakdown.py), per libllama: the cache unless set."""
    return _folder(SHIM_ENV, cache_dir() / "shim")


def reports_dir() -> Path:
    """Reports a run writes by default: outside the tracked example under reports/ (git ignores it)."""
    return _folder(REPORTS_ENV, Path("reports") / "local")


def catalog_override() -> Path | None:
    """LLAMABENCH_CATALOG: a readable regular file (a folder or a FIFO would fail late or block), or None.
    A CatalogError, so that work on a GGUF file goes on without the catalog (source._catalog_ids)."""
    raw = os.environ.get(CATALOG_ENV)
    if raw is None or raw == "":
        return None
    path = Path(raw)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise CatalogError(f"{CATALOG_ENV}={raw}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise CatalogError(f"{CATALOG_ENV}={raw}: not a regular file (give a models.toml)")
    return path


def _seconds(name: str, default: float, most: float) -> float:
    """A deadline variable in seconds: unset or empty means the default; anything else must be above 0."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip(environment.BLANK):
        return default
    return environment.seconds(name, raw, most=most)


def http_timeout() -> float:
    """LLAMABENCH_HTTP_TIMEOUT in seconds (default 120): the deadline of one remote header read, all requests."""
    return _seconds(HTTP_TIMEOUT_ENV, DEFAULT_HTTP_TIMEOUT_S, MAX_HTTP_TIMEOUT_S)


def rpc_timeout() -> float:
    """LLAMABENCH_RPC_TIMEOUT in seconds (default 300): how long a --rpc host may leave llama.cpp without an
    answer, where llama.cpp's RPC client itself waits for ever: each model load or context of a dry run (a few
    seconds each; over a slow link a minute or more: a graph reserve asks the host once per quantized matmul),
    and each step of a real context between two signs of progress. The memory query takes at most 30 s."""
    return _seconds(RPC_TIMEOUT_ENV, DEFAULT_RPC_TIMEOUT_S, MAX_HTTP_TIMEOUT_S)


def http_low_speed() -> tuple[int, float]:
    """LLAMABENCH_HTTP_LOW_SPEED as BYTES/SECONDS (default 1024/15): a remote read that gets fewer bytes than that
    in that many seconds fails in one line, without waiting for the whole deadline (curl's --speed-limit /
    --speed-time); 0/0 turns it off."""
    raw = os.environ.get(HTTP_LOW_SPEED_ENV)
    if raw is None or not raw.strip(environment.BLANK):
        return DEFAULT_LOW_SPEED
    n_bytes, slash, window = raw.partition("/")
    if not slash:
        raise UsageError(f"{HTTP_LOW_SPEED_ENV}={raw[:40]!r}: write BYTES/SECONDS, e.g. 1024/15")
    return (environment.whole_number(HTTP_LOW_SPEED_ENV, n_bytes, low=0, high=2**40, what="a count of bytes"),
            environment.seconds(HTTP_LOW_SPEED_ENV, window, most=MAX_HTTP_TIMEOUT_S, zero=True))
