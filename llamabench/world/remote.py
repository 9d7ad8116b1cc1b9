"""A GGUF on a server: only its header and tensor infos are fetched, with HTTP range requests.

`https://.../file.gguf` and `hf://OWNER/REPO/FILE.gguf[@REVISION]` (resolved by huggingface_hub, which
honours HF_ENDPOINT and HF_TOKEN). Ranges of growing size are fetched until the tensor infos end
(this module only fetches bytes: gguf_file's one header parser reads them, and says when it needs more);
the bytes are kept in the cache as a sparse copy of the file (its data a hole), keyed by URL and
ETag, so every reader of a local GGUF works on it unchanged. Each failure is one line naming the URL.

The server is not trusted. One header read has one deadline (LLAMABENCH_HTTP_TIMEOUT) over all its
requests, a bounded number of requests, answers checked against what was asked (Content-Range, length),
one version of the file (ETag, size, Last-Modified; later ranges sent with If-Range), redirects followed
by hand (a redirect's body is never read; Authorization never leaves the first host), and URLs shown
and stored without their password or query string.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import LlamabenchError
from ..core.safe_text import escaped
from ..model.split_name import split_path, split_prefix
from .gguf_file import BadHeader, NeedMore, parse_header
from .paths import http_low_speed, http_timeout
from .private import private_folder, trusted_file, write_private

FIRST_RANGE = 1 << 20  # 1 MiB, doubled until the header and tensor infos are in
MAX_HEADER = 1 << 30  # a GGUF whose header and tensor infos exceed 1 GiB is not one llamabench reads
MAX_TOTAL = 1 << 50  # a file over 1 PiB is a lying server, not a model
MAX_REQUESTS = 64  # requests of one header read, redirects included (1 MiB doubled to 1 GiB takes 11)
MAX_REDIRECTS = 10
READ_CHUNK = 1 << 16  # a body is read in chunks, the deadline checked between them
MAX_NAME = 120  # bytes of a cached file's name kept as it is; longer or odd names are hashed

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/]*)@")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=,@-]*")
_STRONG_ETAG = re.compile(r'"[\x21\x23-\x7e]*"')


class RemoteError(LlamabenchError):
    """A remote GGUF that cannot be read: HTTP errors, servers without ranges, truncated headers."""


def is_remote(model: str) -> bool:
    return model.startswith(("http://", "https://", "hf://"))


def redact(url: str) -> str:
    """A URL fit to print and to keep: no password (`user:***@`), no query string or fragment (signatures
    and tokens ride there), control characters escaped."""
    url = re.split(r"[?#]", url, maxsplit=1)[0]
    m = _USERINFO.match(url)
    if m:
        user, colon, _ = m[2].partition(":")
        url = f"{m[1]}{user + ':***' if colon else '***'}@{url[m.end():]}"
    return escaped(url)


def resolve_url(model: str) -> tuple[str, dict]:
    """(URL, headers) of a remote MODEL; hf:// through huggingface_hub with HF_ENDPOINT and HF_TOKEN."""
    if not model.startswith("hf://"):
        return model, {}
    from huggingface_hub import get_token, hf_hub_url

    repo, filename, revision = _hf_parts(model)
    try:
        url = hf_hub_url(repo, filename, revision=revision or None,
                         endpoint=(os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None)
        token = get_token()
    except Exception as exc:  # huggingface_hub's validation errors: a bad repo id or revision
        why = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise RemoteError(f"{redact(model)}: not a Hugging Face path ({escaped(why)})") from None
    return url, ({"Authorization": f"Bearer {token}"} if token else {})


def _hf_parts(model: str) -> tuple[str, str, str]:
    """(OWNER/REPO, FILE, REVISION) of an hf:// path that stays inside its repository on the endpoint."""
    spec, at, revision = model[len("hf://"):].partition("@")
    parts = spec.split("/")
    shown = redact(model)
    if len(parts) < 3:
        raise RemoteError(f"{shown}: write hf://OWNER/REPO/FILE.gguf[@REVISION]")
    if re.search(r"[?#%\\]|[\x00-\x1f\x7f]", model):
        raise RemoteError(f"{shown}: an hf:// path holds no '?', '#', '%', '\\' or control character; "
                          "write hf://OWNER/REPO/FILE.gguf[@REVISION]")
    if any(s in ("", ".", "..") for s in parts + (revision.split("/") if at else [])):
        raise RemoteError(f"{shown}: an hf:// path with an empty, '.' or '..' part would leave its repository; "
                          "write hf://OWNER/REPO/FILE.gguf[@REVISION]")
    return "/".join(parts[:2]), "/".join(parts[2:]), revision


@dataclass(frozen=True)
class Fetched:
    path: Path  # the sparse local copy
    url: str  # as shown: without password or query string
    fetched_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class _Answer:
    body: bytes
    total: int
    version: tuple  # (ETag, total size, Last-Modified): the same for every answer about one file


class _Deadline:
    """One clock for all the requests of one header read. When it runs out, the sockets still open are
    shut, so a server that trickles its headers or body a byte at a time cannot hold a read past it. A low-speed
    limit too (curl's --speed-limit / --speed-time): fewer than `low_bytes` in any `low_seconds` (headers count as
    nothing until they are whole) cuts the read early, said as a stall."""

    def __init__(self, seconds: float, low_speed: tuple[int, float] = (0, 0.0)):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self.stalled = False
        self.low_bytes, self.low_seconds = low_speed
        self._arrived: list[tuple[float, int]] = [(time.monotonic(), 0)]
        self._conns: list = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()
        self._done = threading.Event()
        if self.low_bytes and self.low_seconds:
            threading.Thread(target=self._watch_speed, daemon=True).start()

    def got(self, n_bytes: int) -> None:
        """Bytes of an answer arrived (the low-speed limit's measure)."""
        with self._lock:
            self._arrived.append((time.monotonic(), n_bytes))

    def _watch_speed(self) -> None:
        while not self._done.wait(min(1.0, self.low_seconds / 4)):
            now = time.monotonic()
            with self._lock:
                first = self._arrived[0][0]
                recent = sum(n for t, n in self._arrived if t >= now - self.low_seconds)
                self._arrived = [(t, n) for t, n in self._arrived if t >= now - self.low_seconds] or [(first, 0)]
            if now - first >= self.low_seconds and recent < self.low_bytes:
                self.stalled = True
                self._expire()
                return

    def left(self) -> float:
        return self.end - time.monotonic()

    def watch(self, conn) -> None:
        with self._lock:
            self._conns.append(conn)
            if self.expired:
                _cut(conn)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for conn in self._conns:
                _cut(conn)

    def cancel(self) -> None:
        self._timer.cancel()
        self._done.set()


def _cut(conn) -> None:
    """Shut a connection's socket under a blocked read (the plain socket's shutdown: TLS state untouched)."""
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except (OSError, TypeError):
            pass


def _session(deadline: _Deadline):
    """A requests session whose every connection the deadline can cut."""
    import requests  # only for remote headers: kept off the import of llamabench (70 ms)
    from requests.adapters import HTTPAdapter

    def watched(pools: dict) -> dict:
        """urllib3's pool classes, each new connection shown to the deadline."""
        def subclass(base):
            class Pool(base):
                def _new_conn(self):
                    conn = super()._new_conn()
                    deadline.watch(conn)
                    return conn
            return Pool
        return {scheme: subclass(base) for scheme, base in pools.items()}

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = watched(self.poolmanager.pool_classes_by_scheme)

        def proxy_manager_for(self, proxy, **kwargs):
            fresh = proxy not in self.proxy_manager
            manager = super().proxy_manager_for(proxy, **kwargs)
            if fresh and not proxy.lower().startswith("socks"):  # a SOCKS manager keeps its own pools
                manager.pool_classes_by_scheme = watched(manager.pool_classes_by_scheme)
            return manager

    session = requests.Session()
    for prefix in ("http://", "https://"):
        session.mount(prefix, Adapter())
    return session


_read = [0]
_read_lock = threading.Lock()


def _count(n: int) -> None:
    with _read_lock:
        _read[0] += n


def bytes_read() -> int:
    """Bytes of remote files this process has read so far (every range answered, every thread)."""
    with _read_lock:
        return _read[0]


class Reader:
    """The requests of one header read: one deadline, a bounded count, one version of the file."""

    def __init__(self, url: str, headers: dict, *, max_requests: int | None = None, shown: str | None = None,
                 what: str = "header"):
        self.url, self.shown, self.headers, self.what = url, shown or redact(url), headers, what
        self.deadline = _Deadline(http_timeout(), http_low_speed())
        self.session = _session(self.deadline)
        self.requests = 0
        self.max_requests = MAX_REQUESTS if max_requests is None else max_requests  # read at the call (tests lower it)
        self.version: tuple | None = None

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc) -> None:
        self.deadline.cancel()
        self.session.close()

    def error(self, what: str) -> RemoteError:
        return RemoteError(f"{self.shown}: {what}")

    def too_slow(self) -> RemoteError:
        if self.deadline.stalled:
            d = self.deadline
            return self.error(f"fewer than {d.low_bytes:,} bytes arrived in {d.low_seconds:g} s: the server stalls "
                              "(LLAMABENCH_HTTP_LOW_SPEED sets the limit)")
        return self.error(f"no complete answer within {self.deadline.seconds:g} s")

    def changed(self) -> RemoteError:
        return self.error("changed on the server while its header was read; try again")

    def time_left(self) -> float:
        left = self.deadline.left()
        if left <= 0 or self.deadline.expired:
            raise self.too_slow()
        return left

    def range(self, start: int, end: int) -> _Answer:
        """Bytes [start, end] of the file (fewer only where the file ends), checked against what was asked."""
        headers = {**self.headers, "Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"}
        etag = self.version[0] if self.version else None
        if etag and _STRONG_ETAG.fullmatch(etag):
            headers["If-Range"] = etag  # a changed file then answers 200 with all of itself
        response = self._get(headers)
        with response:
            self._check_status(response.status_code, "If-Range" in headers)
            if response.headers.get("Content-Encoding", "identity").strip().lower() not in ("identity", ""):
                raise self.error(f"the server compresses its ranges (Content-Encoding: "
                                 f"{escaped(response.headers['Content-Encoding'][:40])}); download the file and "
                                 "give its path instead")
            first, last, total = self._content_range(response.headers.get("Content-Range"), start)
            self._same_version((response.headers.get("ETag"), total, response.headers.get("Last-Modified")))
            if last < end and last + 1 < total:
                raise self.error(f"the server answers ranges with fewer bytes than asked (bytes {first}-{last} "
                                 f"for {start}-{end})")
            want = min(last, end) - start + 1
            body = self._body(response, want)
        if len(body) < want:
            raise self.error(f"the connection ended mid-answer ({len(body):,} of {want:,} bytes)")
        _count(len(body))
        return _Answer(body, total, self.version)

    def page(self, url: str, max_bytes: int) -> tuple[bytes, bool]:
        """A whole answer of at most `max_bytes` (a hub's listing page: read to its cap before anything parses it),
        and whether its Link header names a next page (never asked for: llama.cpp's -hf reads the first only)."""
        from requests.utils import parse_header_links

        response = self._get({**self.headers, "Accept-Encoding": "identity"}, url)
        with response:
            if response.status_code != 200:
                if response.status_code in (401, 403):
                    raise self.error(f"HTTP {response.status_code}: not allowed (set HF_TOKEN for a gated or "
                                     "private repository)")
                raise self.error(f"HTTP {response.status_code}" + (": no such repository or revision"
                                                                  if response.status_code == 404 else ""))
            body = self._body(response, max_bytes + 1)
            link = response.headers.get("Link", "")[:4096]
        if len(body) > max_bytes:
            raise self.error(f"one page of the listing is over {max_bytes // 2**20} MiB: not a model repository")
        _count(len(body))
        return body, any(x.get("rel") == "next" for x in parse_header_links(link)) if link else False

    def _get(self, headers: dict, url: str | None = None):
        """The answer to a GET, redirects followed by hand: their bodies unread, the deadline over all, and
        credentials (Authorization, a URL's user:password) dropped for good once a redirect leaves the host."""
        from requests.compat import urljoin
        from requests.utils import get_auth_from_url

        url, headers = url or self.url, dict(headers)
        auth = get_auth_from_url(url) if _USERINFO.match(url) else None
        for _ in range(MAX_REDIRECTS + 1):
            response = self._send(url, headers, auth)
            self.deadline.got(sum(len(k) + len(v) + 4 for k, v in response.headers.items()))  # the whole header
            if not response.is_redirect:
                return response
            response.close()
            try:
                target = urljoin(url, self.session.get_redirect_target(response))
            except (ValueError, UnicodeError):
                raise self.error("redirected to an address that is not a URL") from None
            if self.session.should_strip_auth(url, target):
                headers.pop("Authorization", None)
                auth = None
            url = target
        raise self.error("too many redirects (a redirect loop)")

    def _send(self, url: str, headers: dict, auth):
        import requests

        self.requests += 1
        if self.requests > self.max_requests:
            raise self.error(f"more than {self.max_requests} requests for one {self.what}; the server does not "
                             "answer as asked")
        left = self.time_left()
        try:
            # the adapter, not Session.send: that one reads a redirect's whole body, even when not following it
            prepared = self.session.prepare_request(requests.Request("GET", url, headers=headers, auth=auth))
            settings = self.session.merge_environment_settings(prepared.url, {}, True, None, None)
            response = self.session.get_adapter(prepared.url).send(
                prepared, stream=True, timeout=(left, left), verify=settings["verify"], cert=settings["cert"],
                proxies=settings["proxies"])
            requests.cookies.extract_cookies_to_jar(self.session.cookies, prepared, response.raw)
        except (requests.RequestException, OSError, ValueError) as exc:
            if isinstance(exc, requests.Timeout) or self.deadline.expired:
                raise self.too_slow() from None
            raise self.error(f"cannot be reached ({type(exc).__name__})") from None
        if self.deadline.expired:  # headers cut short by the deadline read as if they had ended
            response.close()
            raise self.too_slow()
        return response

    def _check_status(self, status: int, if_range: bool) -> None:
        if status == 206:
            return
        if self.version is not None and (status == 416 or (status == 200 and if_range)):
            raise self.changed()
        if status in (401, 403):
            raise self.error(f"HTTP {status}: not allowed (set HF_TOKEN for a gated or private repository)")
        if status == 404:
            raise self.error("HTTP 404: no such file")
        if status == 416:
            raise self.error("the file ends before its GGUF header does (truncated)")
        if status == 200:
            raise self.error("the server ignores HTTP range requests (it answered with the whole file); "
                             "download the file and give its path instead")
        raise self.error(f"HTTP {status}")

    def _content_range(self, value: str | None, start: int) -> tuple[int, int, int]:
        """(first, last, total) of a 206's Content-Range, refused unless it answers the range asked."""
        if value is None:
            raise self.error("the server answered a range without saying which (no Content-Range)")
        m = re.fullmatch(r"bytes ([0-9]{1,16})-([0-9]{1,16})/([0-9]+|\*)", value.strip())
        if not m:
            raise self.error(f"the server's Content-Range is not one llamabench reads ({escaped(value[:60])})")
        if m[3] == "*":
            raise self.error("the server does not say how large the file is (Content-Range without a size)")
        if len(m[3]) > 16 or int(m[3]) > MAX_TOTAL:  # 17 digits are past 1 PiB already
            raise self.error(f"the server says the file is over {MAX_TOTAL // 2**50} PiB (Content-Range "
                             f"{escaped(value[:60])}); not a file llamabench reads")
        first, last, total = int(m[1]), int(m[2]), int(m[3])
        if first != start or last < first or last >= total:
            raise self.error(f"the server answered bytes {first}-{last}/{total} where bytes {start}- were asked")
        return first, last, total

    def _same_version(self, version: tuple) -> None:
        """The first answer's (ETag, size, Last-Modified) must hold for every later one."""
        if self.version is None:
            self.version = version
            return
        etag, total, modified = self.version
        if total != version[1] or (etag and etag != version[0]) or (not etag and modified != version[2]):
            raise self.changed()

    def _body(self, response, want: int) -> bytes:
        """At most `want` bytes of the body, in chunks, the deadline checked between them."""
        import requests

        chunks, got = [], 0
        try:
            for chunk in response.iter_content(min(READ_CHUNK, want)):
                chunks.append(chunk)
                got += len(chunk)
                self.deadline.got(len(chunk))
                if got >= want:
                    break
                self.time_left()
        except (requests.RequestException, OSError, ValueError):
            if self.deadline.expired:
                raise self.too_slow() from None
            raise self.error("the connection ended mid-answer") from None
        if self.deadline.expired and got < want:
            raise self.too_slow()
        return b"".join(chunks)[:want]


