"""Twins of catalog models, written once into the cache and reused while their keys and code are unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Iterable

from .. import architectures
from ..metadata import ModelMetadata
from ..paths import cache_dir
from . import build, context, writer
from .build import family_for, write_twin


def cached_file(kind_folder: str, meta: ModelMetadata, label: str, extra_files: Iterable[str],
                write: Callable[[ModelMetadata, Path], object]) -> Path:
    """`cache_dir()/kind_folder/label-DIGEST.gguf`, written by `write(meta, path)` when absent.

    The digest covers the source keys and the code that writes the file: the architecture table, the
    writer, the twin builder and context, the architecture's family module, and `extra_files` (a
    caller's own module).
    """
    files = [architectures.__file__, build.__file__, context.__file__, writer.__file__,
             family_for(meta.architecture).__file__, *extra_files]
    digest = hashlib.sha256(json.dumps(sorted(meta.keys.items()), default=str).encode())
    for name in files:
        digest.update(Path(name).read_bytes())
    path = cache_dir() / kind_folder / f"{label}-{digest.hexdigest()[:10]}.gguf"
    if not path.exists():
        write(meta, path)  # the writer renames a finished file into place (writer.write_gguf)
    return path


def cached_twin(meta: ModelMetadata, label: str) -> Path:
    return cached_file("twins", meta, label, (), write_twin)
