"""A Hugging Face repository named as llama.cpp's `-hf OWNER/REPO[:QUANT]` takes it, listed as llama.cpp lists it,
and the GGUF of it llama.cpp would load (world.hf_pick: llama.cpp's own rules). llama.cpp as vendored by
llama-cpp-python 0.3.36:

- common/download.cpp `common_download_split_repo_tag` (74-81): OWNER/REPO, then an optional `:TAG`;
- common/hf-cache.cpp `is_valid_repo_id` (120-141): [A-Za-z0-9_], with `/ . -` each between two of them, one `/`;
- common/hf-cache.cpp `get_repo_files` (273-351): ONE answer of the hub's tree API, `tree/REV?recursive=true` (293):
  no later page is asked for; an entry kept when it is an object of type "file" with a string path (300-305), the
  path inside the snapshot folder (311-316, `is_valid_subpath` 164-173), its oid (the LFS object's where `lfs` is an
  object, else its own) empty or 40 or 64 hex digits (318-329, `is_valid_oid` 160-162).

Read within remote.Reader's bounds; HF_ENDPOINT and HF_TOKEN honoured.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from ..core.safe_text import escaped
from .hf_pick import PRESET, best_model_file, tag_pattern, unlisted_parts
from .paths import HTTP_TIMEOUT_ENV, http_timeout
from .remote import MAX_REDIRECTS, MAX_TOTAL, Reader, RemoteError

_REPO = re.compile(r"[A-Za-z0-9_]+(?:[.-][A-Za-z0-9_]+)*/[A-Za-z0-9_]+(?:[.-][A-Za-z0-9_]+)*")  # hf-cache.cpp:120
_OID = re.compile(r"[0-9A-Fa-f]{40}|[0-9A-Fa-f]{64}")  # hf-cache.cpp:160


def names_a_repo(model: str) -> bool:
    """hf://OWNER/REPO or hf://OWNER/REPO:TAG (no file): a repository, as llama.cpp's -hf names one."""
    if not model.startswith("hf://"):
        return False
    spec = model[len("hf://"):].partition("@")[0]
    return spec.count("/") == 1


def split_repo_tag(text: str) -> tuple[str, str]:
    """(OWNER/REPO, TAG) of `OWNER/REPO[:TAG]`; RemoteError for anything else, hf_pick.BadTag (a UsageError) for a
    tag llama.cpp would not read as llamabench does."""
    repo, _, tag = str(text).partition(":")
    if not _REPO.fullmatch(repo) or len(repo) > 256 or ":" in tag:
        raise RemoteError(f"'{escaped(text)}' is not a Hugging Face repository: write OWNER/REPO[:QUANT] "
                          "(e.g. unsloth/Qwen3.5-35B-A3B-GGUF:Q4_K_M)")
    if tag:
        tag_pattern(tag)  # one llama.cpp reads as llamabench does (BadTag, before the hub is asked)
    return repo, tag


MAX_LISTED = 100_000  # files of one listing: more is not a model repository


@dataclass(frozen=True)
class Listing:
    """The files llama.cpp's -hf sees in a repository, in the hub's order, and their sizes (0: not said)."""

    sizes: dict[str, int]
    more_pages: bool  # the hub said it has more: llama.cpp reads the first page only, and so does llamabench

    @property
    def files(self) -> list[str]:
        return list(self.sizes)

    def unseen(self) -> str:
        """Words for an answer that may lie past the first page, where it does."""
        return (" (the hub lists more on later pages: llama.cpp's -hf reads the first page only, and so does "
                "llamabench)") if self.more_pages else ""


def repo_listing(repo: str, revision: str | None, shown: str) -> Listing:
    """The repository's files as llama.cpp's -hf lists them (hf-cache.cpp get_repo_files): one page of the hub's tree
    API, its entries kept by llama.cpp's rules, read by remote.Reader: one deadline (LLAMABENCH_HTTP_TIMEOUT, its
    sockets cut when it runs out), read to MAX_PAGE_BYTES at most before it is parsed, MAX_LISTED files at most,
    Authorization never sent to another host. A repository holding preset.ini is refused: llama.cpp then loads what
    the preset says (download.cpp:720-725)."""
    from huggingface_hub import get_token

    endpoint = (os.environ.get("HF_ENDPOINT") or "").rstrip("/") or "https://huggingface.co"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise RemoteError(f"{shown}: HF_HUB_OFFLINE is set, and listing a repository needs the hub (give the GGUF's "
                          "path, or unset it)")
    if not _REPO.fullmatch(repo):
        raise RemoteError(f"{shown}: not a repository (write OWNER/REPO)")
    try:
        _reachable(endpoint)  # offline: one line at once, naming the host
    except OSError as exc:
        raise RemoteError(f"{shown}: the repository's files could not be listed ({escaped(str(exc))})") from None
    url = f"{endpoint}/api/models/{repo}/tree/{quote(revision or 'main', safe='')}?recursive=true"
    token = get_token()
    with Reader(url, {"Authorization": f"Bearer {token}"} if token else {}, max_requests=MAX_REDIRECTS + 1,
                shown=shown, what="listing") as reader:
        body, more = _timed(reader, url)
    sizes: dict[str, int] = {}
    for path, size in _entries(body, shown):
        sizes.setdefault(path, size)
    if len(sizes) > MAX_LISTED:
        raise RemoteError(f"{shown}: more than {MAX_LISTED:,} files: not a model repository")
    if PRESET in sizes:
        raise RemoteError(f"{shown}: the repository holds {PRESET}, and llama.cpp's -hf then loads what the preset "
                          "names, not a GGUF picked by quant: llamabench cannot size it (give the GGUF as "
                          "hf://OWNER/REPO/FILE.gguf and load it with -m)")
    return Listing(sizes, more)


