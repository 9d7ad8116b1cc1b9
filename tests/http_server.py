"""A GGUF file server on 127.0.0.1 for the remote tests: ranges or not, redirects, errors, an HF stand-in."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Served:
    def __init__(self, root: Path):
        self.root = root
        self.bytes_sent = 0
        self.lock = threading.Lock()

    def count(self, n: int) -> None:
        with self.lock:
            self.bytes_sent += n


def _handler(served: Served):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _file(self, name: str) -> Path | None:
            path = served.root / name
            return path if path.is_file() else None

        def do_GET(self):  # noqa: N802
            parts = self.path.strip("/").split("/")
            if parts[0] == "loop":
                self.send_response(302)
                self.send_header("Location", "/loop")
                self.end_headers()
                return
            if parts[0] == "secret":
                self.send_error(401)
                return
            if parts[0] == "slow":
                time.sleep(3)
                self.send_error(404)
                return
            if parts[0] in ("files", "norange"):
                name = "/".join(parts[1:])
            elif len(parts) >= 5 and parts[2] == "resolve":  # HF: OWNER/REPO/resolve/REVISION/FILE
                name = "/".join(parts[4:])
            else:
                name = ""
            path = self._file(name)
            if path is None:
                self.send_error(404)
                return
            size = path.stat().st_size
            rng = self.headers.get("Range")
            try:
                with open(path, "rb") as f:
                    if rng and parts[0] != "norange":
                        start, _, end = rng.removeprefix("bytes=").partition("-")
                        start, end = int(start), min(int(end or size - 1), size - 1)
                        if start >= size:
                            self.send_response(416)
                            self.send_header("Content-Range", f"bytes */{size}")
                            self.end_headers()
                            return
                        f.seek(start)
                        body = f.read(end - start + 1)
                        self.send_response(206)
                        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                    else:
                        body = f.read(min(size, 4 << 20))  # the start of a whole-file answer is enough
                        self.send_response(200)
                    self.send_header("Content-Length", str(len(body) if self.command == "GET" and rng and parts[0] != "norange" else size))
                    self.send_header("ETag", f'"{path.stat().st_mtime_ns}-{size}"')
                    self.end_headers()
                    self.wfile.write(body)
                    served.count(len(body))
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


class FileServer:
    """`with FileServer(root) as server:` serves root on http://127.0.0.1:PORT/; `server.served.bytes_sent`."""

    def __init__(self, root: Path):
        self.served = Served(root)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.served))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FileServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
