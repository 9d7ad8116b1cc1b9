"""The shipped dry runs of the built-in default (llamabench/jobs/seeds/, scripts/seed_dry_runs.py): they must belong
to the twin this code writes, and say what llama.cpp says; with them the first default fit asks llama.cpp nothing."""

from __future__ import annotations

import json

import pytest

import llamabench as lb
from llamabench.jobs.fit.dry_run_cache import DryRunCache, twin_name
from llamabench.jobs.fit.probe import ComputeProbe
from llamabench.jobs.seeds.store import SEEDED_DEVICES, seed_entries
from llamabench.jobs.source import resolve
from llamabench.jobs.twin.shape import published_weights
from llamabench.llama import rpc
from llamabench.memory.backends import DEFAULT_BACKEND
from llamabench.settings.params import Params

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not rpc.available(), reason="llama-cpp-python was built without the RPC backend")]
DEFAULT = "qwen3-5-35b-a3b"
STALE = "the seed is stale: run .venv/bin/python scripts/seed_dry_runs.py and commit llamabench/jobs/seeds/"


@pytest.fixture
def shape_twin():  # in each test's own cache, where the tool writes it
    return str(published_weights(resolve(DEFAULT)).path)


def test_the_default_twin_has_its_seed(shape_twin):
    assert len(seed_entries(twin_name(shape_twin), SEEDED_DEVICES)) > 100, STALE


def test_a_sample_of_the_seed_is_what_llama_cpp_answers(shape_twin):
    entries = seed_entries(twin_name(shape_twin), SEEDED_DEVICES)
    names = sorted(entries)
    sample = [names[0], names[len(names) // 2], names[-1]]
    stored = DryRunCache(shape_twin, SEEDED_DEVICES)
    probe = ComputeProbe(shape_twin, emulate_card=True, backend=DEFAULT_BACKEND)  # as the default fit sizes
    probe._disk = None  # llama.cpp asked again, nothing read from a cache or the seed
    try:
        for name in sample:
            settings = Params.from_dict(json.loads(name))
            assert probe(settings) == stored.get(settings), (STALE, name)
    finally:
        probe.close()
    assert probe.calls == len(sample)


def test_the_first_default_fit_asks_llama_cpp_nothing():
    record = lb.fit(DEFAULT)  # an empty cache (each test has its own): every answer from the seed
    assert record.fit.dry_runs == 0 and len(record.fit.rows) > 20


def test_the_seeded_tensor_list_is_what_llama_cpp_lists():
    """The shape twin is written from llama.cpp's tensor list: the seed's must be the list llama.cpp gives now."""
    from llamabench.jobs.seeds.store import keys_digest, seeded_listing
    from llamabench.jobs.twin.generic import shape_twin_keys
    from llamabench.jobs.twin.shape import vocab_size
    from llamabench.llama import worker
    from llamabench.llama.user_model import GgufValue

    meta = resolve(DEFAULT).metadata
    keys = shape_twin_keys(meta, vocab_size(meta))
    seeded = seeded_listing(keys_digest(keys))
    assert seeded is not None, STALE
    added = {k: GgufValue(t, tuple(v) if isinstance(v, list) else v) for k, (t, v) in seeded["added"].items()}
    listed = worker.model_tensors(keys | added)
    assert [[t.name, list(t.shape), t.ggml_type] for t in listed] == seeded["tensors"]
