"""Every llama.cpp architecture, table-driven: a twin from metadata alone, llama.cpp's dry runs, and the theory.

One case per row of tests/support/data/architectures.json (tiny metadata from llama.cpp's own
tests/test-llama-archs.cpp, changed to exercise each architecture's rules: an SWA window of 1000, per-layer
head_count_kv, a NextN layer). For each, one child process builds the twin with the production code
(llama_model_init_from_user lists the tensors, jobs.twin.generic writes them as a sparse zero file), loads it
with no_alloc and creates a context at every setting of tests.support.every_arch.SETTINGS (f16 and q8_0 K/V,
flash attention on and off, 1, 2 and 4 sequences, unified and not, n_ctx 512 / 4096 / 5000 around the window,
swa_full, n_rs_seq). Then llamabench's theory (memory.inspection.inspect on the twin's metadata) must equal every
`llama_kv_cache: size` / `llama_memory_recurrent: size` line to the printed 0.01 MiB, cells, layers and streams
exactly (memory.verification.compare). The children run two at a time, before the first case.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from llamabench.core.errors import EngineError, UnsupportedArchitecture
from llamabench.core.units import MIB
from llamabench.jobs.twin import generic
from llamabench.jobs.twin.build import write_twin
from llamabench.llama.user_model import GgufValue
from llamabench.llama.worker import dry_runs, model_tensors
from llamabench.memory.allocations import PRINTED_TOLERANCE_BYTES, bytes_equal
from llamabench.memory.inspection import inspect
from llamabench.memory.verification import compare
from llamabench.model.metadata import ModelMetadata
from llamabench.settings.params import Params
from llamabench.world import gguf_file
from tests.support import every_arch
from tests.support.every_arch import RULE_REFUSALS, SETTINGS, describe

ARCHS = every_arch.architectures()
ROWS = every_arch.table()["architectures"]

# architectures llamabench has no layout rule for (model/architectures.py, NO_RULE): inspect must say so
NO_LAYOUT_RULE = {
    "deepseek4": "compressed CSA/HCA caches and f32 compressor states",
    "dots3note": "MLA with SWA layers of their own MLA width and an indexer cache",
    "gemma4-assistant": "a draft head sharing its target context's cache",
    "dflash": "a draft head whose cache depends on its target context",
    "eagle3": "a draft head run beside its target context",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, every_arch.ArchRun]:
    """Every architecture's child, two (or one per CPU) at a time."""
    folder = tmp_path_factory.mktemp("every-arch")
    start = time.perf_counter()

    def one(arch: str) -> every_arch.ArchRun:
        work = folder / arch
        work.mkdir()
        return every_arch.run(arch, work)

    with ThreadPoolExecutor(max(2, os.cpu_count() or 1)) as pool:
        done = dict(zip(ARCHS, pool.map(one, ARCHS)))
    ok = sorted(a for a, r in done.items() if r.error is None)
    print(f"\nevery architecture: {len(ok)} of {len(done)} built and dry-ran at {len(SETTINGS)} settings "
          f"in {time.perf_counter() - start:.1f} s")
    return done


def _ok(check, alloc) -> bool:
    """A check of compare; "KV total" is the sum of several printed values, each rounded to 0.01 MiB: within one
    rounding per line (compare allows one only)."""
    if check.component != "KV total" or len(alloc.kv_caches) < 2 or check.llama_mib is None:
        return check.ok
    return bytes_equal(check.theory_bytes, check.llama_mib * MIB, PRINTED_TOLERANCE_BYTES * len(alloc.kv_caches))


def _theory_mismatches(run: every_arch.ArchRun) -> list[str]:
    meta = gguf_file.read_metadata(run.twin)
    out = []
    for i, alloc in sorted(run.dry.items()):
        fp = inspect(meta, SETTINGS[i]).footprint
        out += [f"{describe(SETTINGS[i])}: {c.mismatch()}" for c in compare(fp, alloc) if not _ok(c, alloc)]
    return out


