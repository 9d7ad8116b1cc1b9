"""A Hugging Face hub on 127.0.0.1 for the -hf tests: the tree API answering the pages a test gives, as the hub writes
its entries, the files served from a folder (OWNER/REPO/resolve/REVISION/FILE), HF_ENDPOINT pointed at it."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from llamabench.cli import main
from llamabench.jobs.twin.build import write_twin
from llamabench.world import catalog
from tests.support.http_server import FileServer, tree_entry

REPO = "someone/some-repo"
SMALL = "exaone-4-0-1-2b"  # a catalog model whose twin is written in seconds and fitted in one or two


@contextmanager
def fake_hub(root: Path, pages: list[list[dict]] | None, monkeypatch) -> Iterator[FileServer]:
    """The hub: `pages` of tree entries (None: every file of `root`, one page), `root`'s files served."""
    with FileServer(root) as server:
        server.served.pages = pages
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def entry(path: str, size: int = 0, oid: str | None = None, lfs: dict | None = None) -> dict:
    """One file of a listing page (a valid oid unless given; an LFS object where given)."""
    e = tree_entry(path, size, oid)
    return {**e, "lfs": lfs} if lfs is not None else e


def small_twin(path: Path) -> Path:
    """SMALL's shape twin, written at `path`."""
    return write_twin(catalog.get_entry(SMALL).metadata, path).path


def asked_of(server: FileServer) -> list[str]:
    """The paths the hub was asked for, in order."""
    return [r.path for r in server.served.requests]


def one_error(capsys, argv, needle: str, code: int = 1) -> str:
    """The one line on stderr of a refused command, which must hold `needle`."""
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("llamabench: error:") and needle in err[0], err
    return err[0]
