"""The model catalog (`models.toml`): GGUF metadata of real models, each value with its source."""

from __future__ import annotations

import os
import re
import tomllib
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from ..core.errors import CatalogError
from ..core.suggest import closest
from ..model.metadata import TWIN_TENSOR_TYPES, CatalogEntry, ModelMetadata, PublishedQuant
from .paths import catalog_override

# models.toml lives at the top of the repository; the package holds a link to it, which the wheel ships as a
# file (package data), so an installed llamabench finds its catalog through importlib.resources.
CATALOG_RESOURCE = "models.toml"
DEFAULT_MODEL_ID = "qwen3-5-35b-a3b"
FLOAT_KEYS = {"rope.freq_base", "rope.freq_base_swa", "attention.layer_norm_rms_epsilon",
              "attention.layer_norm_epsilon"}
STRING_KEYS = {"rope.scaling.type"}
MAX_CATALOG_BYTES = 16 * 2**20
ENTRY_KEYS = {"id", "name", "architecture", "metadata", "kv_cache_bytes_per_token", "published_quants", "notes",
              "sources", "mmproj", "tied_embeddings"}


def catalog_path() -> Path:
    override = catalog_override()
    if override is not None:
        return override
    return Path(str(files("llamabench") / CATALOG_RESOURCE))


def _value(entry_id: str, key: str, item):
    if not isinstance(item, dict) or set(item) - {"value", "source"} or "value" not in item or "source" not in item:
        raise CatalogError(f"catalog entry '{entry_id}': {key} must be {{ value = ..., source = \"...\" }}")
    if not isinstance(item["source"], str) or not item["source"].strip():
        raise CatalogError(f"catalog entry '{entry_id}': {key} has an empty source")
    value = item["value"]
    if isinstance(value, list):
        if not value or not all(isinstance(v, (int, bool)) for v in value):
            raise CatalogError(f"catalog entry '{entry_id}': {key} must be a non-empty array of integers or booleans")
        return tuple(value), item["source"]
    if isinstance(value, float) and key not in FLOAT_KEYS:
        raise CatalogError(f"catalog entry '{entry_id}': {key} must be an integer, got {value!r}")
    if isinstance(value, str) and key not in STRING_KEYS:
        raise CatalogError(f"catalog entry '{entry_id}': {key} must be a number, got {value!r}")
    if not isinstance(value, (int, float, str, bool)):
        raise CatalogError(f"catalog entry '{entry_id}': {key} has a value of the wrong type ({type(value).__name__})")
    return value, item["source"]


def _tensor_types(entry_id: str, quant: dict) -> tuple[tuple[str, str], ...]:
    """A published quant's tensor_types: [[pattern, type], ...], each pattern a regular expression, each type one a
    twin can store."""
    rows = quant.get("tensor_types", [])
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)
                                             for r in rows):
        raise CatalogError(f"catalog entry '{entry_id}': published quant {quant['name']}: tensor_types must be "
                           "[[pattern, type], ...]")
    for pattern, dtype in rows:
        try:
            re.compile(pattern)
        except re.error:
            raise CatalogError(f"catalog entry '{entry_id}': tensor_types pattern {pattern!r} is not a regular "
                               "expression") from None
        if dtype.lower() not in TWIN_TENSOR_TYPES:
            raise CatalogError(f"catalog entry '{entry_id}': tensor_types type {dtype!r} is not one of "
                               + ", ".join(TWIN_TENSOR_TYPES))
    return tuple((p, d.lower()) for p, d in rows)


def _published_kv(entry_id: str, raw: dict) -> tuple[int | None, str | None]:
    """An entry's published KV bytes per token and its source; (None, None) where it publishes none."""
    published_kv = raw.get("kv_cache_bytes_per_token")
    if published_kv is None:
        return None, None
    kv_value, kv_source = _value(entry_id, "kv_cache_bytes_per_token", published_kv)
    if not isinstance(kv_value, int) or isinstance(kv_value, bool):
        raise CatalogError(f"catalog entry '{entry_id}': kv_cache_bytes_per_token must be an integer")
    return kv_value, kv_source