def test_the_table_covers_every_architecture_llama_cpp_builds():
    assert len(ARCHS) >= 140
    buildable = [a for a in ARCHS if "llama_cpp_fails" not in ROWS[a]]
    assert len(buildable) >= 100, buildable
    assert all(a in ROWS for a in NO_LAYOUT_RULE)


@pytest.mark.parametrize("arch", ARCHS)
def test_architecture(arch, runs):
    run = runs[arch]
    fails = ROWS[arch].get("llama_cpp_fails")
    if fails:  # llama.cpp cannot build or dry-run this fixture (its reason is in the table)
        assert run.error, f"{arch} now builds and dry-runs: regenerate tests/support/data/architectures.json"
        return
    assert run.error is None, run.error
    assert run.disk_bytes < 4 * 2**20 and run.n_tensors
    for i, reason in run.refused.items():
        assert any(words in reason for words in RULE_REFUSALS), reason
    if arch in NO_LAYOUT_RULE:
        with pytest.raises(UnsupportedArchitecture):
            inspect(gguf_file.read_metadata(run.twin), SETTINGS[0])
        return
    mismatches = _theory_mismatches(run)
    assert not mismatches, "\n".join(mismatches)


MTP_ARCHS = [a for a in ARCHS if a not in NO_LAYOUT_RULE and "llama_cpp_fails" not in ROWS[a]
             and every_arch.has_mtp_layers(a)]


def test_mtp_twins_are_many():
    assert len(MTP_ARCHS) >= 10, MTP_ARCHS


@pytest.mark.parametrize("arch", MTP_ARCHS)
def test_mtp_context(arch, runs):
    """llama-server's --spec-type draft-mtp: where llama.cpp creates the MTP draft context, its cache (the NextN
    layers, -ctkd/-ctvd types) and the target's rollback planes equal the theory; where it refuses, the reason is
    that the architecture has no MTP graph."""
    run = runs[arch]
    if run.mtp is None:  # refused, or llama.cpp aborted building the MTP graph of this fixture (mimo2 asserts a
        reason = run.mtp_refused or run.died  # fused attn_qkv): said, never silent
        assert reason, f"{arch}: no MTP context and no reason"
        pytest.skip(f"{arch}: llama.cpp creates no MTP context for this fixture ({reason[:200]})")
    meta = gguf_file.read_metadata(run.twin)
    fp = inspect(meta, every_arch.MTP_SETTINGS).footprint
    assert fp.mtp_kv_bytes > 0
    bad = [c.mismatch() for c in compare(fp, run.mtp) if not _ok(c, run.mtp)]
    assert not bad, "\n".join(bad)


# the production path beside the table ---------------------------------------------------------------------------

def test_a_refused_metadata_is_one_line_with_llama_cpp_s_reason():
    keys = every_arch.metadata("llama")
    del keys["llama.block_count"]
    with pytest.raises(EngineError, match="key not found in model: llama.block_count") as caught:
        model_tensors(keys)
    assert "\n" not in str(caught.value)


def test_an_abort_in_llama_cpp_ends_the_child_not_the_caller():
    keys = generic.with_vocab(every_arch.metadata("deepseek2"))
    keys["deepseek2.attention.key_length_mla"] = GgufValue("u32", 64)  # no room for the rope part: GGML_ASSERT
    with pytest.raises(EngineError, match=r"SIGABRT: src/models/deepseek2\.cpp:\d+: GGML_ASSERT"):
        model_tensors(keys)


def test_the_child_job_lists_what_llama_cpp_creates():
    keys = generic.with_vocab(every_arch.metadata("qwen3"))
    tensors = {t.name: t for t in model_tensors(keys)}
    assert tensors["token_embd.weight"].shape == (256, 259)
    assert tensors["blk.0.attn_k.weight"].shape == (256, 64)  # 1 KV head of 64 (head_count_kv 1)
    assert tensors["blk.1.attn_k_norm.weight"].shape == (64,)


