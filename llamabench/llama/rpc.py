"""An emulated card: llama.cpp's RPC backend serving this machine's CPU as a separate device on 127.0.0.1.

Loaded with `n_gpu_layers`, llama.cpp places layers, KV, recurrent state and compute buffers on the
RPC device exactly as on a GPU, and prints them per device (`RPC0[127.0.0.1:PORT] ...`). The server
runs in a child process of its own (`python -m llamabench.llama.rpc PORT THREADS`) and is stopped by
its pid when done, also on failure (it may ignore SIGTERM: SIGKILL follows a short wait).
"""

from __future__ import annotations

import ctypes
import ipaddress
import resource
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import psutil

from ..core.errors import EngineError
from ..world.paths import RPC_TIMEOUT_ENV, rpc_timeout
from .binding import ggml_lib, lib_path
from .ggml_devices import GGML_BACKEND_DEVICE_TYPE_CPU
from .process import child_argv, child_env, die_with_parent, stop_group


def available() -> bool:
    return lib_path("ggml-rpc").exists()


def serve(port: int, n_threads: int) -> None:
    """Blocks serving the CPU device on 127.0.0.1:port (call in a process of its own)."""
    ggml, rpc = ggml_lib("ggml"), ggml_lib("ggml-rpc")
    ggml.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    rpc.ggml_backend_rpc_start_server.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                                                  ctypes.POINTER(ctypes.c_void_p)]
    dev = ggml.ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)
    devices = (ctypes.c_void_p * 1)(dev)
    rpc.ggml_backend_rpc_start_server(f"127.0.0.1:{port}".encode(), None, n_threads, 1, devices)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds the listening socket on 127.0.0.1:port (not another process that took the
    port between our pick and the child's bind)."""
    try:
        process = psutil.Process(pid)
        conns = process.net_connections(kind="tcp") if hasattr(process, "net_connections") else process.connections()
    except (psutil.Error, OSError):
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


PORT_TRIES = 3  # a port taken by another process between the pick and the bind: pick again


@contextmanager
def emulated_card(n_threads: int = 1, timeout_s: float = 30.0):
    """Start an RPC server on a free port of 127.0.0.1; yields its endpoint "127.0.0.1:PORT". The server is ours:
    its own process holds the port (checked), it dies with this process, and it is stopped on the way out."""
    if not available():
        raise EngineError("no RPC backend in this llama-cpp-python build: reinstall with CMAKE_ARGS=-DGGML_RPC=on "
                          "(make install does) to emulate a card")
    for attempt in range(PORT_TRIES):
        port = free_port()
        proc = subprocess.Popen(child_argv("llamabench.llama.rpc", str(port), str(n_threads)), env=child_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            if _wait_listening(proc, port, timeout_s, last=attempt == PORT_TRIES - 1):
                yield f"127.0.0.1:{port}"
                return
        finally:
            stop_group(proc, grace_s=1.0)


def _wait_listening(proc: subprocess.Popen, port: int, timeout_s: float, *, last: bool) -> bool:
    """True once `proc` listens on the port itself; False where it could not bind it (another process has it) and
    another try is left; an EngineError otherwise."""
    deadline = time.monotonic() + timeout_s
    while not (accepts(port) and listens(proc.pid, port)):
        if proc.poll() is not None:
            tail = (proc.stderr.read() or b"").decode(errors="replace").strip().splitlines()[-1:]
            if not last and accepts(port):  # someone else listens there: our server could not bind
                return False
            raise EngineError(f"the RPC server (emulated card) exited at start: {' '.join(tail) or 'no message'}")
        if time.monotonic() > deadline:
            raise EngineError(f"the RPC server (emulated card) did not listen on 127.0.0.1:{port} in {timeout_s:.0f} s")
        time.sleep(0.05)
    return True


def query_memory(endpoint: str) -> tuple[int, int, int]:
    """(free, total) bytes of the first device of a running ggml-rpc-server, as llama.cpp reads them
    (ggml_backend_rpc_get_device_memory), and how many devices it serves; in a process of its own
    (llama.cpp aborts on a protocol mismatch)."""
    rpc, ggml = ggml_lib("ggml-rpc"), ggml_lib("ggml")
    rpc.ggml_backend_rpc_add_server.argtypes = [ctypes.c_char_p]
    rpc.ggml_backend_rpc_add_server.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_dev_count.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_reg_dev_count.restype = ctypes.c_size_t
    reg = rpc.ggml_backend_rpc_add_server(endpoint.encode())
    count = int(ggml.ggml_backend_reg_dev_count(reg)) if reg else 0
    rpc.ggml_backend_rpc_get_device_memory.argtypes = [ctypes.c_char_p, ctypes.c_uint32,
                                                       ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    rpc.ggml_backend_rpc_get_device_memory(endpoint.encode(), 0, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value), count


MAX_DEVICE_BYTES = 1024**5  # a PiB: no device is bigger; a server that says more is not telling the truth
MEMORY_QUERY_HEAP = 1024**3  # the memory query's heap: a host claiming 2^32 devices cannot grow it past this


def distinct_servers(endpoints: tuple[str, ...]) -> None:
    """One EngineError where two endpoints name one server (localhost:P and 127.0.0.1:P, or 0.0.0.0:P, or this
    machine's own address): llama.cpp would open it twice and wait on itself."""
    seen: dict[tuple, str] = {}
    here = _this_machine() if len(endpoints) > 1 else set()  # a name lookup: only where two could be one
    for endpoint in endpoints:
        host, port = endpoint.rsplit(":", 1)
        try:
            infos = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
            addresses = {(_host_key(info[4][0], here), int(port)) for info in infos}
        except OSError:
            continue  # not resolvable: reachable() says so in its own words
        for address in addresses:
            if address in seen and seen[address] != endpoint:
                raise EngineError(f"--rpc {seen[address]} and {endpoint} name one server ({address[0]} port "
                                  f"{address[1]}): give each server once")
            seen[address] = endpoint


def _this_machine() -> set[str]:
    """This machine's own addresses, as its name resolves (a server bound to 0.0.0.0 answers on each)."""
    try:
        return {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()


def _host_key(address: str, here: set[str]) -> str:
    """'this machine' for a loopback, unspecified (0.0.0.0, ::) or own address; else the address itself."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return address
    return "this machine" if ip.is_loopback or ip.is_unspecified or address in here else str(ip)


def reachable(endpoint: str, timeout_s: float = 5.0) -> str | None:
    """None if something listens at HOST:PORT, else why not, in words."""
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except socket.timeout:
        return f"no answer in {timeout_s:.0f} s"
    except OSError as exc:
        return exc.strerror or str(exc)


MEMORY_QUERY_TIMEOUT_S = 30.0  # a hello and two short answers; LLAMABENCH_RPC_TIMEOUT below it shortens it


def remote_memory(endpoint: str, timeout_s: float | None = None) -> tuple[int, int]:
    """(free, total) bytes a remote ggml-rpc-server reports; a host that cannot be reached, or does not answer
    within the deadline, is one EngineError."""
    timeout_s = timeout_s or min(MEMORY_QUERY_TIMEOUT_S, rpc_timeout())
    if not available():
        raise EngineError("--rpc needs llama.cpp's RPC backend: reinstall llama-cpp-python with "
                          "CMAKE_ARGS=-DGGML_RPC=on (make install does)")
    why = reachable(endpoint, min(5.0, timeout_s))
    if why:
        raise EngineError(f"--rpc {endpoint}: no ggml-rpc-server can be reached there ({why})")
    try:
        done = subprocess.run(child_argv("llamabench.llama.rpc", "memory", endpoint), capture_output=True,
                              text=True, timeout=timeout_s, env=child_env())
    except subprocess.TimeoutExpired:
        raise EngineError(f"--rpc {endpoint}: the server did not report its memory in {timeout_s:g} s (a host that "
                          f"accepts and never answers; {RPC_TIMEOUT_ENV} sets the limit)") from None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 3 or not all(w.isdigit() for w in words):
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1].strip()
        if "bad_alloc" in tail:  # the heap bound met: registering the devices the host claims (2^32 of them)
            raise EngineError(f"--rpc {endpoint}: the server claims more devices than a ggml-rpc-server has (the "
                              f"memory query ran out of its {MEMORY_QUERY_HEAP // 2**30} GiB heap)")
        raise EngineError(f"--rpc {endpoint}: not a ggml-rpc-server this llama.cpp can talk to ({tail})")
    free, total, count = (int(w) for w in words)
    if total == 0:
        raise EngineError(f"--rpc {endpoint}: the server reports no device memory")
    if total > MAX_DEVICE_BYTES or free > total:
        raise EngineError(f"--rpc {endpoint}: the server reports {free:,} B free of {total:,} B: not a device's "
                          "memory (free above total, or more than a PiB)")
    if count < 1:
        raise EngineError(f"--rpc {endpoint}: the server offers no device (start ggml-rpc-server with -d DEVICE)")
    if count > 1:
        raise EngineError(f"--rpc {endpoint}: the server offers {count} devices; llamabench plans one card per server "
                          "(start one ggml-rpc-server per card, each with its own -d DEVICE)")
    return free, total


def main() -> int:
    die_with_parent()
    if sys.argv[1] == "memory":
        resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_QUERY_HEAP, MEMORY_QUERY_HEAP))
        print(*query_memory(sys.argv[2]))
        return 0
    serve(int(sys.argv[1]), int(sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
