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
MAX_TEXT_BYTES = 256 * 1024 * 1024


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
                             f"({MAX_TEXT_BYTES // (1024 * 1024)} MiB at most)")
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
