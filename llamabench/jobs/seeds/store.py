"""Shipped dry runs of the built-in default's twins (llamabench/jobs/seeds/): llama.cpp's own answers to the dry runs
the default `fit` asks, computed ahead by scripts/seed_dry_runs.py with the llama.cpp this package pins, on the
emulated card, and checked by tests/llama_cpp/test_seed.py (a sample asked of llama.cpp again).

A seed is keyed by the twin's file name, which carries the digest of everything that decides its bytes (its keys,
llama.cpp's version and the code that writes it: twin.cache.cached_file), so a twin written anywhere finds the
seed written from the same bytes, and a changed writer or llama.cpp finds none (and asks llama.cpp again).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ...memory.backends import DEFAULT_BACKEND

SEEDS = Path(__file__).resolve().parent  # the JSON files beside this module (jobs/seeds/)
SEED_VERSION = 1  # of the seeds' layout
# the devices the built-in default's first fit sizes on: an emulated card answering as CUDA does (memory.backends;
# jobs.fit.dry_run_cache.devices_kind spells the same)
SEEDED_DEVICES = f"emulated|backend={DEFAULT_BACKEND}"


def seed_name(twin_name: str, devices: str) -> str:
    return hashlib.sha256(f"{SEED_VERSION}|{twin_name}|{devices}".encode()).hexdigest()[:32] + ".json"


def seed_entries(twin_name: str, devices: str, folder: Path | None = None) -> dict:
    """The shipped entries for this twin on this kind of devices; {} where none are shipped."""
    path = (folder or SEEDS) / seed_name(twin_name, devices)
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    entries = stored.get("entries") if isinstance(stored, dict) else None
    return entries if isinstance(entries, dict) else {}


def is_seeded(twin_name: str, devices: str = SEEDED_DEVICES, folder: Path | None = None) -> bool:
    """Whether llama.cpp answered dry runs on a twin of this name (so it creates contexts on it)."""
    return bool(seed_entries(twin_name, devices, folder))


LISTINGS = "listings.json"  # llama.cpp's tensor lists of the seeded twins, by the digest of the keys listed for


def keys_digest(keys: dict) -> str:
    """The digest of a twin's keys as llama.cpp is asked to list its tensors for them (name, type and value)."""
    rows = sorted((name, v.type, list(v.value) if isinstance(v.value, tuple) else v.value) for name, v in keys.items())
    return hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()


def seeded_listing(digest: str, folder: Path | None = None) -> dict | None:
    """{"added": {key: [type, value]}, "tensors": [[name, shape, ggml_type], ...]}: what llama.cpp listed for these
    keys when the seed was written (the keys it named missing, stated at their defaults, and every tensor); None."""
    try:
        stored = json.loads(((folder or SEEDS) / LISTINGS).read_text())
    except (OSError, ValueError):
        return None
    entry = stored.get(digest) if isinstance(stored, dict) else None
    return entry if isinstance(entry, dict) and isinstance(entry.get("tensors"), list) else None

