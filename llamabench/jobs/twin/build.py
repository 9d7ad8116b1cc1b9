"""Geometry twins: a real model's layer layout and cache geometry, with a tiny everything else.

Every architecture's twin is written by generic.py: llama.cpp itself lists the tensors it creates for the model's
keys (the vocabulary, FFN and expert widths and the expert count shrunk where llama.cpp accepts that and the layer
layout stays), and the twin stores them all zero, a sparse file of a few kB on disk. What stays real: every key
that sizes a KV cache or a recurrent state or decides which layer is what, and the hidden size (a hole on disk).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...core.errors import UnsupportedArchitecture
from ...llama.worker import dry_runs
from ...model.geometry import ModelGeometry
from ...model.layout import geometry_from_metadata
from ...model.metadata import ModelMetadata
from ...settings.params import Params
from .generic import write_generic_twin


@dataclass(frozen=True)
class TwinResult:
    path: Path
    file_bytes: int  # apparent size
    disk_bytes: int  # allocated on disk (zero tensors are holes)
    n_tensors: int
    seconds: float
    geometry: ModelGeometry | None  # None: llamabench has no layout rule for the architecture (require_layout off)


def write_twin(
    meta: ModelMetadata,
    out_path: str | os.PathLike,
    *,
    progress: Callable[[int, int], None] | None = None,
    require_layout: bool = True,
) -> TwinResult:
    """The geometry twin of a model, from llama.cpp's own tensor list (generic.py). `require_layout` off: a twin
    even of an architecture llamabench has no layout rule for."""
    try:
        source_geometry = geometry_from_metadata(meta)  # validates the source and names bad keys
    except UnsupportedArchitecture:
        if require_layout:
            raise
        source_geometry = None
    written = write_generic_twin(meta, out_path, progress=progress)
    twin_meta = ModelMetadata(source=str(out_path), architecture=meta.architecture,
                              keys={k: v.value for k, v in written.metadata.items()})
    try:
        geometry = geometry_from_metadata(twin_meta)
    except UnsupportedArchitecture:
        geometry = None
    if source_geometry is not None and (geometry is None or [layer.kind for layer in geometry.layers]
                                        != [layer.kind for layer in source_geometry.layers]):
        written.path.unlink(missing_ok=True)
        raise UnsupportedArchitecture(f"the twin of {meta.source} would not keep its layer layout "
                                      f"({meta.architecture}); no twin written")
    return TwinResult(written.path, written.file_bytes, written.disk_bytes, written.n_tensors, written.seconds,
                      geometry)


CHECK_SETTINGS = (Params(n_ctx=4096, n_seq=1, repack=False),
                  Params(n_ctx=16384, n_seq=4, kv_unified=True, repack=False))


def caches_as_the_source(source_path: str, twin_path: str | os.PathLike) -> str:
    """For a twin of an architecture without a layout rule: llama.cpp's own dry runs of the source file and of the
    twin, at two contexts, must size every cache alike (each KV cache line and the recurrent state); the twin is
    removed and an UnsupportedArchitecture raised where they do not. Returns what was compared, in words."""
    source = dry_runs(source_path, list(CHECK_SETTINGS))
    twin = dry_runs(str(twin_path), list(CHECK_SETTINGS))
    said = []
    for settings, a, b in zip(CHECK_SETTINGS, source, twin):
        real, copy = a.allocations, b.allocations
        if [c.size_mib for c in real.kv_caches] != [c.size_mib for c in copy.kv_caches] \
                or real.recurrent_mib != copy.recurrent_mib:
            Path(twin_path).unlink(missing_ok=True)
            raise UnsupportedArchitecture(
                f"the twin of {source_path} would not keep its caches: at n_ctx {settings.n_ctx} llama.cpp sizes the "
                f"file's KV {real.kv_mib:.2f} MiB and recurrent {real.recurrent_mib:.2f} MiB, the twin's "
                f"{copy.kv_mib:.2f} and {copy.recurrent_mib:.2f}; no twin written")
        said.append(f"KV {real.kv_mib:.2f} MiB, recurrent {real.recurrent_mib:.2f} MiB at n_ctx {settings.n_ctx} "
                    f"({settings.n_seq} seq)")
    return "; ".join(said)
