"""Tiny ModelMetadata for the pure tests: no file, just the keys a case needs."""

from __future__ import annotations

from llamabench.model.metadata import ModelMetadata


def model(arch: str, name: str = "", **suffix_values) -> ModelMetadata:
    """ModelMetadata from `{arch}.`-relative keys; '__' in a keyword stands for '.'."""
    keys = {"general.architecture": arch}
    for suffix, value in suffix_values.items():
        keys[f"{arch}.{suffix.replace('__', '.')}"] = value
    return ModelMetadata(source=f"test:{name or arch}", architecture=arch, keys=keys, name=name)
