"""The model catalog: well-formed, sourced, cross-checked against the tool's own numbers."""

from __future__ import annotations

import pytest

from llamabench.cli import main
from llamabench.core.errors import CatalogError
from llamabench.memory.inspection import f16_kv_bytes_per_token
from llamabench.model.layout import geometry_from_metadata
from llamabench.world import catalog

ENTRIES = catalog.load_catalog()

GOOD = '''
[[model]]
id = "tiny"
name = "Tiny"
architecture = "llama"
[model.metadata]
block_count = { value = 2, source = "test" }
context_length = { value = 4096, source = "test" }
embedding_length = { value = 64, source = "test" }
"attention.head_count" = { value = 4, source = "test" }
'''


def test_catalog_covers_the_families():
    assert len(ENTRIES) >= 10
    assert len({e.id for e in ENTRIES}) == len(ENTRIES)
    archs = {e.metadata.architecture for e in ENTRIES}
    assert {"qwen35moe", "qwen3moe", "gemma3", "gpt-oss", "granitehybrid", "deepseek2"} <= archs
    assert {"gemma4", "qwen35", "glm4moe", "nemotron_h_moe", "kimi-linear", "lfm2moe", "exaone4", "llama4"} <= archs
    assert {"phi3", "mistral3", "olmo2"} <= archs


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_every_value_has_a_source(entry):
    geometry = geometry_from_metadata(entry.metadata)
    assert geometry.n_layer > 0
    prefix = entry.metadata.architecture + "."
    suffixes = {k[len(prefix):] for k in entry.metadata.keys if k.startswith(prefix)}
    assert suffixes == set(entry.sources)
    assert all(s.strip() for s in entry.sources.values())


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.published_kv_bytes_per_token], ids=lambda e: e.id)
def test_published_kv_bytes_per_token_agree(entry):
    assert f16_kv_bytes_per_token(geometry_from_metadata(entry.metadata)) == entry.published_kv_bytes_per_token


@pytest.mark.parametrize("text, needle", [
    (GOOD + GOOD, "duplicate catalog id 'tiny'"),
    (GOOD.replace('id = "tiny"\n', ""), "missing string key 'id'"),
    (GOOD.replace('block_count = { value = 2, source = "test" }', "block_count = 2"), "'tiny': block_count must be"),
    (GOOD.replace('value = 2, source', 'value = "two", source'), "'tiny'"),
    (GOOD.replace('block_count = { value = 2, source = "test" }\n', ""), "'tiny': metadata lacks 'block_count'"),
    (GOOD.replace('source = "test" }', 'source = "" }', 1), "'tiny': block_count has an empty source"),
    ("[[model]\nid=", "not valid TOML"),
])
def test_malformed_catalog(tmp_path, monkeypatch, capsys, text, needle):
    path = tmp_path / "models.toml"
    path.write_text(text)
    with pytest.raises(CatalogError) as exc:
        catalog.load_catalog(path)
    assert needle in str(exc.value)
    monkeypatch.setenv("LLAMABENCH_CATALOG", str(path))
    assert main(["inspect", "tiny"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_published_value_that_differs_is_reported(tmp_path, monkeypatch, capsys):
    path = tmp_path / "models.toml"
    path.write_text(GOOD.replace('architecture = "llama"',
                                 'architecture = "llama"\n'
                                 'kv_cache_bytes_per_token = { value = 999, source = "a blog" }'))
    monkeypatch.setenv("LLAMABENCH_CATALOG", str(path))
    assert main(["inspect", "tiny", "--ctx", "4096"]) == 0
    assert "DIFFERS" in capsys.readouterr().out
