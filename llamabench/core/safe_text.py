"""Strings read from files (GGUF metadata, results files) made safe to print on a terminal.

A model's `general.name` or a record's label can hold escape sequences that retitle the terminal, clear
the screen, or a newline that forges a line ("all match"). Every reader of a file passes the strings it
hands on through `escaped`: control characters (C0, DEL, C1, and the Unicode line and paragraph
separators and bidirectional overrides) become visible `\\xNN` / `\\uNNNN` escapes; other text is kept.
"""

from __future__ import annotations

import json
import re
import shlex

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


def shown_path(path) -> str:
    """A path (str or os.PathLike) as printed or written into a text file: one line, control characters and the
    surrogates that stand for a name's non-UTF-8 bytes escaped, so that printing or encoding it never fails."""
    return escaped(str(path))


def _shell_bytes(char: str) -> str:
    """One unsafe character as bash's $'...' escapes of its bytes in the file name (a surrogate is its byte)."""
    try:
        raw = char.encode("utf-8", "surrogateescape")  # \udcff from the file system: the byte 0xff
    except UnicodeEncodeError:
        raw = char.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{byte:02x}" for byte in raw)


def _ansi_c_quoted(text: str) -> str:
    """`text` as a bash/zsh $'...' word: each unsafe character its bytes as \\xNN, backslash and quote escaped."""
    body = "".join("\\" + char if char in "\\'" else _shell_bytes(char) if _UNSAFE.match(char) else char
                   for char in text)
    return f"$'{body}'"


def shell_word(text: str) -> str:
    """`text` as one word of a printed shell command: unchanged when plain, shlex-quoted when it holds spaces or
    shell characters, and in bash's $'...' form (runnable, one line, no raw control character) when it holds a
    control character or a non-UTF-8 byte."""
    if _UNSAFE.search(text):
        return _ansi_c_quoted(text)
    return shlex.quote(text)


def python_str(text: str) -> str:
    """`text` as a Python string literal in a printed call: "text" when plain, else a JSON literal (one line,
    ASCII; Python reads its \\uNNNN escapes back, a surrogate too, which os.fsencode turns into its byte)."""
    if _UNSAFE.search(text) or '"' in text or "\\" in text:
        return json.dumps(text)
    return f'"{text}"'
