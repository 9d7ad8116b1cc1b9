"""The natural-language text `quality` scores: a file of the user's (-f), or one every Python carries.

The default is the documentation topics of Python's own `pydoc_data.topics` (about 465,000 characters of English
prose and code, the text `help()` shows): natural language, available offline, the same on every machine with the
same Python. A synthetic text would make the divergences meaningless. The record names the text, its hash and its
length, so two results are known to have scored the same tokens.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError

DEFAULT_TEXT = "pydoc_data.topics"
TOKENIZE_DEADLINE_S = 300.0  # the text tokenized and both vocabularies loaded (llama.worker.text_tokens)
# -f's text, at most: what the tokenizing deadline meets for prose. llama.cpp splits a text at each match of a
# user-defined token before it tokenizes (llama-vocab.cpp:3255, tokenizer_st_partition) and finds each fragment again
# from the list's head (std::distance, std::next), so its time grows with the square of the matches; in Gemma 3's
# vocabulary every newline and run of spaces is one. Gemma 3 270M on this 2-core CPU (2026-12-07): the 0.44 MiB
# default 2.4 s, 1.8 MiB of it 29 s, 3.6 MiB 107 s, 4.1 MiB 132 s: 4 MiB is under half the deadline, and 1M tokens
# (30 chunks of 32k; wiki.test.raw, 1.3 MB, fits three times). A text of little but newlines meets the deadline sooner
# (100 KiB of "a\n\n" takes 16 s, 200 KiB 62 s): the deadline ends it, in one line.
MAX_TEXT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ScoredText:
    """A text and who it is: its name (a path, or the default's module), its sha256 and its characters."""

    name: str
    text: str
    sha256: str

    @property
    def n_chars(self) -> int:
        return len(self.text)


def _hashed(name: str, text: str) -> ScoredText:
    return ScoredText(name, text, hashlib.sha256(text.encode("utf-8")).hexdigest())


def default_text() -> ScoredText:
    """Python's documentation topics, in the module's order, one blank line apart."""
    from pydoc_data import topics  # the standard library's: not our code, loaded only when asked

    return _hashed(f"{DEFAULT_TEXT} (Python {sys.version_info.major}.{sys.version_info.minor})",
                   "\n\n".join(topics.topics.values()))


def read_text(path: Path | str | None) -> ScoredText:
    """The text of `path` (UTF-8), or the default; UsageError in one line for one that cannot be read as text."""
    if path is None:
        return default_text()
    path = Path(path)
    try:
        if not path.is_file():
            raise UsageError(f"{path}: no such text file" if not path.exists() else f"{path}: not a regular file")
        if path.stat().st_size > MAX_TEXT_BYTES:
            raise UsageError(f"{path}: {path.stat().st_size:,} bytes is more text than quality reads "
                             f"({MAX_TEXT_BYTES // (1024 * 1024)} MiB at most, what llama.cpp tokenizes within "
                             f"quality's {TOKENIZE_DEADLINE_S:g} s)",
                             hint="a part of the text: --chunks N scores N chunks of it anyway")
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the text ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise UsageError(f"{path}: holds NUL characters: a binary file, not a text")
    if not text.strip():
        raise UsageError(f"{path}: the text is empty")
    return _hashed(str(path), text)
