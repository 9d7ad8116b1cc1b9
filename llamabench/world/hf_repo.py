"""A Hugging Face repository named as llama.cpp's `-hf OWNER/REPO[:QUANT]` takes it, and the GGUF of it llama.cpp
would load: the repository's files listed (the hub's tree API, read within remote.Reader's bounds; HF_ENDPOINT and
HF_TOKEN honoured), the model file picked by llama.cpp's own rule (common/download.cpp, llama.cpp as vendored by
llama-cpp-python 0.3.36):

- `common_download_split_repo_tag` (74-81): OWNER/REPO, then an optional `:TAG`;
- `find_best_model` (655-690): the first file whose path matches `TAG[.-]` (any case), else with no tag
  Q4_K_M, then Q8_0, then the first model file; a split set's first part only;
- `gguf_filename_is_model` (636-653): a .gguf that is no mmproj, imatrix, mtp-, eagle3-, dflash- or dspark- file.
"""

from __future__ import annotations

import json
import os
import re
import socket
from urllib.parse import quote, urlsplit

from ..core.safe_text import escaped
from .paths import HTTP_TIMEOUT_ENV, http_timeout
from .remote import Reader, RemoteError

DEFAULT_TAGS = ("Q4_K_M", "Q8_0")
_SIDECARS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def names_a_repo(model: str) -> bool:
    """hf://OWNER/REPO or hf://OWNER/REPO:TAG (no file): a repository, as llama.cpp's -hf names one."""
    if not model.startswith("hf://"):
        return False
    spec = model[len("hf://"):].partition("@")[0]
    return spec.count("/") == 1


def split_repo_tag(text: str) -> tuple[str, str]:
    """(OWNER/REPO, TAG) of `OWNER/REPO[:TAG]`; RemoteError for anything else."""
    repo, _, tag = str(text).partition(":")
    if not _REPO.fullmatch(repo) or ":" in tag or re.search(r"[^A-Za-z0-9_.-]", tag):
        raise RemoteError(f"'{escaped(text)}' is not a Hugging Face repository: write OWNER/REPO[:QUANT] "
                          "(e.g. unsloth/Qwen3.5-35B-A3B-GGUF:Q4_K_M)")
    return repo, tag


def is_model_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".gguf") and not any(s in name for s in _SIDECARS)


def _first_part(path: str) -> bool:
    m = _SPLIT.search(path)
    return m is None or int(m[2]) <= 1 or int(m[1]) == 1


def best_model_file(files: list[str], tag: str) -> str | None:
    """The file llama.cpp's -hf loads for TAG (find_best_model)."""
    for t in ([tag] if tag else list(DEFAULT_TAGS)):
        pattern = re.compile(re.escape(t) + r"[.-]", re.IGNORECASE)
        for f in files:
            if is_model_file(f) and pattern.search(f) and _first_part(f):
                return f
    if not tag:
        return next((f for f in files if is_model_file(f) and _first_part(f)), None)
    return None


_QUANT_TAG = re.compile(r"(?<![A-Za-z0-9])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|TQ\d_\d|MXFP4(?:_[A-Z0-9]+)*|BF16|F16|F32))"
                        r"(?=[.-])", re.IGNORECASE)


def quant_tag(path: str) -> str | None:
    """The quant a model file's name says (Q4_K_M, UD-Q4_K_XL, IQ4_XS, BF16...; the last one named), or None."""
    found = _QUANT_TAG.findall(path.rsplit("/", 1)[-1])
    return found[-1].upper() if found else None


def split_parts(files: list[str], first: str) -> list[str]:
    """Every part of the split set whose first part is `first` (the file alone where it is not split), in order."""
    m = _SPLIT.search(first)
    if m is None:
        return [first]
    stem, count = first[:m.start()], int(m[2])
    return [p for i in range(1, count + 1) if (p := f"{stem}-{i:05d}-of-{count:05d}.gguf") in files]


