"""A hostile --rpc host on 127.0.0.1: it accepts, and then answers nothing, or answers its first connections
(the memory query) through a real ggml-rpc-server and stalls on the rest (the dry run, the bench)."""

from __future__ import annotations

import socket
import threading


class FakeRpcHost:
    def __init__(self, *, answered: int = 0, upstream: str | None = None, says: bytes | None = None):
        self.answered = answered  # connections relayed to `upstream` before the stall
        self.upstream = upstream
        self.says = says  # where given: each connection gets these bytes (not llama.cpp's protocol), then is closed
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.endpoint = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        self._held: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            if self.says is not None:
                try:
                    client.sendall(self.says)
                finally:
                    client.close()
                continue
            self._held.append(client)
            if self.connections <= self.answered and self.upstream:
                host, port = self.upstream.rsplit(":", 1)
                server = socket.create_connection((host, int(port)))
                self._held.append(server)
                for a, b in ((client, server), (server, client)):
                    threading.Thread(target=_relay, args=(a, b), daemon=True).start()
            # else: held open, never answered

    def close(self) -> None:
        self._closed = True
        for s in [self._listener, *self._held]:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self) -> "FakeRpcHost":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _relay(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
