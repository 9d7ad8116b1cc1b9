"""The parent side of the child protocol: start `llama.child` with a job, stream its events back.

Every job and event is a dataclass of `messages`, one JSON object a line. The child is started in its
own session and killed with its whole group on Ctrl-C, so no llama.cpp process outlives the command.
"""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from ..core.errors import ContextRefused, EngineError, Stalled, UsageError
from ..settings.params import Params
from ..settings.values import rpc_endpoints
from ..world import sysinfo
from ..world.paths import RPC_TIMEOUT_ENV, rpc_timeout
from ..world.texts import TOKENIZE_DEADLINE_S
from .devices import Device, is_endpoint
from .messages import (
    ContextRequest,
    Devices,
    DevicesJob,
    DryFailed,
    DryRunSizes,
    DryRunsJob,
    Event,
    Failed,
    Job,
    Loaded,
    LoadRequest,
    Recipe,
    RecipeJob,
    Request,
    Tensors,
    TensorsJob,
    TextTokens,
    TokensJob,
    read_event,
    to_wire,
)
from .process import child_argv, child_env, stop_group
from .user_model import Metadata, TensorShape

E = TypeVar("E")


@dataclass(frozen=True)
class ChildExit:
    returncode: int
    failure: str | None  # the child's own "failed" reason, else how it died, else None
    stalled: bool = False  # stopped: no progress within its deadline (a --rpc host that stopped answering)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.failure is None


def signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _start() -> subprocess.Popen:
    return subprocess.Popen(child_argv("llamabench.llama.child"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(), start_new_session=True)


def last_error_line(stderr: str) -> str | None:
    """llama.cpp's own last word before dying: its assert or error line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for needle in ("GGML_ASSERT", "error", "terminate called", "what():", "Error"):
        hits = [line for line in lines if needle in line]
        if hits:
            return hits[-1][:300]
    return lines[-1][:300] if lines else None


def events(stream):
    """The child's events: one JSON object per line; anything else on stdout is passed over."""
    for line in stream:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event


def _line(message: Job | Request | dict) -> str:
    return json.dumps(message if isinstance(message, dict) else to_wire(message)) + "\n"


STALL_FACTOR = 4  # a step may take this many times the longest wait between progress events seen so far


def _remote_devices(job: Job | dict) -> tuple[str, ...]:
    """The job's devices reached over the network (RPC endpoints, emulated cards too): those can stop answering."""
    rpc = job.get("rpc") if isinstance(job, dict) else getattr(job, "rpc", None)
    return tuple(d for d in (rpc or ()) if is_endpoint(d))


def run_child(job: Job | dict, on_event: Callable[[dict], None]) -> ChildExit:
    """Run one job in a child; `on_event` sees every event as the child wrote it (a JSON object), but `Failed`
    (which ends up in ChildExit). `run_job` hands them over typed.

    On RPC devices the child must show progress (any event: a load's beats, a fill's chunks, each repetition):
    llama.cpp's RPC client waits for ever on a host that stops answering. The wait for the next event is
    LLAMABENCH_RPC_TIMEOUT, or STALL_FACTOR times the longest wait seen so far where that is longer (a slow
    host's long steps); past it the child is stopped and the ChildExit says `stalled`."""
    proc = _start()
    failure, stalled = None, False
    remote = _remote_devices(job)
    try:
        try:
            proc.stdin.write(_line(job))
            proc.stdin.close()
        except BrokenPipeError:  # it died before reading its job: how, is said below
            pass
        longest, last = 0.0, None  # the longest wait between two events (the child's start-up is not one)

        def deadline() -> float:
            return max(rpc_timeout(), STALL_FACTOR * longest)

        stream = events(proc.stdout) if not remote else _EventReader(proc.stdout).within_each(deadline)
        for data in stream:
            if data is None:  # no progress within the deadline
                stop_group(proc)
                stalled = True
                failure = (f"llama.cpp got no answer from the devices ({', '.join(remote)}) in {deadline():.0f} s: "
                           f"a --rpc host that stalls? (stopped; {RPC_TIMEOUT_ENV} sets the limit)")
                break
            now = time.monotonic()
            longest, last = (longest if last is None else max(longest, now - last)), now
            event = read_event(data) if data.get("event") == Failed.kind else None
            if isinstance(event, Failed):
                failure = event.reason
            else:
                on_event(data)
        proc.wait()
    except BaseException:  # Ctrl-C, or an error in on_event: never leave the child behind
        stop_group(proc)
        raise
    stderr = proc.stderr.read() if proc.stderr else ""
    if failure is None and proc.returncode != 0:
        said = last_error_line(stderr)
        failure = f"llama.cpp's process {signal_name(proc.returncode)}" + (f": {said}" if said else "")
    return ChildExit(proc.returncode, failure, stalled)


def run_job(job: Job, on_event: Callable[[Event], None]) -> ChildExit:
    """Run one job in a child; `on_event` sees every event it wrote but `Failed` (which ends up in ChildExit), typed."""

    def typed(data: dict) -> None:
        event = read_event(data)
        if event is not None:
            on_event(event)

    return run_child(job, typed)


MODEL_TENSORS_TIMEOUT_S = 120  # a model of a few hundred thousand tensors takes seconds; a hang should not last


def run_job_within(job: Job, timeout_s: float) -> tuple[list[Event], ChildExit]:
    """Run one job in a child that must end within `timeout_s`; its events (typed, `Failed` left in ChildExit).
    Past the limit the child's group is killed and the failure says so."""
    proc = _start()
    try:
        out, err = proc.communicate(_line(job), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        return [], ChildExit(-9, f"llama.cpp's process did not finish within {timeout_s:g} s (killed)")
    except BaseException:
        stop_group(proc)
        raise
    found, failure = [], None
    for data in events(out.splitlines()):
        event = read_event(data)
        if isinstance(event, Failed):
            failure = event.reason
        elif event is not None:
            found.append(event)
    if failure is None and proc.returncode != 0:
        said = last_error_line(err or "")
        failure = f"llama.cpp's process {signal_name(proc.returncode)}" + (f": {said}" if said else "")
    return found, ChildExit(proc.returncode, failure)


def model_tensors(metadata: Metadata, *, timeout_s: float = MODEL_TENSORS_TIMEOUT_S) -> tuple[TensorShape, ...]:
    """Every tensor llama.cpp creates for a model of this GGUF metadata (user_model.model_tensors), asked in a child
    process: an abort of llama.cpp (a GGML_ASSERT on a bad value) or a hang ends that child, and comes back as one
    EngineError with llama.cpp's own words."""
    found, outcome = run_job_within(TensorsJob(dict(metadata)), timeout_s)
    tensors = next((e.tensors for e in found if isinstance(e, Tensors)), None)
    if outcome.failure or tensors is None:
        arch = metadata.get("general.architecture")
        what = f"a {arch.value} model" if arch is not None else "a model"
        reason = re.sub(r"\S*/llama\.cpp/(?=(src|ggml)/)", "", outcome.failure or "no tensor list came back")
        if reason.startswith("llama.cpp could not build"):
            raise EngineError(reason)
        raise EngineError(f"llama.cpp could not build {what} from its metadata: {reason}")
    return tensors


RECIPE_TIMEOUT_S = 120.0


def quantize_recipe(path: str, ftype: int, *, timeout_s: float = RECIPE_TIMEOUT_S) -> tuple[tuple[str, str], ...]:
    """The type llama.cpp's quantizer gives each tensor of `path` for a file type (engine.quantize_recipe), asked in a
    child process; EngineError with llama.cpp's words where it refuses or dies."""
    found, outcome = run_job_within(RecipeJob(path, ftype), timeout_s)
    types = next((e.types for e in found if isinstance(e, Recipe)), None)
    if outcome.failure or types is None:
        raise EngineError(f"{path}: llama.cpp's quantize recipe: {outcome.failure or 'no answer came back'}")
    return types


TOKENS_TIMEOUT_S = TOKENIZE_DEADLINE_S  # vocabularies loaded and a text tokenized (texts.MAX_TEXT_BYTES agrees)


def text_tokens(path: str, text: str, base_path: str | None = None, *,
                timeout_s: float = TOKENS_TIMEOUT_S) -> TextTokens:
    """The text's tokens in the model's vocabulary, its n_vocab and trained context, the base's n_vocab (a child)."""
    found, outcome = run_job_within(TokensJob(path, text, base_path), timeout_s)
    answer = next((e for e in found if isinstance(e, TextTokens)), None)
    if answer is None:
        raise EngineError(f"could not tokenize the text: {outcome.failure or 'no answer'}",
                          hint="a shorter text (-f): llama.cpp's tokenizing time grows with the square of the text's "
                               "newlines and runs of spaces where they are tokens of their own (Gemma's vocabulary)")
    return answer


def device_memory() -> list[Device]:
    """Every non-CPU device llama.cpp sees, with its free and total bytes (ggml_devices.device_memory), read in a
    child: the query makes a context on every CUDA GPU, which would stay in this process and cost its memory."""
    found: list[Device] = []
    outcome = run_job(DevicesJob(), lambda e: found.extend(e.devices) if isinstance(e, Devices) else None)
    if outcome.failure:
        raise EngineError(f"llama.cpp could not list its devices ({outcome.failure})")
    return found


CELL_BOOKKEEPING_BYTES = 64  # llama.cpp's per-cell KV metadata, allocated even in a dry run (measured: ~52 B)


def check_dry_run_memory(n_ctx: int) -> None:
    """A dry run allocates llama.cpp's cell bookkeeping for real: refuse what this machine cannot hold."""
    need = n_ctx * CELL_BOOKKEEPING_BYTES
    available = sysinfo.available_ram_bytes()
    if need > available // 2:
        raise UsageError(f"a dry run at n_ctx {n_ctx:,} needs about {need / 2**30:.1f} GiB of system RAM for "
                         f"llama.cpp's KV cell bookkeeping; {available / 2**30:.1f} GiB are available")


class _EventReader:
    """The child's events, read by a thread of their own, so that the wait for the next one can end."""

    def __init__(self, stream):
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        try:
            for data in events(stream):
                self._queue.put(data)
        except (OSError, ValueError):  # the stream was closed under the thread
            pass
        self._queue.put(_END)

    def within(self, deadline_s: float | None):
        """Each event as it comes; None where none came within deadline_s (then the caller stops the child)."""
        return self.within_each(lambda: deadline_s)

    def within_each(self, deadline: Callable[[], float | None]):
        """Each event as it comes; None where none came within `deadline()` seconds, asked before each wait."""
        while True:
            try:
                data = self._queue.get(timeout=deadline())
            except queue.Empty:
                yield None
                return
            if data is _END:
                return
            yield data


_END = object()


class DryRunChild:
    """A no_alloc model in a child process, answering dry-run contexts one at a time.

    If llama.cpp aborts (a GGML_ASSERT) the child dies, not the command: the death becomes one
    EngineError naming the file, the signal and llama.cpp's last error line.
    """

    def __init__(self, path: str, placement: Params = Params(), *, rpc=None, target_path: str | None = None,
                 backend: str | None = None, backend_devices: tuple[str, ...] = ()):
        self.path = path
        self.proc = _start()
        self._events = _EventReader(self.proc.stdout)
        self.rpc = rpc = list(rpc_endpoints(rpc)) or None
        self.backend_devices = tuple(backend_devices)  # emulated cards answering as `backend` does
        self._send(DryRunsJob(path, placement, rpc, target_path, backend=backend, backend_devices=self.backend_devices))
        self._loaded(placement, rpc)

    def load(self, placement: Params, rpc=None) -> None:
        """Load the model again with another placement (-ngl, --n-cpu-moe, -ts) and devices for the next contexts."""
        self.rpc = rpc = list(rpc_endpoints(rpc)) or None
        self._send(LoadRequest(placement, rpc))
        self._loaded(placement, rpc)

    def _loaded(self, placement: Params, rpc: list[str] | None) -> None:
        loaded = self._next(Loaded)
        self.placement, self.rpc = placement, rpc
        self.model_size_bytes, self.n_params = loaded.model_size_bytes, loaded.n_params
        # the weight tensors this placement keeps in system RAM (None: not read), and why not where not
        self.host_tensors = None if loaded.host_tensors is None else frozenset(loaded.host_tensors)
        self.breakdown_unavailable = loaded.breakdown_unavailable

    def _send(self, message: Job | Request) -> None:
        try:
            self.proc.stdin.write(_line(message))
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # it died (or was closed): _next says how

    def _next(self, expected: type[E]) -> E:
        """The next event of the `expected` kind; EngineError for a failure, or where the child died; Stalled
        (the child stopped) where none came within the RPC deadline: llama.cpp's RPC client waits for ever on a
        host that stops answering, and a dry run's load or context takes seconds."""
        deadline_s = rpc_timeout() if self.rpc else None
        for data in self._events.within(deadline_s):
            if data is None:
                stop_group(self.proc)
                raise Stalled(f"{self.path}: llama.cpp got no answer from the devices ({', '.join(self.rpc)}) in "
                              f"{deadline_s:g} s: a --rpc host that stalls? (the dry run was stopped; "
                              f"{RPC_TIMEOUT_ENV} sets the limit)")
            event = read_event(data)
            if isinstance(event, Failed):
                self.close()
                raise EngineError(event.reason)
            if isinstance(event, DryFailed):
                raise EngineError(event.reason)
            if isinstance(event, expected):
                return event
        self.proc.wait()
        said = last_error_line(self.proc.stderr.read() if self.proc.stderr else "")
        raise EngineError(f"{self.path}: llama.cpp's process {signal_name(self.proc.returncode)}"
                          + (f": {said}" if said else ""))

    def context(self, settings: Params) -> DryRunSizes:
        check_dry_run_memory(settings.n_ctx)
        self._send(ContextRequest(settings))
        try:
            return self._next(DryRunSizes)
        except Stalled:
            raise
        except EngineError as exc:
            # a context llama.cpp refused (the child goes on serving), or aborted creating (the child is gone)
            raise ContextRefused(str(exc)) from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                stop_group(self.proc)

    def __enter__(self) -> "DryRunChild":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def dry_runs(path: str, settings_list: list[Params], placement: Params = Params(), *,
             rpc=None, target_path: str | None = None) -> list[DryRunSizes]:
    """llama.cpp's sizes of each context, from one no_alloc load of `path` (an EAGLE3 head's beside its target's
    model, `target_path`)."""
    if any(s.spec_type == "draft-mtp" for s in settings_list):  # an MTP context runs the NextN layers: load them
        placement = placement.replace(spec_type="draft-mtp")
    with DryRunChild(path, placement, rpc=rpc, target_path=target_path) as child:
        return [child.context(s) for s in settings_list]