def _published_quant(entry_id: str, quant) -> PublishedQuant:
    """One [[model.published_quants]] table, checked: name, a positive integer of bytes, source, an optional hf
    path and tensor_types."""
    if (not isinstance(quant, dict) or not isinstance(quant.get("name"), str)
            or not isinstance(quant.get("source"), str)):
        raise CatalogError(f"catalog entry '{entry_id}': each published quant needs name, bytes and source")
    if not isinstance(quant.get("bytes"), int) or isinstance(quant.get("bytes"), bool) or quant["bytes"] <= 0:
        raise CatalogError(f"catalog entry '{entry_id}': published quant {quant['name']} "
                           f"needs a positive integer 'bytes'")
    hf = quant.get("hf")
    if hf is not None and (not isinstance(hf, str) or hf.count("/") < 2):
        raise CatalogError(f"catalog entry '{entry_id}': published quant {quant['name']}: "
                           f"hf must be OWNER/REPO/FILE.gguf")
    return PublishedQuant(quant["name"], quant["bytes"], quant["source"], hf, _tensor_types(entry_id, quant))


def _entry(raw: dict, index: int) -> CatalogEntry:
    entry_id = raw.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise CatalogError(f"catalog entry #{index + 1}: missing string key 'id'")
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        raise CatalogError(f"catalog entry '{entry_id}': unknown keys {sorted(unknown)}")
    for key in ("name", "architecture"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise CatalogError(f"catalog entry '{entry_id}': missing string key '{key}'")
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict) or not metadata:
        raise CatalogError(f"catalog entry '{entry_id}': missing table [model.metadata]")
    arch = raw["architecture"]
    keys: dict = {"general.architecture": arch, "general.name": raw["name"]}
    sources: dict[str, str] = {}
    for suffix, item in metadata.items():
        value, source = _value(entry_id, suffix, item)
        keys[f"{arch}.{suffix}"] = value
        sources[suffix] = source
    for required in ("block_count", "context_length", "embedding_length"):
        if required not in metadata:
            raise CatalogError(f"catalog entry '{entry_id}': metadata lacks '{required}'")

    tied = raw.get("tied_embeddings", {"value": False})
    if not isinstance(tied, dict) or not isinstance(tied.get("value"), bool) or (tied["value"] and not tied.get(
            "source")):
        raise CatalogError(f"catalog entry '{entry_id}': tied_embeddings is {{ value = true|false, source = \"...\" }}")
    kv_value, kv_source = _published_kv(entry_id, raw)
    quants = [_published_quant(entry_id, q) for q in raw.get("published_quants", [])]

    return CatalogEntry(
        id=entry_id,
        name=raw["name"],
        metadata=ModelMetadata(source=f"catalog:{entry_id}", architecture=arch, keys=keys, name=raw["name"],
                               tied_embeddings=tied["value"]),
        sources=sources,
        published_kv_bytes_per_token=kv_value,
        published_kv_source=kv_source,
        published_quants=tuple(quants),
        notes=str(raw.get("notes", "")),
        mmproj=raw.get("mmproj"),
    )


@lru_cache(maxsize=4)
def _load(path_str: str) -> tuple[CatalogEntry, ...]:
    path = Path(path_str)
    try:
        if path.stat().st_size > MAX_CATALOG_BYTES:
            raise CatalogError(f"{path}: {path.stat().st_size:,} bytes is not a model catalog")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"catalog file {path} not found") from None
    except UnicodeDecodeError:
        raise CatalogError(f"{path}: not a text file (a catalog is UTF-8 TOML)") from None
    except OSError as exc:
        raise CatalogError(f"{path}: cannot be read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: not valid TOML ({exc})") from None
    models = data.get("model")
    if not isinstance(models, list) or not models:
        raise CatalogError(f"{path}: no [[model]] entries")
    entries = []
    seen = set()
    for index, raw in enumerate(models):
        entry = _entry(raw, index)
        if entry.id in seen:
            raise CatalogError(f"{path}: duplicate catalog id '{entry.id}'")
        seen.add(entry.id)
        entries.append(entry)
    return tuple(entries)


def load_catalog(path: str | os.PathLike | None = None) -> tuple[CatalogEntry, ...]:
    return _load(str(path or catalog_path()))


def find_entry(model_id: str) -> CatalogEntry | None:
    """The catalog entry of this id, or None (a file, a URL, anything else)."""
    return next((e for e in load_catalog() if e.id == str(model_id)), None)


def get_entry(model_id: str, path: str | os.PathLike | None = None) -> CatalogEntry:
    entries = load_catalog(path)
    for entry in entries:
        if entry.id == model_id:
            return entry
    ids = [e.id for e in entries]
    close = closest(model_id, ids)
    raise CatalogError(
        f"'{model_id}' is neither a GGUF file nor a catalog id" + (f"; did you mean {close}?" if close else ""),
        hint="catalog ids: " + ", ".join(ids),
    )

