"""The versions block of every record: llamabench, llama_cpp, gguf and the git commit."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

__version__ = "0.1.0"
LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # the pin of pyproject.toml: every llama.cpp rule here is read from its llama.cpp


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=5).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


@dataclass(frozen=True)
class Versions:
    """The versions block of every record."""

    llamabench: str = __version__
    llama_cpp_python: str | None = None
    gguf: str | None = None
    git_commit: str | None = None


def these_versions() -> Versions:
    return Versions(__version__, _dist_version("llama_cpp_python") or _dist_version("llama-cpp-python"),
                    _dist_version("gguf"), git_commit())
