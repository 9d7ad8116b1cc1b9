"""llama.cpp's own llama-server as a runtime to bench: found, started (or attached to), asked over HTTP, stopped.

The binary is found as a user has it: `--server-bin`, then `llama-server` on PATH, then the tools the tests
build (`$LLAMABENCH_LLAMA_TOOLS` or `~/.cache/llama-tools/<version>/bin`). A started server runs in a session
of its own on 127.0.0.1 and is stopped by its process group (SIGTERM, then SIGKILL after a short wait) when
the `started` block ends, whatever ends it. Requests go to `/completion` with token arrays, so the depth is
exact and no chat template is applied; each answer is read with the client's clock (perf_counter_ns at the
send, the first and the last streamed token) beside the server's own `timings`.
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from ..core.errors import EngineError, UsageError
from ..core.safe_text import shell_word
from ..memory.speculative import spec_flags
from ..settings.params import Params
from ..settings.values import GGML_MAX_N_THREADS, Runtime
from ..world.paths import HTTP_TIMEOUT_ENV, http_timeout
from ..world.versions import LLAMA_CPP_PYTHON_VERSION
from .process import die_with_parent, stop_group
from .rpc import free_port

PROGRAM = Runtime.LLAMA_SERVER.value  # the program's file name is the runtime's name

TOOLS_ENV = "LLAMABENCH_LLAMA_TOOLS"
STOP_GRACE_S = 2.0
HOST_FLAGS = ("--host", "--port")


def server_binary(explicit: str | os.PathLike | None = None) -> Path:
    """--server-bin, then llama-server on PATH, then the tools the tests build; EngineError naming all three."""
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise UsageError(f"--server-bin {explicit}: not an executable file")
    on_path = shutil.which(PROGRAM)
    if on_path:
        return Path(on_path)
    folders = [Path(os.environ[TOOLS_ENV])] if os.environ.get(TOOLS_ENV) else []
    folders.append(Path.home() / ".cache" / "llama-tools" / LLAMA_CPP_PYTHON_VERSION / "bin")
    for folder in folders:
        if (folder / PROGRAM).is_file():
            return folder / PROGRAM
    raise EngineError("no llama-server found: give --server-bin PATH, put llama-server on PATH, or build the tools "
                      "(make tools, or scripts/build_llama_tools.sh; LLAMABENCH_LLAMA_TOOLS names their bin folder)")


def flags_of(params: Params, model: str) -> list[str]:
    """A llama-server command line's arguments for these parameters, as llama-server spells them."""
    argv = ["-m", model, "-c", str(params.n_ctx), "-np", str(params.n_seq), "-ngl", str(params.n_gpu_layers),
            "-fa", "on" if params.flash_attn else "off", "-ctk", params.type_k, "-ctv", params.type_v,
            "-b", str(params.n_batch), "-ub", str(params.n_ubatch)]
    if params.n_threads:
        argv += ["-t", str(params.n_threads)]
    if params.n_cpu_moe:
        argv += ["--n-cpu-moe", str(params.n_cpu_moe)]
    if params.kv_unified:
        argv.append("-kvu")
    if not params.repack:
        argv.append("-nr")  # the CPU's repacked weights off (AMX faults on some CPUs)
    return argv + list(spec_flags(params))



