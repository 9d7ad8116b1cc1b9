"""Twins of catalog models, written once into the cache and reused while their keys and code are unchanged."""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from ...core.errors import UntrustedCache
from ...core.safe_text import escaped
from ...llama import user_model
from ...model import architectures
from ...model.metadata import ModelMetadata
from ...world.outputs import OutputError
from ...world.paths import CACHE_ENV, cache_dir
from ...world.private import private_folder, trusted_file
from ...world.versions import LLAMA_CPP_PYTHON_VERSION
from . import build, generic, writer
from .build import write_twin


def cached_file(kind_folder: str, meta: ModelMetadata, label: str, extra_files: Iterable[str],
                write: Callable[[ModelMetadata, Path], object]) -> Path:
    """`cache_dir()/kind_folder/label-DIGEST.gguf`, written by `write(meta, path)` when absent.

    The digest covers the source keys, the llama.cpp version (the tensors are llama.cpp's own list) and the
    code that writes the file: the architecture table, the writer, the twin builder, the generic writer and
    its llama.cpp model, and `extra_files` (a caller's own module).
    """
    files = [architectures.__file__, build.__file__, generic.__file__, user_model.__file__, writer.__file__,
             *extra_files]
    digest = hashlib.sha256(json.dumps([sorted(meta.keys.items()), meta.tied_embeddings], default=str).encode())
    digest.update(LLAMA_CPP_PYTHON_VERSION.encode())
    for name in files:
        digest.update(Path(name).read_bytes())
    name = f"{label[:100]}-{digest.hexdigest()[:10]}.gguf"
    path = cache_dir() / kind_folder / name
    try:
        private_folder(path.parent)  # 0700, the user's own, no link (UntrustedCache otherwise)
        if trusted_file(path):  # a regular file of the user's: never a link to a FIFO, never another user's file
            return path
    except UntrustedCache as exc:
        raise UntrustedCache(f"{exc}; the twin cache is not used", hint=exc.hint) from None
    try:
        write(meta, path)  # the writer renames a finished file into place (writer.write_gguf)
    except OutputError as exc:  # a read-only or full cache: this run's own temporary folder instead
        try:
            fallback = _run_folder() / kind_folder / name
            if not fallback.exists():
                write(meta, fallback)
        except (OSError, OutputError):
            raise exc from None
        print(escaped(f"llamabench: warning: {exc}; wrote it to {fallback.parent} for this run instead (set "
                      f"{CACHE_ENV} to a writable folder to keep it)"), file=sys.stderr)  # one line
        return fallback
    return path


@lru_cache(maxsize=1)
def _run_folder() -> Path:
    """A temporary folder of this process, removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="llamabench-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _write_any_twin(meta: ModelMetadata, path: Path):
    return write_twin(meta, path, require_layout=False)


def cached_twin(meta: ModelMetadata, label: str) -> Path:
    """A catalog model's geometry twin, of any architecture (llama.cpp's own tensor list)."""
    return cached_file("twins", meta, label, (), _write_any_twin)
