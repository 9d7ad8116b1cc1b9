"""MODEL, resolved once: a GGUF file or a catalog id, with one label and one file for llama.cpp.

Every command calls `resolve(MODEL)`. The label is what results, `--resume`, reports and folder
names key on: the catalog id, or the file's stem made safe for a folder name (and never equal to a
catalog id, so a file named like one cannot be mixed up with its twin's records).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from ..core.errors import BadModelFile, CatalogError
from ..model.geometry import ModelGeometry
from ..model.layout import geometry_from_metadata
from ..model.metadata import CatalogEntry, ModelMetadata, ModelRef
from ..model.validate import check_for_llama
from ..world import catalog, gguf_file, hf_repo, remote
from ..world.paths import cache_dir
from .twin.cache import cached_twin

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
FILE_LABEL_SUFFIX = "-gguf"  # added when a file's stem equals a catalog id


def looks_like_path(model: str) -> bool:
    return model.endswith(".gguf") or "/" in model or "\\" in model or Path(model).exists()


def file_label(path: Path, catalog_ids: set[str] | frozenset[str] = frozenset()) -> str:
    """The label of a GGUF file: its stem, with characters outside [A-Za-z0-9._-] turned into '-'."""
    label = _UNSAFE.sub("-", path.name.removesuffix(".gguf")).strip(".-") or "model"
    return label + FILE_LABEL_SUFFIX if label in catalog_ids else label


@dataclass(frozen=True)
class ModelSource:
    """One model as every command sees it."""

    metadata: ModelMetadata
    entry: CatalogEntry | None  # set for a catalog id
    path: Path | None  # set for a GGUF file (for a remote one: the sparse local copy of its header)
    label: str
    url: str | None = None  # set for a remote GGUF (https:// or hf://), credentials and query left out
    hf_spec: str | None = None  # OWNER/REPO[:QUANT] where MODEL named a repository (llama.cpp's -hf), as named

    def repo_file(self) -> str | None:
        """The file's path in its Hugging Face repository (hf://OWNER/REPO/FILE), or None."""
        if self.url is None or not self.url.startswith("hf://"):
            return None
        return self.url[len("hf://"):].partition("@")[0].split("/", 2)[2]

    def llama_words(self) -> tuple[str, ...]:
        """How llama-server is told to load this remote model, as the user named it: -hf OWNER/REPO[:QUANT] (the
        file llama.cpp's own pick gives: the one read), -hf OWNER/REPO -hff FILE for a file of a repository, -mu URL;
        () for a local file (-m FILE)."""
        if self.url is None:
            return ()
        if self.hf_spec is not None:
            return ("-hf", self.hf_spec)
        if self.url.startswith("hf://"):
            owner, repo, file = self.url[len("hf://"):].partition("@")[0].split("/", 2)
            return ("-hf", f"{owner}/{repo}", "-hff", file)
        return ("-mu", self.url)

    @property
    def is_catalog(self) -> bool:
        return self.entry is not None

    @property
    def name(self) -> str:
        return self.metadata.display_name

    def gguf_for_llama(self) -> Path:
        """The file llama.cpp loads: the GGUF itself, or the catalog model's cached geometry twin."""
        if self.path is not None:
            return self.path
        return cached_twin(self.metadata, self.label)

    @cached_property
    def llama_metadata(self) -> ModelMetadata:
        """Metadata and tensor infos of the file llama.cpp loads (the twin's for a catalog id)."""
        return self.metadata if self.path is not None else gguf_file.read_metadata(self.gguf_for_llama())

    def llama_geometry(self) -> ModelGeometry:
        """The layout of the file llama.cpp loads, after the checks for what would make llama.cpp abort."""
        geometry = geometry_from_metadata(self.llama_metadata)
        check_for_llama(self.llama_metadata, geometry)
        return geometry

    def model_block(self, architecture: str, *, loaded: Path | str | None = None, **extra) -> ModelRef:
        """The `model` block of a record: who, and which file llama.cpp loaded, if any."""
        path = loaded if loaded is not None else self.path
        return ModelRef(self.label, self.name, architecture, str(path) if path is not None else None,
                        is_twin=self.path is None and loaded is not None, **extra)


def resolve(model: str, *, quiet: bool = False) -> ModelSource:
    """MODEL as every command sees it; `quiet`: a remote header read says nothing on stderr (a sweep says one line
    per quant instead)."""
    if not model:
        raise BadModelFile("no model given")
    if remote.is_remote(model):
        spec = model[len("hf://"):].partition("@")[0] if hf_repo.names_a_repo(model) else None
        model = hf_repo.expand(model)  # hf://OWNER/REPO[:QUANT]: the file llama.cpp's -hf would load
        meta, local = _read_remote(model, quiet)
        return ModelSource(meta, None, local, file_label(local, _catalog_ids()), url=remote.redact(model),
                           hf_spec=spec)
    if looks_like_path(model):
        path = Path(model)
        meta = gguf_file.read_metadata(path)
        return ModelSource(meta, None, path, file_label(path, _catalog_ids()))
    entry = catalog.get_entry(model)
    return ModelSource(entry.metadata, entry, None, entry.id)


def _catalog_ids() -> set[str]:
    try:
        return {e.id for e in catalog.load_catalog()}
    except CatalogError:  # a broken catalog does not stop work on a file
        return set()


def read_any(model: str):
    """The metadata of any GGUF, local or remote, whatever its architecture (a projector, say)."""
    return _read_remote(hf_repo.expand(model))[0] if remote.is_remote(model) else gguf_file.read_metadata(model)


def _read_remote(model: str, quiet: bool = False):
    """(metadata, local sparse copy) of a remote GGUF, the parts of a split set fetched beside the first; the
    metadata's source is the URL as shown (no password, no query string)."""
    fetched = remote.fetch_header(model, cache_dir(), quiet=quiet)
    meta = gguf_file.read_metadata(
        fetched.path, part=lambda index, count: remote.fetch_header(remote.part_url(model, index, count),
                                                                    cache_dir(), quiet=quiet).path)
    return replace(meta, source=remote.redact(model)), fetched.path
