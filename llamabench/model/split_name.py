"""The names of a split GGUF's parts, once: llama.cpp's llama_split_path and llama_split_prefix.

gguf-split writes a set as PREFIX-00001-of-00003.gguf, PREFIX-00002-of-00003.gguf, ...; llama.cpp finds
the other parts by name, beside the first. Part numbers here count from 1, as the names do.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_SUFFIX = r"-(\d{5})-of-(\d{5})\.gguf"


class SplitName(NamedTuple):
    prefix: str  # the name less its -NNNNN-of-NNNNN.gguf
    number: int  # which part (1-based)
    count: int
    tail: str = ""  # what followed the .gguf (a URL's query string, an hf:// @REVISION)


def split_path(prefix: str, number: int, count: int) -> str:
    """llama_split_path: the name of part `number` (1-based) of `count`, PREFIX-00002-of-00003.gguf."""
    return f"{prefix}-{number:05d}-of-{count:05d}.gguf"


def split_prefix(name: str, tail: str = "") -> SplitName | None:
    """llama_split_prefix: a part's name read back (prefix, number, count), or None for a name that is not a
    part's. `tail` is a regular expression for what may follow the .gguf (nothing by default)."""
    m = re.search(f"{_SUFFIX}({tail})$", name)
    return SplitName(name[:m.start()], int(m[1]), int(m[2]), m[3]) if m else None