def repo_quants(files: list[str]) -> dict[str, str]:
    """Each quant the repository holds and the file llama.cpp's -hf OWNER/REPO:QUANT loads for it, in listing order."""
    out: dict[str, str] = {}
    for f in files:
        tag = quant_tag(f) if is_model_file(f) and _first_part(f) else None
        if tag and tag not in out:
            chosen = best_model_file(files, tag)
            if chosen is not None:
                out[tag] = chosen
    return out


MAX_LISTED = 100_000  # files of one repository: more is not a model repository, and the listing would not end


def repo_files(repo: str, revision: str | None, shown: str) -> list[str]:
    return list(repo_listing(repo, revision, shown))


def repo_listing(repo: str, revision: str | None, shown: str) -> dict[str, int]:
    """The repository's files and their sizes (0: not said), from the hub's tree API (what huggingface_hub's
    list_repo_tree asks: recursive, page by page along the Link header; HF_ENDPOINT and HF_TOKEN honoured), read
    by remote.Reader: one deadline over every page (LLAMABENCH_HTTP_TIMEOUT, its sockets cut when it runs out), each
    page read to MAX_PAGE_BYTES at most before it is parsed, MAX_LISTED files and MAX_PAGES pages in all, a page that
    comes again refused, Authorization never sent to another host."""
    from huggingface_hub import get_token

    endpoint = (os.environ.get("HF_ENDPOINT") or "").rstrip("/") or "https://huggingface.co"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise RemoteError(f"{shown}: HF_HUB_OFFLINE is set, and listing a repository needs the hub (give the GGUF's "
                          "path, or unset it)")
    if not _REPO.fullmatch(repo) or ".." in repo:
        raise RemoteError(f"{shown}: not a repository (write OWNER/REPO)")
    try:
        _reachable(endpoint)  # offline: one line at once, naming the host
    except OSError as exc:
        raise RemoteError(f"{shown}: the repository's files could not be listed ({escaped(str(exc))})") from None
    url = f"{endpoint}/api/models/{repo}/tree/{quote(revision or 'main', safe='')}?recursive=true&expand=false"
    token = get_token()
    files: dict[str, int] = {}
    seen: set[str] = set()
    with Reader(url, {"Authorization": f"Bearer {token}"} if token else {}, max_requests=MAX_PAGES,
                shown=shown, what="listing") as reader:
        page: str | None = url
        while page:
            if page in seen:
                raise RemoteError(f"{shown}: the listing's pages come round again (a page links to an earlier one)")
            seen.add(page)
            body, page = _timed(reader, page)
            for path, size in _entries(body, shown):
                files[path] = size
            if len(files) > MAX_LISTED:
                raise RemoteError(f"{shown}: more than {MAX_LISTED:,} files: not a model repository")
    return files


MAX_PAGE_BYTES = 32 * 2**20  # one page of the listing: the hub's own, 1,000 entries, is well under 1 MiB
MAX_PAGES = 500  # the hub's pages hold 1,000 entries: MAX_LISTED in 100


def _timed(reader: Reader, page: str) -> tuple[bytes, str | None]:
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
    """(path, size) of each file of one listing page (a JSON array of the hub's tree entries; directories skipped,
    an LFS file's size its object's)."""
    try:
        entries = json.loads(body)
    except (ValueError, RecursionError):
        raise RemoteError(f"{shown}: the listing is not JSON") from None
    if not isinstance(entries, list):
        raise RemoteError(f"{shown}: the listing is not a list of files")
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != "file":
            continue
        path = e.get("path")
        lfs = e.get("lfs") if isinstance(e.get("lfs"), dict) else {}
        size = lfs.get("size", e.get("size", 0))
        if isinstance(path, str) and path:
            yield path, size if isinstance(size, int) and not isinstance(size, bool) and 0 <= size < 2**60 else 0


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
    files = repo_files(repo, revision, escaped(model))
    chosen = best_model_file(files, tag)
    if chosen is None:
        listed = ", ".join(f for f in files if f.endswith(".gguf"))[:300] or "none"
        raise RemoteError(f"hf://{spec}: no GGUF {'for ' + tag if tag else 'model file'} in the repository "
                          f"(its .gguf files: {escaped(listed)})")
    return f"hf://{repo}/{chosen}" + (f"@{revision}" if at else "")
