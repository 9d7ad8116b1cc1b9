"""A GGUF on a server: only its header and tensor infos are fetched, with HTTP range requests.

`https://.../file.gguf` and `hf://OWNER/REPO/FILE.gguf[@REVISION]` (resolved by huggingface_hub, which
honours HF_ENDPOINT and HF_TOKEN). Ranges of growing size are fetched until the tensor infos end;
the bytes are kept in the cache as a sparse copy of the file (its data a hole), keyed by URL and
ETag, so every reader of a local GGUF works on it unchanged. Each failure is one line naming the URL.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import LlamabenchError

FIRST_RANGE = 1 << 20  # 1 MiB, doubled until the header and tensor infos are in
MAX_HEADER = 1 << 30  # a GGUF whose header and tensor infos exceed 1 GiB is not one llamabench reads
TIMEOUT_S = float(os.environ.get("LLAMABENCH_HTTP_TIMEOUT", "30"))
GGUF_ALIGNMENT = 32


class RemoteError(LlamabenchError):
    """A remote GGUF that cannot be read: HTTP errors, servers without ranges, truncated headers."""


def is_remote(model: str) -> bool:
    return model.startswith(("http://", "https://", "hf://"))


def resolve_url(model: str) -> tuple[str, dict]:
    """(URL, headers) of a remote MODEL; hf:// through huggingface_hub with HF_ENDPOINT and HF_TOKEN."""
    if not model.startswith("hf://"):
        return model, {}
    from huggingface_hub import get_token, hf_hub_url

    spec = model[len("hf://"):]
    spec, _, revision = spec.partition("@")
    parts = spec.split("/")
    if len(parts) < 3 or not all(parts):
        raise RemoteError(f"{model}: write hf://OWNER/REPO/FILE.gguf[@REVISION]")
    try:
        url = hf_hub_url("/".join(parts[:2]), "/".join(parts[2:]), revision=revision or None,
                         endpoint=os.environ.get("HF_ENDPOINT") or None)
        token = get_token()
    except Exception as exc:  # huggingface_hub's validation errors: a bad repo id or revision
        raise RemoteError(f"{model}: not a Hugging Face path ({str(exc).splitlines()[0][:120]})") from None
    return url, ({"Authorization": f"Bearer {token}"} if token else {})


class NeedMore(Exception):
    def __init__(self, n: int):
        self.n = n


class _Cursor:
    """Walks a GGUF header in a bytes prefix; NeedMore when the prefix ends too soon."""

    SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise NeedMore(self.pos + n)
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> bytes:
        n = self.u64()
        if n > MAX_HEADER:
            raise RemoteError(f"a string of {n:,} bytes")
        return self.take(n)

    def value(self, vtype: int) -> object:
        if vtype == 8:
            return self.string()
        if vtype == 9:
            itype, count = self.u32(), self.u64()
            if itype == 8:
                for _ in range(count):
                    self.string()
            elif itype in self.SCALARS:
                self.take(self.SCALARS[itype] * count)
            else:
                raise RemoteError(f"an array of unknown type {itype}")
            return None
        if vtype not in self.SCALARS:
            raise RemoteError(f"a value of unknown type {vtype}")
        raw = self.take(self.SCALARS[vtype])
        return int.from_bytes(raw, "little") if vtype in (0, 2, 4, 10) else raw


