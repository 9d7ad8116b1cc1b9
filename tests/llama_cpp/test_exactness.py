"""Theory against the real llama.cpp: every catalog model's twin, every cell of the matrix.

Each twin is written by the production twin writer, loaded by llama.cpp with no_alloc, and every
context's `llama_kv_cache: size` / `llama_memory_recurrent: size` lines must equal the theory to the
printed 0.01 MiB, with cells, layers and streams equal exactly.
"""

from __future__ import annotations

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.jobs.twin.build import write_twin
from llamabench.llama.worker import dry_runs
from llamabench.memory.allocations import parse_allocations
from llamabench.memory.footprint import compute_footprint
from llamabench.memory.verification import all_ok, compare, describe, matrix_params
from llamabench.model.layout import geometry_from_metadata
from llamabench.settings.params import Params
from llamabench.world.catalog import load_catalog

CATALOG = load_catalog()


@pytest.fixture(scope="session")
def twin_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("twins")


@pytest.mark.slow
@pytest.mark.parametrize("entry", CATALOG, ids=[e.id for e in CATALOG])
def test_catalog_twin_matches_llama_cpp(entry, twin_dir):
    twin = write_twin(entry.metadata, twin_dir / f"{entry.id}.gguf")
    cells = matrix_params(twin.geometry.has_swa)
    mismatches = []
    for settings, dry in zip(cells, dry_runs(str(twin.path), cells)):
        checks = compare(compute_footprint(twin.geometry, settings), dry.allocations)
        if not all_ok(checks):
            bad = [c.mismatch() for c in checks if not c.ok]
            mismatches.append(f"{describe(settings)}: " + "; ".join(bad))
    assert len(cells) >= 36
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.slow
@pytest.mark.parametrize("entry", CATALOG, ids=[e.id for e in CATALOG])
def test_catalog_twin_decodes(entry, twin_dir):
    path = twin_dir / f"{entry.id}.gguf"
    if not path.exists():
        write_twin(entry.metadata, path)
    run = lb.bench(str(path), n_ctx=512, n_prompt=8, n_gen=1, repetitions=1, n_threads=2, results=twin_dir / "r.jsonl")
    assert [r.test.name for r in run.records] == ["pp8", "tg1"]
    assert all(r.ok and r.avg_ts > 0 for r in run.records), [r.reason for r in run.records]


@pytest.mark.slow
def test_twin_of_a_real_gguf_copies_its_layout(tmp_path, capsys):
    """`twin SOURCE.gguf`: the twin of a file carries that file's layout keys, and llama.cpp agrees."""
    source = write_twin(CATALOG[0].metadata, tmp_path / "source.gguf").path
    assert main(["twin", str(source), "--out", str(tmp_path / "copy.gguf")]) == 0
    assert main(["verify", str(tmp_path / "copy.gguf"), "--ctx", "8192"]) == 0
    assert "all match" in capsys.readouterr().out


def test_compare_reports_a_mismatch():
    """The comparison can fail: one cell fewer in llama.cpp's line is a mismatch."""
    geometry = geometry_from_metadata(CATALOG[0].metadata)
    fp = compute_footprint(geometry, Params(n_ctx=4096))
    good = ("llama_kv_cache: size =   80.00 MiB (  4096 cells,  10 layers,  1/1 seqs), "
            "K (f16):   40.00 MiB, V (f16):   40.00 MiB\n"
            "llama_memory_recurrent: size =   62.81 MiB (     1 cells,  40 layers,  1 seqs  0 rs_seq), "
            "R (f32):    2.81 MiB, S (f32):   60.00 MiB, P (f32):    0.00 MiB\n")
    assert all_ok(compare(fp, parse_allocations(good)))
    bad = good.replace("80.00 MiB (  4096 cells", "79.98 MiB (  4095 cells")
    assert not all_ok(compare(fp, parse_allocations(bad)))
    lines = [c.mismatch() for c in compare(fp, parse_allocations(bad)) if not c.ok]
    assert "shape: theory 4096 cells x 10 layers x 1 stream vs llama.cpp 4095 cells x 10 layers x 1 stream" in lines
    assert "KV (non-SWA): theory 83,886,080 B vs llama.cpp 79.98 MiB" in lines
