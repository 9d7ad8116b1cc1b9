"""Theory against the real llama.cpp: every catalog model's twin, every cell of the matrix.

Each twin is written by the production twin writer, loaded by llama.cpp with no_alloc, and every
context's `llama_kv_cache: size` / `llama_memory_recurrent: size` lines must equal the theory to the
printed 0.01 MiB, with cells, layers and streams equal exactly.
"""

from __future__ import annotations

import pytest

from llamabench import engine
from llamabench.catalog import load_catalog
from llamabench.footprint import compute_footprint
from llamabench.twin.build import write_twin
from llamabench.verification import all_ok, compare, describe, matrix_settings

CATALOG = load_catalog()


@pytest.fixture(scope="session")
def twin_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("twins")


@pytest.mark.parametrize("entry", CATALOG, ids=[e.id for e in CATALOG])
def test_catalog_twin_matches_llama_cpp(entry, twin_dir):
    twin = write_twin(entry.metadata, twin_dir / f"{entry.id}.gguf")
    cells = matrix_settings(twin.geometry.has_swa)
    dry_runs = engine.dry_run_many(str(twin.path), cells)
    mismatches = []
    for settings, dry in zip(cells, dry_runs):
        checks = compare(compute_footprint(twin.geometry, settings), dry.allocations)
        if not all_ok(checks):
            bad = [f"{c.component.strip()}: theory {c.theory} vs llama.cpp {c.llama}" for c in checks if not c.ok]
            mismatches.append(f"{describe(settings)}: " + "; ".join(bad))
    assert len(cells) >= 36
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("entry", CATALOG, ids=[e.id for e in CATALOG])
def test_catalog_twin_decodes(entry, twin_dir):
    path = twin_dir / f"{entry.id}.gguf"
    if not path.exists():
        write_twin(entry.metadata, path)
    assert engine.smoke_decode(str(path)) == 9