MAX_PAGE_BYTES = 32 * 2**20  # one page of the listing: the hub's own, 1,000 entries, is well under 1 MiB


def _timed(reader: Reader, page: str) -> tuple[bytes, bool]:
    """One page; the deadline's words where it ran out."""
    try:
        return reader.page(page, MAX_PAGE_BYTES)
    except RemoteError:
        if reader.deadline.expired:
            raise RemoteError(f"{reader.shown}: the repository's files were not listed in "
                              f"{reader.deadline.seconds:g} s (a server that stalls? {HTTP_TIMEOUT_ENV} sets the "
                              "limit)") from None
        raise


def _entries(body: bytes, shown: str):
    """(path, size) of each entry of the page llama.cpp keeps (hf-cache.cpp:300-329; an LFS file's size its
    object's, a size past remote.MAX_TOTAL not said); RemoteError where one could come back into the snapshot
    folder, as llama.cpp would keep it."""
    entries = _strict_json(body, shown)
    if not isinstance(entries, list):
        raise RemoteError(f"{shown}: the listing is not a list of files")
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != "file" or not isinstance(e.get("path"), str):
            continue
        path = e["path"]
        inside = _inside_snapshot(path)
        if inside is None:
            raise RemoteError(f"{shown}: the listing names {escaped(path[:120])!r}, a path that leaves the repository "
                              "and may come back into it as llama.cpp reads it: not a listing llamabench trusts")
        lfs = e["lfs"] if isinstance(e.get("lfs"), dict) else None
        oid = (lfs if lfs is not None else e).get("oid")
        if not inside or (isinstance(oid, str) and oid and not _OID.fullmatch(oid)):
            continue  # what llama.cpp skips ("skip invalid path", "skip invalid oid")
        size = (lfs or {}).get("size", e.get("size", 0))
        yield path, size if isinstance(size, int) and not isinstance(size, bool) and 0 <= size <= MAX_TOTAL else 0


def _strict_json(body: bytes, shown: str):
    """The page as llama.cpp's JSON parser (nlohmann) reads it, or RemoteError where it reads none: UTF-8 only (a BOM
    allowed), no NaN or Infinity, no lone surrogate. Where llama.cpp reads no listing it loads a file of its cache
    instead (download.cpp:713-715): not the one llamabench would size."""
    try:
        text = body.decode("utf-8").removeprefix("\ufeff")
        entries = json.loads(text, parse_constant=_no_constant)
        json.dumps(entries, ensure_ascii=False).encode("utf-8")  # a lone surrogate (\ud800) cannot be
    except (ValueError, RecursionError, UnicodeError):
        raise RemoteError(f"{shown}: the listing is not JSON (as llama.cpp reads it)") from None
    return entries


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _inside_snapshot(path: str) -> bool | None:
    """Whether llama.cpp keeps `path` as inside its snapshot folder, CACHE/models--O--R/snapshots/COMMIT
    (`is_valid_subpath`: not absolute, inside once lexically normalised): True, False, or None where it leaves and
    may come back in (its component after the climb could be the commit's 40 hex digits, which the hub names)."""
    if path.startswith("/"):
        return False
    kept: list[str] = []
    up = 0
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            kept.append(part)
        elif kept:
            kept.pop()
        else:
            up += 1
    if up == 0:
        return True
    could_return = len(kept) > up and re.fullmatch(r"[0-9A-Fa-f]{40}", kept[up - 1])
    return None if could_return else False


def _reachable(endpoint: str) -> None:
    """OSError where the hub cannot be reached at all (no network, nothing listening): the hub client would retry
    it for 24 s. One connection, within the HTTP deadline, closed at once."""
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=min(10.0, http_timeout())).close()
    except (OSError, UnicodeError) as exc:
        why = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        raise OSError(f"{parts.hostname}:{port} cannot be reached ({why})") from None


def expand(model: str) -> str:
    """hf://OWNER/REPO[:TAG][@REVISION] as hf://OWNER/REPO/FILE[@REVISION], FILE as llama.cpp's -hf picks it;
    any other MODEL as it is."""
    if not names_a_repo(model):
        return model
    spec, at, revision = model[len("hf://"):].partition("@")
    repo, tag = split_repo_tag(spec)
    listing = repo_listing(repo, revision, escaped(model))
    chosen = best_model_file(listing.files, tag)
    if chosen is None:
        listed = ", ".join(f for f in listing.files if f.endswith(".gguf"))[:300] or "none"
        raise RemoteError(f"hf://{escaped(spec)}: no GGUF {'for ' + escaped(tag) if tag else 'model file'} in the "
                          f"repository (its .gguf files: {escaped(listed)}){listing.unseen()}")
    unlisted = unlisted_parts(listing.files, chosen)
    if unlisted:
        raise RemoteError(f"hf://{escaped(spec)}: {unlisted}{listing.unseen()}")
    return f"hf://{repo}/{chosen}" + (f"@{revision}" if at else "")