def command_argv(command: str, binary: Path, *, model: str, repack: bool = True) -> list[str]:
    """A given llama-server command line (as `fit` prints it) to run: the binary found, -m added where it has
    none, -nr where repack is off; --host/--port are refused (the bench picks a free port of 127.0.0.1)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"--server-cmd: {exc}") from None
    if not argv or Path(argv[0]).name != PROGRAM:
        raise UsageError(f"--server-cmd must start with llama-server: {command!r}")
    if any(a in HOST_FLAGS for a in argv):
        raise UsageError("--server-cmd: leave out --host and --port (the bench starts it on a free port of "
                         "127.0.0.1); to bench a server that runs already, give --url")
    _check_threads(argv)
    program = argv[0] if argv[0] != PROGRAM else str(binary)
    rest = argv[1:]
    if "-m" not in rest and "--model" not in rest:
        rest = ["-m", model, *rest]
    if not repack and "-nr" not in rest and "--no-repack" not in rest:
        rest.append("-nr")
    return [program, *rest]


THREAD_FLAGS = ("-t", "--threads", "-tb", "--threads-batch", "-td", "--threads-draft", "-tbd",
                "--threads-batch-draft")


def _check_threads(argv: list[str]) -> None:
    """llama-server's thread counts as llama.cpp's int32 takes them: up to GGML_MAX_N_THREADS (beyond it the
    server crashes), or 0 and below for its default."""
    for flag, value in zip(argv, argv[1:]):
        if flag in THREAD_FLAGS:
            try:
                n = int(value)
            except ValueError:
                raise UsageError(f"--server-cmd: {flag} {value[:40]!r} is not a number of threads") from None
            if n > GGML_MAX_N_THREADS:
                raise UsageError(f"--server-cmd: {flag} {n}: ggml runs at most {GGML_MAX_N_THREADS} threads "
                                 "(GGML_MAX_N_THREADS)")


@dataclass
class Started:
    """A server the bench talks to: its URL, the exact command (None when attached) and its log so far."""

    url: str
    argv: tuple[str, ...] | None = None
    log_path: Path | None = None
    pid: int | None = None  # the process started (its group is stopped with it)

    @property
    def command(self) -> str:
        return " ".join(map(shell_word, self.argv)) if self.argv else ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""


@contextmanager
def started(argv: list[str], *, timeout_s: float = 300.0) -> Iterator[Started]:
    """Start llama-server with `argv` on a free port of 127.0.0.1 and wait for /health; stop its process group
    when the block ends (normally, by an error or by Ctrl-C; SIGKILL of the bench: the kernel ends it)."""
    port = free_port()
    # its allocation lines (info level) for the records, unless the line chose its own verbosity
    verbosity = [] if {"-lv", "--verbosity", "--log-verbosity", "-v", "--verbose"} & set(argv) else ["-lv", "4"]
    full = [*argv, *verbosity, "--host", "127.0.0.1", "--port", str(port)]
    with tempfile.TemporaryDirectory(prefix="llamabench-server-") as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "w") as out:
            # its own session (stopped by its group), and ended by the kernel should the bench itself be killed
            proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=die_with_parent)
        server = Started(f"http://127.0.0.1:{port}", tuple(full), log_path, proc.pid)
        try:
            _wait_ready(server, proc, timeout_s)
            yield server
        finally:
            stop_group(proc, grace_s=STOP_GRACE_S)


def exit_words(returncode: int) -> str:
    """How llama-server ended, in words."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"


def signal_advice(returncode: int, argv: tuple[str, ...] | None = None) -> str:
    """The likely cause of a death by a fault signal, and its remedy; none where the line already turns the
    CPU's repacked weights off (-nr: the fault is another one, its log says more)."""
    faults = {-int(s) for s in (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE)}
    if returncode not in faults or any(a in ("-nr", "--no-repack") for a in argv or ()):
        return ""
    return "rerun with -nr (--repack 0): the CPU's repacked weights (CPU_REPACK / AMX) fault on some CPUs"


def last_lines(log: str, n: int = 2) -> str:
    """The last `n` lines of a log that say something, on one line."""
    lines = [x.strip() for x in log.splitlines() if x.strip()]
    return " | ".join(lines[-n:])[-300:]


