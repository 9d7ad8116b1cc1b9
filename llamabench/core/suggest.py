"""Did you mean: the known name a misspelt one most likely meant. Pure."""

from __future__ import annotations

import difflib
import re


def closest(word: str, known: list[str]) -> str | None:
    """The known name a misspelt one most likely meant (qwen3.5-35b-a3b -> qwen3-5-35b-a3b, 4090 -> rtx-4090)."""
    def norm(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    by_norm = {norm(k): k for k in known}
    if norm(word) in by_norm:
        return by_norm[norm(word)]
    contains = [k for k in known if norm(word) and norm(word) in norm(k)]
    if len(contains) == 1:
        return contains[0]
    close = difflib.get_close_matches(norm(word), list(by_norm), n=1, cutoff=0.6)
    return by_norm[close[0]] if close else None