def part_url(model: str, index: int, count: int) -> str:
    """The URL (or hf:// path) of part `index` (1-based) of a split set, from the first part's."""
    name = split_prefix(model, tail=r"(?:[@?#].*)?")  # a query string, a fragment or an hf:// @REVISION after
    if name is None:
        raise RemoteError(f"{redact(model)}: a split GGUF whose name does not end in {split_path('', 1, count)}")
    return split_path(name.prefix, index, count) + name.tail


def local_name(name: str) -> str:
    """The cached copy's file name: the URL's own when short, plain and ending in .gguf, else a hashed one
    that keeps the split-part suffix (llama.cpp finds the parts of a set by name beside the first)."""
    if _SAFE_NAME.fullmatch(name) and name.endswith(".gguf") and len(name.encode()) <= MAX_NAME:
        return name
    part = split_prefix(name)
    stem, suffix = (part.prefix, split_path("", part.number, part.count)) if part else (name.removesuffix(".gguf"),
                                                                                        ".gguf")
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", stem)[:48].strip(".-") or "model"
    return f"{readable}-{hashlib.sha256(stem.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}{suffix}"


def _local_path(cache: Path, shown: str) -> Path:
    """One folder per remote folder, files under their own names: llama.cpp finds the parts of a split set."""
    folder, _, name = shown.rpartition("/")
    digest = hashlib.sha256(folder.encode("utf-8", "surrogateescape")).hexdigest()
    return cache / "remote" / digest[:16] / local_name(name)


