"""Geometry twins: a real model's layer layout and cache geometry, with a tiny everything else.

What stays real: block_count, context_length, every attention key that sizes the KV cache
(head_count, head_count_kv, key/value lengths, sliding window and its pattern, MLA ranks), every
key that decides which layer is what (full_attention_interval, recurrent_layers, per-layer arrays),
and every ssm.* / shortconv key that sizes the recurrent state. What shrinks: hidden size (unless the
family ties the state to it), vocabulary, FFN widths, expert counts.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from ...core.errors import UnsupportedArchitecture
from ...model import architectures
from ...model import gguf_keys as K
from ...model.layout import ModelGeometry, geometry_from_metadata
from ...model.metadata import ModelMetadata
from .context import TwinContext
from .generic import GENERIC, write_generic_twin
from .writer import write_gguf

TWIN_N_EMBD = 64
TWIN_N_FF = 64
TWIN_N_EXPERT = 4
TWIN_N_EXPERT_USED = 2
TWIN_N_FF_EXP = 32

# keys that only describe the source file, or that the twin replaces
DROPPED_KEYS = ("vocab_size", "expert_group_count", "expert_group_used_count")


def family_for(arch: str) -> ModuleType | None:
    """The hand-written tensor family that writes `arch` (its architectures row names it); None where it has no row
    or its row names none (or `generic`): llama.cpp's own tensor list writes it (generic.py). A broken family is
    a bug: let it show."""
    row = architectures.ARCHITECTURES.get(arch)
    name = getattr(row, "twin_family", None)
    if not name or name == GENERIC:
        return None
    return importlib.import_module(f"llamabench.jobs.twin.families.{name}")


def _shrink_count(value, new: int):
    if isinstance(value, tuple):
        return tuple(new if v else 0 for v in value)
    return new if value else 0


def twin_keys(meta: ModelMetadata, family) -> dict:
    arch = meta.architecture
    row = architectures.get(arch, meta.source)
    src = meta.keys
    prefix = f"{arch}."
    keys: dict = {k: v for k, v in src.items() if k.startswith(prefix)}
    for suffix in DROPPED_KEYS:
        keys.pop(prefix + suffix, None)
    keys["general.architecture"] = arch
    keys["general.name"] = f"{meta.display_name} geometry twin"
    keys["general.type"] = "model"

    n_head = meta.arch_key(K.HEAD_COUNT, 0)
    n_head0 = n_head[0] if isinstance(n_head, tuple) else n_head
    n_embd = meta.arch_key(K.EMBEDDING_LENGTH)
    if n_head0:
        # head sizes default to n_embd / n_head: pin them before n_embd shrinks
        keys.setdefault(prefix + K.KEY_LENGTH, n_embd // n_head0)
        keys.setdefault(prefix + K.VALUE_LENGTH, n_embd // n_head0)

    keys[prefix + K.EMBEDDING_LENGTH] = getattr(family, "N_EMBD", TWIN_N_EMBD)
    # weight-only widths a GGUF may leave out: small stated values, never zero-width tensors (llama.cpp aborts)
    if not row.ffn_decides_layout:  # there a per-layer 0 means "a mixer layer": it decides the layout
        keys.setdefault(prefix + K.FEED_FORWARD_LENGTH, TWIN_N_FF)
    if keys.get(prefix + K.EXPERT_COUNT) and row.expert_ffn_key == K.EXPERT_FEED_FORWARD_LENGTH:
        keys.setdefault(prefix + K.EXPERT_FEED_FORWARD_LENGTH, TWIN_N_FF_EXP)
    if prefix + K.FEED_FORWARD_LENGTH in keys:
        keys[prefix + K.FEED_FORWARD_LENGTH] = _shrink_count(keys[prefix + K.FEED_FORWARD_LENGTH], TWIN_N_FF)
    if keys.get(prefix + K.EXPERT_COUNT):
        n_expert = min(int(keys[prefix + K.EXPERT_COUNT]), TWIN_N_EXPERT)
        keys[prefix + K.EXPERT_COUNT] = n_expert
        keys[prefix + K.EXPERT_USED_COUNT] = _shrink_count(keys.get(prefix + K.EXPERT_USED_COUNT, 1),
                                                           min(TWIN_N_EXPERT_USED, n_expert))
        for suffix in (K.EXPERT_FEED_FORWARD_LENGTH, K.EXPERT_SHARED_FEED_FORWARD_LENGTH):
            if prefix + suffix in keys:
                keys[prefix + suffix] = _shrink_count(keys[prefix + suffix], TWIN_N_FF_EXP)
    keys.setdefault(prefix + "attention.layer_norm_rms_epsilon", 1e-6)
    keys.setdefault(prefix + "rope.freq_base", 10000.0)
    if hasattr(family, "adjust_keys"):
        family.adjust_keys(keys, arch)
    return keys


@dataclass(frozen=True)
class TwinResult:
    path: Path
    file_bytes: int  # apparent size
    disk_bytes: int  # allocated on disk (zero tensors are holes)
    n_tensors: int
    seconds: float
    geometry: ModelGeometry | None  # None: llamabench has no layout rule for the architecture (require_layout off)


def _generic_twin(meta: ModelMetadata, out_path, progress, require_layout: bool) -> TwinResult:
    """The twin of an architecture without a hand-written family, from llama.cpp's own tensor list."""
    try:
        geometry_from_metadata(meta)  # validates the source and names bad keys
    except UnsupportedArchitecture:
        if require_layout:
            raise
    written = write_generic_twin(meta, out_path, progress=progress)
    twin_meta = ModelMetadata(source=str(out_path), architecture=meta.architecture,
                              keys={k: v.value for k, v in written.metadata.items()})
    try:
        geometry = geometry_from_metadata(twin_meta)
    except UnsupportedArchitecture:
        geometry = None
    return TwinResult(written.path, written.file_bytes, written.disk_bytes, written.n_tensors, written.seconds,
                      geometry)


def write_twin(
    meta: ModelMetadata,
    out_path: str | os.PathLike,
    *,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    require_layout: bool = True,
) -> TwinResult:
    """The geometry twin of a model: its architecture's hand-written family, else llama.cpp's own tensor list
    (generic.py). `require_layout` off: a twin even of an architecture llamabench has no layout rule for."""
    start = time.perf_counter()
    family = family_for(meta.architecture)
    if family is None or geometry_from_metadata(meta).mtp_layers:  # the families write no NextN (MTP) layer
        return _generic_twin(meta, out_path, progress, require_layout)
    source_geometry = geometry_from_metadata(meta)  # validates the source and names bad keys
    keys = twin_keys(meta, family)
    twin_meta = ModelMetadata(source=str(out_path), architecture=meta.architecture, keys=keys)
    geometry = geometry_from_metadata(twin_meta)
    ctx = TwinContext(meta.architecture, keys, geometry)
    specs = family.tensors(ctx)
    size = write_gguf(out_path, meta.architecture, keys, specs, seed=seed, progress=progress)
    out = Path(out_path)
    disk = out.stat().st_blocks * 512 if hasattr(out.stat(), "st_blocks") else size
    if [layer.kind for layer in geometry.layers] != [layer.kind for layer in source_geometry.layers]:
        out.unlink(missing_ok=True)
        raise UnsupportedArchitecture(f"the twin of {meta.source} would not keep its layer layout "
                                      f"({meta.architecture}); no twin written")
    return TwinResult(out, size, disk, len(specs), time.perf_counter() - start, geometry)
