"""A hostile --rpc host on 127.0.0.1: it accepts, and then answers nothing, or answers its first connections
(the memory query) through a real ggml-rpc-server and stalls on the rest (the dry run, the bench), or relays
everything until the client's Nth request of some commands (a graph computation: a decode in the middle of a bench;
a tensor upload: a real model's load) and stalls there; or relays everything but rewrites its answers to the
device count and memory queries (a host that claims 2^32 devices, none, or absurd memory)."""

from __future__ import annotations

import queue
import socket
import struct
import threading


class FakeRpcHost:
    def __init__(self, *, answered: int = 0, upstream: str | None = None, says: bytes | None = None,
                 stall_at: tuple[tuple[int, ...], int] | None = None, claims: dict[int, bytes] | None = None,
                 hang_up: bool = False):
        self.answered = answered  # connections relayed to `upstream` before the stall
        self.stall_at = stall_at  # (commands, N): relay until the clients' Nth request of these commands, then stall
        self.requests = 0  # requests of those commands the clients made through the relay
        self.upstream = upstream
        self.says = says  # where given: each connection gets these bytes (not llama.cpp's protocol), then is closed
        self.hang_up = hang_up  # at stall_at, close the connections instead of holding them (a host that dies)
        self.claims = claims or {}  # command -> the answer's payload the host gives instead of its upstream's
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
                asked: queue.Queue = queue.Queue()  # the commands the client sent, in order, for their answers
                threading.Thread(target=self._relay, args=(client, server, True, asked), daemon=True).start()
                threading.Thread(target=self._relay, args=(server, client, False, asked), daemon=True).start()
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


    def stalled(self) -> bool:
        return self.stall_at is not None and self.requests >= self.stall_at[1]

    def _relay(self, src: socket.socket, dst: socket.socket, counted: bool, asked: queue.Queue) -> None:
        requests, answers = _Requests(), _Answers(asked, self.claims)
        try:
            while chunk := src.recv(65536):
                if counted:
                    found = requests.commands(chunk)
                    for command in found:
                        asked.put(command)
                    if self.stall_at is not None:
                        self.requests += sum(c in self.stall_at[0] for c in found)
                elif self.claims:
                    chunk = answers.rewrite(chunk)
                if self.stalled() and self.hang_up:  # the host dies: the client's next read fails
                    break
                if self.stalled():  # held open, never answered again
                    while not self._closed:
                        threading.Event().wait(0.2)
                    return
                dst.sendall(chunk)
        except OSError:
            pass
        _shut(src, dst)


# llama.cpp's RPC commands (ggml/src/ggml-rpc/ggml-rpc.cpp:61-82)
GRAPH_COMPUTE = (10, 16)  # RPC_CMD_GRAPH_COMPUTE, RPC_CMD_GRAPH_RECOMPUTE: a decode
SET_TENSOR = (6, 7)  # RPC_CMD_SET_TENSOR, RPC_CMD_SET_TENSOR_HASH: weights uploaded
GET_DEVICE_MEMORY, HELLO, DEVICE_COUNT = 11, 14, 15
ANSWERED = (HELLO, DEVICE_COUNT, GET_DEVICE_MEMORY)  # what the memory query asks; each has one answer


def device_count(n: int) -> dict[int, bytes]:
    """A host that claims n devices (rpc_msg_device_count_rsp: uint32)."""
    return {DEVICE_COUNT: struct.pack("<I", n)}


def device_memory(free: int, total: int) -> dict[int, bytes]:
    """A host that claims this memory (rpc_msg_get_device_memory_rsp: two uint64)."""
    return {GET_DEVICE_MEMORY: struct.pack("<QQ", free, total)}


class _Requests:
    """The client's side of llama.cpp's RPC protocol, followed chunk by chunk: each request is its command (1 byte),
    its size (8 bytes, little-endian) and that many bytes (ggml-rpc.cpp:309-323)."""

    def __init__(self):
        self.header = b""
        self.left = 0  # payload bytes of the current request still to come

    def commands(self, chunk: bytes) -> list[int]:
        """The commands of the requests that begin in this chunk."""
        found, i = [], 0
        while i < len(chunk):
            if self.left:
                step = min(self.left, len(chunk) - i)
                self.left, i = self.left - step, i + step
                continue
            take = min(9 - len(self.header), len(chunk) - i)
            self.header, i = self.header + chunk[i:i + take], i + take
            if len(self.header) == 9:
                found.append(self.header[0])
                self.left, self.header = int.from_bytes(self.header[1:], "little"), b""
        return found


class _Answers:
    """The server's side, while it answers only what the memory query asks (ANSWERED): each answer is its size
    (8 bytes) and that many bytes (ggml-rpc.cpp:323-340). The answers to the claimed commands are replaced; after
    any other command the stream passes untouched (some have no answer)."""

    def __init__(self, asked: queue.Queue, claims: dict[int, bytes]):
        self.asked, self.claims = asked, claims
        self.pending, self.following = b"", True

    def rewrite(self, chunk: bytes) -> bytes:
        if not self.following:
            return chunk
        data, out = self.pending + chunk, b""
        while len(data) >= 8:
            size = int.from_bytes(data[:8], "little")
            if len(data) < 8 + size:
                break
            command = self.asked.get(timeout=10)
            if command not in ANSWERED:
                self.following = False
                return out + data
            body = self.claims.get(command, data[8:8 + size])
            out, data = out + len(body).to_bytes(8, "little") + body, data[8 + size:]
        self.pending = data
        return out


def _shut(src: socket.socket, dst: socket.socket) -> None:
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