def _wait_ready(server: Started, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            # the remedy right after what died (a table shows a reason's start), then when, then the log's end
            advice = signal_advice(proc.returncode, server.argv)
            raise EngineError(f"llama-server {exit_words(proc.returncode).removeprefix('was ')}"
                              + (f": {advice}" if advice else "") + "; before it listened"
                              + (f"; its log ends: {last_lines(server.log())}" if server.log().strip() else ""))
        try:
            if get(server.url, "/health", timeout_s=2.0).get("status") == "ok":
                return
        except (OSError, EngineError, ValueError):
            pass
        time.sleep(0.1)
    raise EngineError(f"llama-server did not answer /health within {timeout_s:.0f} s:\n{server.log()[-1500:]}")


def check_url(url) -> str:
    """--url as given, checked: http(s)://HOST[:PORT][/PATH], a port llama.cpp could listen on; UsageError else."""
    if not isinstance(url, str):
        raise UsageError(f"url: http://HOST:PORT of a running llama-server, not {type(url).__name__}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port out of range or not a number, a bracket left open
        raise UsageError(f"--url {url!r}: {exc}", hint="give http://HOST:PORT of a running llama-server") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise UsageError(f"--url {url!r}: give http://HOST:PORT of a running llama-server")
    return url


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(check_url(url))
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname, parts.port, timeout=timeout_s), parts.path.rstrip("/")


MAX_ANSWER = 16 * 2**20  # /props and /v1/models answer a few KiB; more is not llama-server
MAX_EVENT = 2**20  # one streamed event of /completion: a token, its text, at the end the timings
BYTES_PER_PROMPT_TOKEN = 64  # the prompt quoted back in the last event: a token's text, JSON-escaped, is shorter
MAX_STREAM = 64 * 2**20  # a whole /completion stream (n_predict events, each well under 4 KiB)
MAX_IDLE_EVENTS = 64  # events without a token in one stream (llama-server sends one, the last, with the timings)


def get(url: str, path: str, *, timeout_s: float | None = None) -> dict:
    """A JSON object from llama-server, the whole exchange within `timeout_s` (default the HTTP deadline,
    LLAMABENCH_HTTP_TIMEOUT); EngineError for anything else (an HTTP error, not JSON, not an object)."""
    timeout_s = http_timeout() if timeout_s is None else timeout_s
    conn, base = _connection(url, timeout_s)
    try:
        conn.request("GET", base + path)
        response = conn.getresponse()
        body = _read_within(response, MAX_ANSWER + 1, time.monotonic() + timeout_s, path)
        if response.status != 200:
            raise EngineError(f"llama-server {path}: HTTP {response.status}: {body[:300]!r}")
        if len(body) > MAX_ANSWER:
            raise EngineError(f"llama-server {path}: an answer over {MAX_ANSWER // 2**20} MiB: not llama-server")
        try:
            answer = json.loads(body)
        except ValueError:
            raise EngineError(f"llama-server {path}: not JSON ({body[:60]!r}): is this llama-server?") from None
        if not isinstance(answer, dict):
            raise EngineError(f"llama-server {path}: not a JSON object: is this llama-server?")
        return answer
    except http.client.HTTPException as exc:
        raise EngineError(f"llama-server {path}: {type(exc).__name__}: {str(exc)[:200]}") from None
    finally:
        conn.close()


def _read_within(response, limit: int, deadline: float, path: str) -> bytes:
    """At most `limit` bytes of an answer, read by the deadline of the whole exchange (a server that trickles a
    byte a second passes every per-read timeout)."""
    chunks, size = [], 0
    while size < limit:
        if time.monotonic() > deadline:
            raise EngineError(f"llama-server {path}: no whole answer within the deadline ({HTTP_TIMEOUT_ENV} sets it)")
        chunk = response.read1(min(65536, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class ServerInfo:
    """What a running server says of itself (/props, /v1/models)."""

    slots: int
    n_ctx_slot: int  # each slot's context
    n_vocab: int
    model_path: str = ""


def info(url: str) -> ServerInfo:
    props = get(url, "/props")
    settings = props.get("default_generation_settings") or {}
    n_vocab = 0
    try:
        models = get(url, "/v1/models").get("data") or []
        n_vocab = int((models[0].get("meta") or {}).get("n_vocab", 0)) if models else 0
    except (EngineError, OSError, ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError):
        pass
    try:
        slots, n_ctx = int(props.get("total_slots", 1)), int(settings.get("n_ctx", 0))
    except (TypeError, ValueError, AttributeError, OverflowError):
        raise EngineError("llama-server /props: total_slots or n_ctx is not a number: is this llama-server?") \
            from None
    if not (0 < slots <= 4096 and 0 <= n_ctx < 2**32 and 0 <= n_vocab < 2**31):
        raise EngineError(f"llama-server /props: {slots} slots of {n_ctx} tokens, {n_vocab} in the vocabulary: "
                          "not what a llama-server answers")
    return ServerInfo(slots, n_ctx, n_vocab, str(props.get("model_path", "")))


@dataclass
class Answer:
    """One /completion request: the client's clock (perf_counter_ns) beside the server's own timings."""

    sent_ns: int = 0
    first_ns: int | None = None  # the first streamed token
    last_ns: int | None = None  # the last streamed token
    done_ns: int = 0
    n_streamed: int = 0
    timings: dict = field(default_factory=dict)
    error: str | None = None


def complete(url: str, body: dict, *, timeout_s: float = 3600.0) -> Answer:
    """POST /completion with `stream: true`, reading each server-sent event as it arrives."""
    conn, base = _connection(url, timeout_s)
    answer = Answer()
    try:
        payload = json.dumps({**body, "stream": True}).encode()
        answer.sent_ns = time.perf_counter_ns()
        conn.request("POST", base + "/completion", body=payload, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:  # its body read no further than what the error shows
            answer.error = f"HTTP {response.status}: {response.read(300)!r}"
            return answer
        # the last event quotes the whole prompt as text (llama-server's "prompt" field): its cap grows with it
        event_cap = MAX_EVENT + BYTES_PER_PROMPT_TOKEN * len(body.get("prompt") or ())
        read = idle = 0
        while line := response.readline(event_cap + 1):
            now = time.perf_counter_ns()
            read += len(line)
            if len(line) > event_cap or read > MAX_STREAM + event_cap:
                raise ValueError(f"an event over {event_cap:,} bytes, or a stream over {MAX_STREAM + event_cap:,}: "
                                 "not llama-server")
            if answer.n_streamed > body.get("n_predict", 0) + 16:
                raise ValueError(f"{answer.n_streamed} tokens streamed for n_predict {body.get('n_predict')}: "
                                 "not llama-server")
            if not line.startswith(b"data:"):
                continue
            text = line[5:].strip()
            if not text or text == b"[DONE]":
                continue
            event = json.loads(text)
            if not isinstance(event, dict):
                raise ValueError(f"an event that is not a JSON object: {text[:60]!r}")
            idle += _take(answer, event, now)
            if idle > MAX_IDLE_EVENTS:  # llama-server streams a token an event, and one event at the end
                raise ValueError(f"{idle} events without a token: not llama-server")
            if event.get("stop") is True:  # the last event: a connection kept open after it is not waited on
                break
    except (OSError, http.client.HTTPException, ValueError) as exc:
        answer.error = f"{type(exc).__name__}: {exc}"
    finally:
        answer.done_ns = time.perf_counter_ns()
        conn.close()
    return answer


def _take(answer: Answer, event: dict, now: int) -> int:
    """One streamed event into the answer; 1 where it carried no token, else 0."""
    if isinstance(event.get("timings"), dict):
        answer.timings = event["timings"]
    if "error" in event:
        answer.error = str(event["error"])[:300]
    if event.get("tokens") or event.get("content"):
        answer.first_ns = answer.first_ns or now
        answer.last_ns = now
        answer.n_streamed += 1
        return 0
    return 1
