"""Twins of catalog models, written once into the cache and reused while their keys are unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..metadata import ModelMetadata
from ..paths import cache_dir
from . import build, context, writer
from .build import family_for, write_twin


def _code_fingerprint(arch: str) -> str:
    """The twin changes when its writer or family code changes: hash their source files."""
    files = [build.__file__, context.__file__, writer.__file__, family_for(arch).__file__]
    return hashlib.sha256(b"".join(Path(f).read_bytes() for f in files)).hexdigest()


def twin_path_for(meta: ModelMetadata, label: str) -> Path:
    digest = hashlib.sha256(
        json.dumps({"keys": {k: v for k, v in sorted(meta.keys.items())}, "code": _code_fingerprint(meta.architecture)}, default=str).encode()
    ).hexdigest()[:10]
    return cache_dir() / "twins" / f"{label}-{digest}.gguf"


def cached_twin(meta: ModelMetadata, label: str) -> Path:
    path = twin_path_for(meta, label)
    if not path.exists():
        write_twin(meta, path)
    return path
