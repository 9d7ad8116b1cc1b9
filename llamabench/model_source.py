"""Turn a MODEL argument (a GGUF path or a catalog id) into metadata."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import catalog, gguf_file
from .errors import BadModelFile
from .metadata import CatalogEntry, ModelMetadata


@dataclass(frozen=True)
class ResolvedModel:
    metadata: ModelMetadata
    entry: CatalogEntry | None  # set when MODEL was a catalog id
    path: Path | None  # set when MODEL was a file

    @property
    def label(self) -> str:
        return self.entry.id if self.entry else str(self.path)


def looks_like_path(model: str) -> bool:
    return model.endswith(".gguf") or "/" in model or "\\" in model or Path(model).exists()


def resolve(model: str) -> ResolvedModel:
    if not model:
        raise BadModelFile("no model given")
    if looks_like_path(model):
        meta = gguf_file.read_metadata(model)
        return ResolvedModel(meta, None, Path(model))
    entry = catalog.get_entry(model)
    return ResolvedModel(entry.metadata, entry, None)