def _big_llama() -> ModelMetadata:
    """A 70B-class llama: 80 layers, hidden 8192, 64 heads of 128, 8 KV heads, 128k vocabulary."""
    keys = {"general.architecture": "llama", "llama.block_count": 80, "llama.context_length": 131072,
            "llama.embedding_length": 8192, "llama.feed_forward_length": 28672, "llama.attention.head_count": 64,
            "llama.attention.head_count_kv": 8, "llama.rope.dimension_count": 128, "llama.vocab_size": 128256,
            "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.rope.freq_base": 500000.0}
    return ModelMetadata(source="catalog:big-llama", architecture="llama", keys=keys)


def test_a_full_shape_twin_is_sparse_and_sized_as_the_model(tmp_path):
    twin = generic.write_generic_shape_twin(_big_llama(), tmp_path / "big.gguf", 128256)
    assert twin.file_bytes > 10 * 2**30 and twin.disk_bytes < 64 * 2**20  # 70B weights in 1.69 bits, a hole
    meta = gguf_file.read_metadata(twin.path)
    assert {t.name: t.shape for t in meta.tensors}["blk.79.ffn_up.weight"] == (8192, 28672)
    params = Params(n_ctx=8192, n_threads=1)
    dry = dry_runs(str(twin.path), [params])[0]
    assert dry.allocations.kv_caches[0].size_mib == 2560.00  # 80 x 2 x 1024 x 8192 cells x 2 B
    assert all(c.ok for c in compare(inspect(meta, params).footprint, dry.allocations))


def test_a_big_model_gets_a_small_geometry_twin(tmp_path):
    meta = ModelMetadata(source="catalog:big-starcoder2", architecture="starcoder2", keys={
        "general.architecture": "starcoder2", "starcoder2.block_count": 4, "starcoder2.context_length": 16384,
        "starcoder2.embedding_length": 4608, "starcoder2.feed_forward_length": 18432,
        "starcoder2.attention.head_count": 36, "starcoder2.attention.head_count_kv": 4,
        "starcoder2.attention.layer_norm_epsilon": 1e-5, "starcoder2.vocab_size": 49152})
    twin = write_twin(meta, tmp_path / "sc2.gguf", require_layout=False)
    shapes = {t.name: t.shape for t in gguf_file.read_metadata(twin.path).tensors}
    assert shapes["blk.0.attn_k.weight"] == (4608, 512)  # the cache geometry kept
    assert shapes["blk.0.ffn_up.weight"] == (4608, generic.SMALL_FF)  # the FFN shrunk
    assert shapes["token_embd.weight"] == (4608, 259)  # the vocabulary shrunk
    dry = dry_runs(str(twin.path), [Params(n_ctx=4096, n_threads=1)])[0]
    assert dry.allocations.kv_caches[0].size_mib == 4 * 2 * 512 * 4096 * 2 / 2**20


def test_a_weight_only_key_llama_cpp_names_missing_is_stated_at_its_default():
    """A catalog entry sources what sizes a cache, not a norm epsilon llama.cpp still requires."""
    keys = generic.with_vocab(every_arch.metadata("llama"))
    del keys["llama.attention.layer_norm_rms_epsilon"]
    with pytest.raises(EngineError, match="key not found in model: llama.attention.layer_norm_rms_epsilon"):
        model_tensors(keys)
    listed, tensors = generic.listed_tensors(keys)
    assert listed["llama.attention.layer_norm_rms_epsilon"] == generic.WEIGHT_ONLY_DEFAULTS[
        "attention.layer_norm_rms_epsilon"]
    assert "blk.0.attn_k.weight" in {t.name for t in tensors}
    del keys["llama.block_count"]  # a key that shapes the model is never guessed
    with pytest.raises(EngineError, match="llama.block_count"):
        generic.listed_tensors(keys)