def header_end(data: bytes) -> int:
    """Bytes from the start of the file to the end of the tensor infos (aligned): what must be fetched."""
    c = _Cursor(data)
    if c.take(4) != b"GGUF":
        raise RemoteError("not a GGUF file (no GGUF magic at the start)")
    c.u32()
    n_tensors, n_kv = c.u64(), c.u64()
    alignment = GGUF_ALIGNMENT
    for _ in range(n_kv):
        key = c.string()
        value = c.value(c.u32())
        if key == b"general.alignment" and isinstance(value, int) and value:
            alignment = value
    for _ in range(n_tensors):
        c.string()
        n_dims = c.u32()
        c.take(8 * n_dims + 4 + 8)
    return -(-c.pos // alignment) * alignment


@dataclass(frozen=True)
class Fetched:
    path: Path  # the sparse local copy
    url: str
    fetched_bytes: int
    total_bytes: int


def _session():
    import requests  # only for remote headers: kept off the import of llamabench (70 ms)

    session = requests.Session()
    session.max_redirects = 10
    return session


def _range(session, url: str, headers: dict, start: int, end: int) -> tuple[bytes, int, str | None]:
    """bytes [start, end] of the file, its total size and ETag; one line on every failure."""
    import requests

    try:
        response = session.get(url, headers={**headers, "Range": f"bytes={start}-{end}"}, stream=True,
                               timeout=TIMEOUT_S)
    except requests.TooManyRedirects:
        raise RemoteError(f"{url}: too many redirects (a redirect loop)") from None
    except requests.Timeout:
        raise RemoteError(f"{url}: no answer within {TIMEOUT_S:g} s") from None
    except requests.RequestException as exc:
        raise RemoteError(f"{url}: cannot be reached ({type(exc).__name__})") from None
    with response:
        if response.status_code in (401, 403):
            raise RemoteError(f"{url}: HTTP {response.status_code}: not allowed (set HF_TOKEN for a gated or private "
                              "repository)")
        if response.status_code == 404:
            raise RemoteError(f"{url}: HTTP 404: no such file")
        if response.status_code == 416:
            raise RemoteError(f"{url}: the file ends before its GGUF header does (truncated)")
        if response.status_code == 200:
            raise RemoteError(f"{url}: the server ignores HTTP range requests (it answered with the whole file); "
                              "download the file and give its path instead")
        if response.status_code != 206:
            raise RemoteError(f"{url}: HTTP {response.status_code}")
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        body = response.raw.read(end - start + 1, decode_content=True)
        etag = response.headers.get("ETag")
    return body, int(total) if total.isdigit() else -1, etag


def part_url(model: str, index: int, count: int) -> str:
    """The URL (or hf:// path) of part `index` (1-based) of a split set, from the first part's."""
    m = re.search(r"-(\d{5})-of-(\d{5})\.gguf(@[^/]*)?$", model)
    if not m:
        raise RemoteError(f"{model}: a split GGUF whose name does not end in -00001-of-{count:05d}.gguf")
    return model[:m.start()] + f"-{index:05d}-of-{count:05d}.gguf" + (m[3] or "")


def fetch_header(model: str, cache: Path, *, progress: bool | None = None) -> Fetched:
    """The header and tensor infos of a remote GGUF, as a sparse local file (cached by URL and ETag)."""
    url, headers = resolve_url(model)
    show = sys.stderr.isatty() if progress is None else progress
    session = _session()
    n = FIRST_RANGE
    data, total, etag = _range(session, url, headers, 0, n - 1)
    # one folder per remote folder, files under their own names: llama.cpp finds the parts of a split set
    folder, _, name = url.split("?")[0].rpartition("/")
    local = cache / "remote" / hashlib.sha256(folder.encode()).hexdigest()[:16] / (name or "model.gguf")
    meta = local.with_name(local.name + ".json")
    if total < 0:
        raise RemoteError(f"{url}: the server does not say how large the file is (Content-Range without a size)")
    if etag and local.exists() and meta.exists():
        try:
            stored = json.loads(meta.read_text())
            if stored.get("etag") == etag and stored.get("url") == url:
                return Fetched(local, url, int(stored["fetched_bytes"]), int(stored["total_bytes"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # a damaged cache entry: fetch again
    while True:
        try:
            end = header_end(data)
            break
        except NeedMore as more:
            if len(data) >= total > 0:
                raise RemoteError(f"{url}: the file ends ({total:,} bytes) before its GGUF header does (truncated)") \
                    from None
            if more.n > MAX_HEADER:
                raise RemoteError(f"{url}: a GGUF header over {MAX_HEADER // 2**20} MiB is not one llamabench reads") \
                    from None
            n = max(n * 2, more.n)
            chunk, total, _ = _range(session, url, headers, len(data), n - 1)
            if not chunk:
                raise RemoteError(f"{url}: the file ends before its GGUF header does (truncated)") from None
            data += chunk
            if show:
                print(f"\rfetching the header of {url}: {len(data) / 2**20:.1f} MiB", end="", file=sys.stderr)
        except RemoteError as exc:
            raise RemoteError(f"{url}: {exc}") from None
        except struct.error:
            raise RemoteError(f"{url}: unreadable GGUF header") from None
    if show:
        print(file=sys.stderr)
    tmp = local.with_name(f"{local.name}.{os.getpid()}.part")
    try:
        local.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data[:end])
            f.truncate(max(total, end))  # the tensor data stays a hole: nothing reads it
        os.replace(tmp, local)
        tmp_meta = meta.with_name(f"{meta.name}.{os.getpid()}.part")
        tmp_meta.write_text(json.dumps({"url": url, "etag": etag, "fetched_bytes": len(data), "total_bytes": total}))
        os.replace(tmp_meta, meta)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RemoteError(f"{url}: cannot keep its header in the cache {local.parent} ({exc.strerror})") from None
    print(f"llamabench: fetched {len(data) / 2**20:.2f} MiB of {total / 2**30:.2f} GiB (header and tensor infos) "
          f"from {url}", file=sys.stderr)
    return Fetched(local, url, len(data), total)
