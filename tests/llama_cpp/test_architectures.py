"""The architecture table: one row per architecture, and for every architecture of the catalog (and a few stand-ins
beside them) a twin that keeps its layout (the table's rules themselves are checked in
tests/pure/test_architecture_rules.py; every architecture's tiny twin in test_every_architecture.py).

Each architecture's source metadata is its catalog entry where the catalog has one; the others are
synthesized from a related entry's keys, the architecture prefix renamed (one row per case below,
each saying why it is a fair stand-in). The twin is written by the production writer, read back from
the file, and (slow) loaded by llama.cpp, whose printed KV size must equal the theory.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from llamabench.core.errors import BadModelFile, UnsupportedArchitecture
from llamabench.jobs.twin.build import write_twin
from llamabench.memory.footprint import compute_footprint
from llamabench.model import architectures
from llamabench.model.architectures import ARCHITECTURES, SUPPORTED, LayoutRule, SwaRule
from llamabench.model.layout import geometry_from_metadata
from llamabench.model.metadata import ModelMetadata
from llamabench.settings.params import Params
from llamabench.world.catalog import load_catalog
from llamabench.world.gguf_file import read_metadata
from tests.support.metadata import model

MIB = 2**20
CATALOG = {}
for _entry in load_catalog():
    CATALOG.setdefault(_entry.metadata.architecture, _entry.metadata)

# arch -> (catalog architecture to start from, suffixes to drop, suffixes to set, why it is a fair stand-in)
SYNTHESIZED = {
    "qwen2moe": ("qwen3moe", (), {"attention.head_count": 16, "expert_shared_feed_forward_length": 5632},
                 "qwen3moe's experts and a shared expert; 16 heads x 128 = n_embd for its {n_embd, n_embd} attn_q"),
    # qwen2, qwen3, qwen35 and nemotron_h_moe have catalog entries of their own (Qwen2.5-7B, Qwen3-8B, Qwen3.6-27B,
    # Nemotron-3-Nano-30B-A3B)
}


# the architectures twinned from real-model metadata here: the catalog's and the stand-ins'
TWINNED = tuple(sorted(set(CATALOG) | set(SYNTHESIZED)))


def renamed(meta: ModelMetadata, arch: str, drop: tuple[str, ...], add: dict) -> ModelMetadata:
    prefix = meta.architecture + "."
    suffixes = {k[len(prefix):]: v for k, v in meta.keys.items() if k.startswith(prefix)}
    suffixes = {s: v for s, v in suffixes.items() if s not in drop} | add
    return model(arch, f"{arch} from {meta.architecture}", **{s.replace(".", "__"): v for s, v in suffixes.items()})


def source_metadata(arch: str) -> ModelMetadata:
    if arch in CATALOG:
        return CATALOG[arch]
    base, drop, add, _why = SYNTHESIZED[arch]
    return renamed(CATALOG[base], arch, drop, add)


def kinds(meta: ModelMetadata) -> list[str]:
    return [str(layer.kind) for layer in geometry_from_metadata(meta).layers]


def test_every_stand_in_is_a_fresh_architecture():
    assert not set(SYNTHESIZED) & set(CATALOG), "a synthesized stand-in shadows a catalog entry"


def test_table_is_one_row_per_architecture():
    assert SUPPORTED == tuple(sorted(name for name, row in ARCHITECTURES.items() if row.has_rule))
    assert all(name == row.name for name, row in ARCHITECTURES.items())
    assert set(TWINNED) <= set(SUPPORTED)


def test_unknown_architecture_names_the_source_in_one_line():
    with pytest.raises(UnsupportedArchitecture) as exc:
        architectures.get("not-an-arch", "test:x.gguf")
    assert str(exc.value).startswith("test:x.gguf: architecture 'not-an-arch': no layout rule in llamabench (")
    assert str(exc.value).endswith("; " + architectures.NO_LAYOUT_TAIL)
    assert architectures.lookup("not-an-arch") is None and architectures.lookup("deepseek4") is None


def test_rows_are_consistent():
    for row in ARCHITECTURES.values():
        # a rule that can make a layer recurrent says how its state is sized, and only such a rule does
        may_recur = row.layout in (LayoutRule.INTERVAL, LayoutRule.KV_ZERO, LayoutRule.NEMOTRON_H,
                                   LayoutRule.RECURRENT, LayoutRule.PARALLEL)
        assert (row.recurrent_state is not None) == may_recur, row.name
        assert row.swa_pattern is None or row.swa is not SwaRule.NONE, row.name
        assert not row.rs_rollback or may_recur or not row.has_rule, row.name


def test_rs_rollback_rows_follow_llama_cpp():
    # llm_arch_supports_rs_rollback (src/llama-arch.cpp)
    llama_cpp = {"qwen35", "qwen35moe", "nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe", "kimi-k3", "qwen4exp",
                 "deepseek4", "glm5-next", "bailingmoe3"}
    assert {row.name for row in ARCHITECTURES.values() if row.rs_rollback} == llama_cpp


def test_architectures_is_a_core_module():
    """architectures.py may import only errors, gguf_keys and metadata of ours (never twin/ or higher)."""
    tree = ast.parse(Path(architectures.__file__).read_text())
    ours = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            ours |= {node.module} if node.module else {alias.name for alias in node.names}
    assert ours <= {"core.errors", "gguf_keys", "metadata"}


REQUIRED = [(arch, key) for arch in TWINNED for key in ARCHITECTURES[arch].required_keys]


@pytest.mark.parametrize("arch, key", REQUIRED, ids=[f"{a}-{k}" for a, k in REQUIRED])
def test_layout_requires_the_rows_keys(arch, key):
    """What llama.cpp's load_arch_hparams requires, the layout refuses to guess."""
    source = source_metadata(arch)
    keys = {k: v for k, v in source.keys.items() if k != f"{arch}.{key}"}
    with pytest.raises(BadModelFile, match=f"missing required key {arch}.{key}"):
        geometry_from_metadata(ModelMetadata(source.source, arch, keys))


@pytest.mark.parametrize("arch", TWINNED)
def test_twin_keeps_the_layer_kinds(arch, tmp_path):
    source = source_metadata(arch)
    twin = write_twin(source, tmp_path / f"{arch}.gguf")
    back = read_metadata(twin.path)
    assert back.architecture == arch
    assert kinds(back) == kinds(source)


@pytest.mark.slow
@pytest.mark.parametrize("arch", TWINNED)
def test_llama_cpp_loads_the_twin(arch, tmp_path):
    from llamabench.llama.worker import dry_runs

    twin = write_twin(source_metadata(arch), tmp_path / f"{arch}.gguf")
    settings = Params(n_ctx=512)
    (dry,) = dry_runs(str(twin.path), [settings])
    geometry = geometry_from_metadata(read_metadata(twin.path))
    theory_mib = compute_footprint(geometry, settings).kv_bytes / MIB
    assert dry.allocations.kv_mib == pytest.approx(theory_mib, abs=0.005)
