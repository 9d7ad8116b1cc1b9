"""Where llamabench keeps twins and writes reports (both overridable for tests and CI)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("LLAMABENCH_CACHE_DIR", Path.home() / ".cache" / "llamabench"))


def reports_dir() -> Path:
    """Reports a run writes by default: outside the tracked example under reports/ (git ignores it)."""
    return Path(os.environ.get("LLAMABENCH_REPORTS_DIR", Path("reports") / "local"))
