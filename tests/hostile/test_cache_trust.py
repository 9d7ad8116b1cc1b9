"""The cache trusts only what the user owns (issue 33): no code or data is taken from a file the user does not own,
that others can write, or that is a link; no file is written through a link; folders are 0700 whatever the umask."""

from __future__ import annotations

import os
import stat

import pytest

from llamabench.core.errors import UntrustedCache
from llamabench.llama import breakdown
from llamabench.world import bandwidth
from llamabench.world.private import private_folder, trusted_file, write_private


@pytest.fixture
def shim_folder(tmp_path, monkeypatch):
    """A fresh shim cache, and the folder the installed libllama's shim goes to."""
    monkeypatch.setenv("LLAMABENCH_SHIM_DIR", str(tmp_path / "shim"))
    folder = tmp_path / "shim" / breakdown._key(breakdown._libllama())
    return folder


def test_a_planted_link_in_the_shim_cache_is_never_loaded(shim_folder, tmp_path):
    evil = tmp_path / "evil.so"
    evil.write_bytes(b"\x7fELF not ours")
    private_folder(shim_folder)
    (shim_folder / breakdown.LIBRARY_NAME).symlink_to(evil)
    with pytest.raises(UntrustedCache, match="is a symbolic link"):
        breakdown.build()


def test_a_shim_others_can_write_is_never_loaded(shim_folder):
    private_folder(shim_folder)
    planted = shim_folder / breakdown.LIBRARY_NAME
    planted.write_bytes(b"\x7fELF not ours")
    planted.chmod(0o666)
    with pytest.raises(UntrustedCache, match="writable by others"):
        breakdown.build()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_shim_of_another_user_is_never_loaded(shim_folder):
    private_folder(shim_folder)
    planted = shim_folder / breakdown.LIBRARY_NAME
    planted.write_bytes(b"\x7fELF not ours")
    os.chown(planted, 65534, 65534)
    with pytest.raises(UntrustedCache, match="belongs to uid 65534"):
        breakdown.build()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_cache_folder_of_another_user_is_refused(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 65534, 65534)
    with pytest.raises(UntrustedCache, match="belongs to uid 65534"):
        private_folder(folder)


def test_folders_are_0700_under_umask_000(tmp_path):
    old = os.umask(0)
    try:
        made = private_folder(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    for level in (tmp_path / "a", made):
        assert stat.S_IMODE(os.lstat(level).st_mode) == 0o700


def test_the_bandwidth_cache_never_writes_through_a_link(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(bandwidth, "measure", lambda: bandwidth.Bandwidth(10.0, 12.0, 2, "test"))  # not timed here
    victim = tmp_path / "notes.txt"
    victim.write_text("the user's own file")
    private_folder(tmp_path / "cache")
    (tmp_path / "cache" / "bandwidth.json").symlink_to(victim)
    assert bandwidth.cached_measure().copy_gbps == 10.0
    assert victim.read_text() == "the user's own file"  # the link was replaced, its target untouched
    assert not (tmp_path / "cache" / "bandwidth.json").is_symlink()
    assert trusted_file(tmp_path / "cache" / "bandwidth.json")


def test_a_fifo_is_not_a_cached_file(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UntrustedCache, match="not a regular file"):
        trusted_file(fifo)  # never opened: reading a FIFO would hang


def test_write_private_replaces_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = private_folder(tmp_path / "c") / "entry"
    link.symlink_to(victim)
    write_private(link, "cached")
    assert victim.read_text() == "keep" and link.read_text() == "cached" and not link.is_symlink()


def test_the_twin_cache_follows_no_link(tmp_path, monkeypatch):
    """A link to a FIFO hung verify; a planted regular file of another's was used as the twin without a word."""
    from llamabench.core.errors import UntrustedCache
    from llamabench.jobs.twin.cache import cached_twin
    from llamabench.world import catalog

    monkeypatch.setenv("LLAMABENCH_CACHE_DIR", str(tmp_path / "cache"))
    meta = catalog.get_entry("qwen3-30b-a3b").metadata
    path = cached_twin(meta, "qwen3-30b-a3b")  # written once, the user's own
    assert cached_twin(meta, "qwen3-30b-a3b") == path
    path.unlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path.symlink_to(fifo)
    with pytest.raises(UntrustedCache, match="is a symbolic link"):
        cached_twin(meta, "qwen3-30b-a3b")  # refused at once, never opened (a FIFO would block)
