"""Strings read from files (GGUF metadata, results files) made safe to print on a terminal.

A model's `general.name` or a record's label can hold escape sequences that retitle the terminal, clear
the screen, or a newline that forges a line ("all match"). Every reader of a file passes the strings it
hands on through `escaped`: control characters (C0, DEL, C1, and the Unicode line and paragraph
separators and bidirectional overrides) become visible `\\xNN` / `\\uNNNN` escapes; other text is kept.
"""

from __future__ import annotations

import re

# C0 controls (tab, newline and CR too: one value is one line), DEL, C1 controls, line/paragraph
# separators, the bidirectional embeddings, overrides and isolates that reorder what a terminal shows, and lone
# surrogates (JSON's "\ud800": no encoder can print or write them)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escaped(text: str) -> str:
    """`text` with every control character written as an escape; unchanged when it has none."""
    return _UNSAFE.sub(_escape, text)


def escaped_tree(value):
    """Every string in a JSON-like value (dict keys too) escaped; other values as they are."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, dict):
        return {escaped(k) if isinstance(k, str) else k: escaped_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escaped_tree(v) for v in value]
    if isinstance(value, tuple):
        return tuple(escaped_tree(v) for v in value)
    return value
