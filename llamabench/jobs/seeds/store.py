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

SEEDS = Path(__file__).resolve().parent  # the JSON files beside this module (jobs/seeds/)
SEED_VERSION = 1  # of the seeds' layout


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


def is_seeded(twin_name: str, devices: str = "emulated", folder: Path | None = None) -> bool:
    """Whether llama.cpp answered dry runs on a twin of this name (so it creates contexts on it)."""
    return bool(seed_entries(twin_name, devices, folder))