def _cached(local: Path, shown: str, answer: _Answer) -> Fetched | None:
    """The cached copy where its metadata names this URL, version and size. Only the user's own regular files in
    the user's own folders count: a planted link, FIFO or file of another user is refused (UntrustedCache)."""
    meta = local.with_name(local.name + ".json")
    etag = answer.version[0]
    private_folder(local.parent.parent)  # <cache>/remote
    private_folder(local.parent)
    if not (etag and trusted_file(local) and trusted_file(meta)):
        return None
    try:
        stored = json.loads(meta.read_text())
        if stored.get("etag") == etag and stored.get("url") == shown and stored.get("total_bytes") == answer.total:
            return Fetched(local, shown, int(stored["fetched_bytes"]), int(stored["total_bytes"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # a damaged cache entry: fetch again
    return None


def _read_header(reader: Reader, first: _Answer, show: bool) -> tuple[bytearray, int]:
    """(bytes read, end of the tensor infos): ranges of growing size until the header is in."""
    data, total, n = bytearray(first.body), first.total, FIRST_RANGE
    while True:
        try:
            return data, parse_header(data, total).data_offset  # gguf_file's parser: where tensor data starts
        except NeedMore as more:
            if len(data) >= total:
                raise reader.error(f"the file ends ({total:,} bytes) before its GGUF header does (truncated)") \
                    from None
            if more.n > MAX_HEADER:
                raise reader.error(f"a GGUF header over {MAX_HEADER // 2**20} MiB is not one llamabench reads") \
                    from None
            n = min(max(n * 2, more.n), MAX_HEADER, total)
        except BadHeader as exc:
            raise reader.error(str(exc)) from None
        except MemoryError:
            raise reader.error("its header is too large to read") from None
        except Exception as exc:  # what gguf.GGUFReader would refuse: ValueError, KeyError, UnicodeDecodeError...
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise reader.error(f"unreadable GGUF header ({escaped(reason)})") from None
        data += reader.range(len(data), n - 1).body
        if show:
            print(f"\rfetching the header of {reader.shown}: {len(data) / 2**20:.1f} MiB", end="", file=sys.stderr)


def _keep(local: Path, shown: str, data: bytearray, end: int, answer: _Answer) -> None:
    """The sparse copy and its metadata (URL as shown: no password, no query string), each written under a fresh
    private name then renamed over (world.private): a link planted at either name is replaced, never followed."""
    meta = local.with_name(local.name + ".json")
    try:
        write_private(local, bytes(data[:end]), size=max(answer.total, end))  # tensor data: a hole nothing reads
        write_private(meta, json.dumps({"url": shown, "etag": answer.version[0], "fetched_bytes": len(data),
                                        "total_bytes": answer.total}))
    except OSError as exc:
        raise RemoteError(f"{shown}: cannot keep its header in the cache {local.parent} "
                          f"({exc.strerror or type(exc).__name__})") from None


def fetch_header(model: str, cache: Path, *, progress: bool | None = None, quiet: bool = False) -> Fetched:
    """The header and tensor infos of a remote GGUF, as a sparse local file (cached by URL and ETag); the bytes
    fetched shown on stderr as they come (`progress`; default: where stderr is a terminal) and said once read,
    neither where `quiet` (headers read side by side: their lines would run together)."""
    url, headers = resolve_url(model)
    show = not quiet and (sys.stderr.isatty() if progress is None else progress)
    with Reader(url, headers) as reader:
        first = reader.range(0, FIRST_RANGE - 1)
        local = _local_path(cache, reader.shown)
        cached = _cached(local, reader.shown, first)
        if cached is not None:
            return cached
        data, end = _read_header(reader, first, show)
    if show:
        print(file=sys.stderr)
    _keep(local, reader.shown, data, end, first)
    if not quiet:
        print(f"llamabench: fetched {len(data) / 2**20:.2f} MiB of {first.total / 2**30:.2f} GiB (header and tensor "
              f"infos) from {reader.shown}", file=sys.stderr)
    return Fetched(local, reader.shown, len(data), first.total)
