"""A GGUF file server on 127.0.0.1 for the remote tests: ranges or not, redirects, errors, an HF stand-in,
and hostile servers (the first path segment, or an hf:// OWNER, picks the mode; see MODES).

Every request is recorded (path, Authorization, Range, If-Range) in `server.served.requests`. The hub's tree API
(/api/models/...) lists every file served, or `server.served.pages` where a test sets it: each page a list of tree
entries, page N+1 linked from page N (Link rel="next") as the hub pages its listings.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TRICKLE_S = 0.1  # a trickling server's pause between two bytes
TRICKLE_FOR_S = 60  # and how long it goes on

# mode: what the server does with a GET of /MODE/FILE (or of /MODE/REPO/resolve/REVISION/FILE, hf:// style)
MODES = {
    "files": "ranges answered as asked",
    "alias": "/alias/ANY~FILE serves FILE: names longer than a local file's can be",
    "norange": "200 with the whole file",
    "trickle-status": "the status line a byte at a time",
    "trickle-head": "the status line, then the headers a byte at a time",
    "trickle-body": "right headers, the body a byte at a time",
    "onebyte": "every range answered with its first byte only",
    "short-body": "a Content-Length the body does not reach, then the connection closed",
    "huge-total": "a Content-Range total of 10^26",
    "star-total": "a Content-Range total of *",
    "word-total": "a non-numeric Content-Range total",
    "negative-total": "a negative Content-Range total",
    "no-content-range": "206 without a Content-Range",
    "wrong-start": "a Content-Range one byte after the asked start",
    "changing": "a new ETag (and new bytes) after the first request; If-Range honoured",
    "changing-no-if-range": "a new ETag after the first request; If-Range ignored",
    "changing-size": "no ETag; the total size grows after the first request",
    "changing-date": "no ETag; Last-Modified moves after the first request",
    "closed": "the connection closed without an answer",
    "bigger": "206 with the whole rest of the file whatever the range",
    "gzip": "ranges marked Content-Encoding: gzip",
    "redirect-other": "302 to the same file on the other server (another port)",
    "redirect-localhost": "302 to the same file on this server under the name localhost",
    "redirect-same": "302 to /moved/repo/resolve/main/FILE on this server (a renamed repository)",
    "redirect-body": "302 to /files/FILE with a 1 GiB body",
    "loop": "302 to itself",
    "secret": "401",
    "slow": "a 404 after 3 s",
}


@dataclass(frozen=True)
class Request:
    path: str
    host: str | None  # the Host header: which name the client used for this server
    authorization: str | None
    range: str | None
    if_range: str | None


class Served:
    def __init__(self, root: Path):
        self.root = root
        self.bytes_sent = 0
        self.requests: list[Request] = []
        self.other_url = ""  # where redirect-other points
        self.pages: list[list[dict]] | None = None  # the tree API's pages, where a test gives them
        self.lock = threading.Lock()

    def count(self, n: int) -> None:
        with self.lock:
            self.bytes_sent += n

    def record(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)

    def authorized(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.authorization]


def _split(path: str) -> tuple[str, str]:
    """(mode, file name) of a request path: /MODE/FILE or /MODE/REPO/resolve/REVISION/FILE (hf://MODE/REPO)."""
    parts = path.split("?")[0].strip("/").split("/")
    if len(parts) >= 5 and parts[2] == "resolve":
        return (parts[0] if parts[0] in MODES else "files"), "/".join(parts[4:])
    return parts[0], "/".join(parts[1:])


_FLIP = bytes(i ^ 1 for i in range(256))


def _size(path: Path, change: str) -> int:
    """The size of the file, or of its next version under a changing mode."""
    return path.stat().st_size + (4096 if change == "changing-size" else 0)


def _read(path: Path, start: int, end: int, change: str) -> bytes:
    """Bytes [start, end] of the file, or of its next version (other bytes from 64 to 2 MiB, or 4 KiB longer)."""
    with open(path, "rb") as f:
        f.seek(start)
        body = f.read(end - start + 1)
    if change == "changing-size":
        return body + b"\0" * (end - start + 1 - len(body))
    lo, hi = max(start, 64) - start, min(end + 1, 1 << 21) - start
    if change and lo < hi:
        body = body[:lo] + body[lo:hi].translate(_FLIP) + body[hi:]
    return body


def write_big_header(src: Path, dst: Path, pad: int = 3 << 20) -> Path:
    """`src` with a `pad`-byte string key first in its metadata: a header over the first range (1 MiB), so
    that a read takes several requests. The tensor data moves by a multiple of 32: its offsets still hold."""
    data = src.read_bytes()
    key = b"llamabench.padding"
    fixed = 8 + len(key) + 4 + 8
    value = b"p" * (pad + (-(fixed + pad) % 32))
    kv = len(key).to_bytes(8, "little") + key + (8).to_bytes(4, "little") + len(value).to_bytes(8, "little") + value
    n_kv = int.from_bytes(data[16:24], "little") + 1
    dst.write_bytes(data[:16] + n_kv.to_bytes(8, "little") + kv + data[24:])
    return dst


def tree_entry(path: str, size: int, oid: str | None = None) -> dict:
    """A file as the hub's tree API lists it: its path, size and git object id (40 hex digits, unless given)."""
    return {"type": "file", "path": path, "size": size,
            "oid": hashlib.sha1(path.encode("utf-8", "surrogatepass")).hexdigest() if oid is None else oid}


class _Handler(BaseHTTPRequestHandler):
    """Answers a request as its mode asks; `_handler(served)` makes one bound to a server's `Served`."""

    served: Served
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _file(self, name: str) -> Path | None:
        path = self.served.root / name
        return path if name and path.is_file() else None

    def do_GET(self):  # noqa: N802
        h = self.headers
        self.served.record(Request(self.path, h.get("Host"), h.get("Authorization"), h.get("Range"), h.get("If-Range")))
        if self.path.startswith("/api/models/"):  # the hub's tree API
            return self._listing()
        mode, name = _split(self.path)
        try:
            self._answer(mode, name)
        except OSError:  # the client hung up (a broken pipe, a reset): as it may
            self.close_connection = True

    def _listing(self) -> None:
        """One page of the tree API: `served.pages` where set (?page=N, the next linked), else every file, by path,
        each with the git object id the hub gives."""
        pages = self.served.pages
        if pages is None:
            files = sorted(str(p.relative_to(self.served.root)) for p in self.served.root.rglob("*") if p.is_file())
            pages = [[tree_entry(f, 0) for f in files]]
        page = int(self.path.rpartition("page=")[2]) if "page=" in self.path else 1
        more = {"Link": f'</api/models/next?page={page + 1}>; rel="next"'} if page < len(pages) else {}
        body = json.dumps(pages[page - 1] if page <= len(pages) else []).encode()
        return self._plain(200, {"Content-Type": "application/json", **more}, body)

    def _plain(self, status: int, headers: dict | None = None, body: bytes = b"") -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self, mode: str, name: str) -> None:
        if mode == "loop":
            return self._plain(302, {"Location": "/loop"})
        if mode == "secret":
            return self._plain(401)
        if mode == "slow":
            time.sleep(3)
            return self._plain(404)
        if mode == "closed":
            self.close_connection = True
            return None
        if mode == "redirect-other":
            return self._plain(302, {"Location": f"{self.served.other_url}/files/{name}"})
        if mode == "redirect-localhost":
            return self._plain(302, {"Location": f"http://localhost:{self.server.server_address[1]}/files/{name}"})
        if mode == "redirect-same":
            return self._plain(302, {"Location": f"/moved/repo/resolve/main/{name}"})
        if mode == "redirect-body":
            return self._redirect_with_body(name)
        if mode == "trickle-status":
            return self._trickle(b"HTTP/1.1 206 Partial Content\r\n" * 100)
        if mode == "trickle-head":
            self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
            return self._trickle(b"X-Slow: " + b"a" * 10_000)
        path = self._file(name.rpartition("~")[2] if mode == "alias" else name)
        if path is None or mode not in MODES:
            return self._plain(404)
        return self._ranges(mode, path)

    def _redirect_with_body(self, name: str) -> None:
        self.send_response(302)
        self.send_header("Location", f"/files/{name}")
        self.send_header("Content-Length", str(1 << 30))
        self.end_headers()
        block = b"x" * (1 << 20)
        for _ in range(1024):
            self.wfile.write(block)

    def _trickle(self, data: bytes) -> None:
        end = time.monotonic() + TRICKLE_FOR_S
        for i in range(len(data)):
            if time.monotonic() > end:
                break
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            time.sleep(TRICKLE_S)
        self.close_connection = True

    def _ranges(self, mode: str, path: Path) -> None:
        rng = self.headers.get("Range")
        start, _, end = (rng or "bytes=0-").removeprefix("bytes=").partition("-")
        changed = int(start) > 0 and mode.startswith("changing")  # the file changes after the first range
        change = mode if changed else ""
        size = _size(path, change)
        etag = f'"v{int(changed)}-{size}"'
        if_range = self.headers.get("If-Range")
        if mode == "norange" or not rng or (mode == "changing" and if_range and if_range != etag):
            return self._whole(_read(path, 0, min(size, 4 << 20) - 1, change), size, etag)
        start, end = int(start), min(int(end or size - 1), size - 1)
        if start >= size:
            return self._plain(416, {"Content-Range": f"bytes */{size}"})
        if mode == "onebyte":
            end = start
        if mode == "bigger":
            end = size - 1
        body = _read(path, start, end, change)
        self.send_response(206)
        if mode != "no-content-range":
            self.send_header("Content-Range", self._content_range(mode, start, end, size))
        self.send_header("Content-Length", str(len(body)))
        if mode not in ("changing-size", "changing-date"):
            self.send_header("ETag", etag)
        self.send_header("Last-Modified", "Tue, 01 Jul 2025 00:00:0%d GMT" % (changed and mode == "changing-date"))
        if mode == "gzip":
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        if mode == "trickle-body":
            return self._trickle(body)
        if mode == "short-body":
            body = body[:len(body) // 2]
            self.close_connection = True
        self.wfile.write(body)
        self.served.count(len(body))

    @staticmethod
    def _content_range(mode: str, start: int, end: int, size: int) -> str:
        return {
            "huge-total": f"bytes {start}-{end}/{10**26}",
            "star-total": f"bytes {start}-{end}/*",
            "word-total": f"bytes {start}-{end}/lots",
            "negative-total": f"bytes {start}-{end}/-{size}",
            "wrong-start": f"bytes {start + 1}-{end + 1}/{size}",
        }.get(mode, f"bytes {start}-{end}/{size}")

    def _whole(self, body: bytes, size: int, etag: str) -> None:
        """200 with the start of the whole file (enough: the reader refuses it), then the connection closed."""
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.send_header("ETag", etag)
        self.end_headers()
        self.wfile.write(body)
        self.served.count(len(body))
        self.close_connection = True


def _handler(served: Served) -> type[_Handler]:
    return type("Handler", (_Handler,), {"served": served})


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that hangs up (as it should, often) is no news
        pass


class FileServer:
    """`with FileServer(root) as server:` serves root on http://127.0.0.1:PORT/; `server.served.bytes_sent`."""

    def __init__(self, root: Path):
        self.served = Served(root)
        self.httpd = _QuietServer(("127.0.0.1", 0), _handler(self.served))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FileServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
