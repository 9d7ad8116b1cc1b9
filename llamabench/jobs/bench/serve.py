"""bench through llama-server: the program the user runs, with its slots, prompt cache and speculative decoding.

Per configuration one server is started (the command `fit` printed, any llama-server line, or one built from
the bench flags), or a running one is attached to (`--url`). Per depth d, ascending, every slot in use is
filled to d once through the prompt cache (d tokens, `cache_prompt`), then each repetition times, with
`concurrency` parallel requests, one slot each (`id_slot`):
- ppP @ dD: the d cached tokens plus P new ones, one token generated: prefill t/s from the client's TTFT
  (send to first streamed token), beside the server's `prompt_n` / `prompt_ms`;
- tgN @ dD: the d cached tokens plus one new one, N tokens generated (`ignore_eos`): decode t/s from the
  client's first-to-last token interval over N - 1 steps, beside the server's `predicted_n` / `predicted_ms`.
A sample is the wall time of all parallel requests (total t/s), scaled so that t/s = tokens / sample as a
Llama() record reads: pp from the first send to the last first token, tg from the first first token to the
last last token, times N / (N - 1). Token ids are random ids of the vocabulary's middle, sent as arrays to
`/completion`, so every depth is exact and no chat template is applied; each repetition's new tokens differ,
so the cache holds exactly d of them (a pp whose new tokens the server found cached fails, saying so).
"""

from __future__ import annotations

import random
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Callable

from ...core.errors import EngineError, LlamabenchError, UsageError
from ...llama import serving
from ...memory.allocations import parse_allocations
from ...memory.speculative import spec_flags
from ...records.bench import Measurement, ServerBench, ServerRequest
from ...settings.bench_tests import BenchTest, TestKind
from ...settings.params import SCHEMA, Params
from ...settings.sweep import parse_value
from ...settings.values import Runtime
from ..arguments import path_option
from .runner import Event, PendingCells, SweepOutcome

WARMUP_TOKENS = 16
CALIBRATION_TOKENS = 64  # the depth the checkpoint offset is measured at
MAX_FILL_PAST = 16  # a fill goes at most this far past a depth (llama-server's checkpoint offset is 4, + BOS)
CONTEXT_FLAGS = {flag: name for name in ("n_ctx", "type_k", "type_v", "flash_attn", "n_seq", "n_batch", "n_ubatch",
                                         "n_gpu_layers", "n_cpu_moe", "n_threads", "tensor_split", "split_mode",
                                         "main_gpu") for flag in SCHEMA[name].flags}
CONTEXT_FLAGS |= {"--parallel": "n_seq", "--threads": "n_threads", "--ctx-size": "n_ctx"}


@dataclass(frozen=True)
class ServerOptions:
    """How to reach llama-server: a command to start, a running one to attach to, or the bench flags."""

    command: str | None = None  # --server-cmd: a llama-server line (what `fit` printed)
    url: str | None = None  # --url: a running server (not started, not stopped)
    binary: str | None = None  # --server-bin
    concurrency: int = 1
    start_timeout_s: float = 300.0

    def argv(self, params: Params, model: str) -> list[str] | None:
        """The command line to start for this configuration; None when attaching to --url."""
        if self.url:
            return None
        binary = serving.server_binary(self.binary)
        if self.command:
            argv = serving.command_argv(self.command, binary, model=model, repack=params.repack)
            given = "--spec-type" in argv  # the line's own choice stands; else the bench's --spec-type is added
            return argv if given else argv + list(spec_flags(params))
        return [str(binary), *serving.flags_of(params, model)]


def command_params(command: str, base: Params) -> tuple[Params, bool]:
    """The Params a llama-server line sets (llama-server spells these flags as llama-bench does), and whether it
    gives -c; values it spells otherwise are passed over."""
    argv, changes = shlex.split(command), {}
    for i, arg in enumerate(argv):
        if arg in ("-nr", "--no-repack"):
            changes["repack"] = False
        elif arg in ("-kvu", "--kv-unified"):
            changes["kv_unified"] = True
        elif arg in ("--spec-type", "--spec-draft-n-max") and i + 1 < len(argv):
            name = "spec_type" if arg == "--spec-type" else "spec_draft_n_max"
            try:
                changes[name] = SCHEMA[name].parse(argv[i + 1])
            except LlamabenchError:
                pass  # a comma list of types: the record keeps the bench's value
        elif arg in CONTEXT_FLAGS and i + 1 < len(argv):
            name = CONTEXT_FLAGS[arg]
            try:
                changes[name] = SCHEMA[name].parse(argv[i + 1])
            except LlamabenchError:
                pass  # -fa auto and the like: the record keeps the bench's value
    return base.replace(**changes), "n_ctx" in changes


class Session:
    """One server, its slots in use, and the random token ids each slot is filled with."""

    def __init__(self, server: serving.Started, info: serving.ServerInfo, concurrency: int, longest: int):
        self.server, self.info, self.concurrency = server, info, concurrency
        # seeded afresh each session: a server's prompt cache (--cache-ram) keeps earlier runs' prompts
        self.rng = random.Random()
        # the middle of the vocabulary (a twin's has 259 tokens); unknown: ids every real vocabulary holds
        lo, hi = (info.n_vocab // 10, info.n_vocab * 8 // 10) if info.n_vocab >= 20 else (100, 1000)
        self.lo, self.hi = lo, max(hi, lo + 1)
        self.prefix = [self.fresh(longest + MAX_FILL_PAST) for _ in range(concurrency)]
        self.fill_past = 0  # tokens filled past a depth so that the server's checkpoint lands on it (calibrate)
        self.touched = False  # a request since the last fill: a checkpoint-restored context drifts a token a reuse
        self.pool = ThreadPoolExecutor(max_workers=concurrency) if concurrency > 1 else None
        # what the server allocated, from its own log (a server it started: -lv 4); None when attached (--url)
        log = server.log() if server.argv else ""
        self.allocations = parse_allocations(log) if log and "KV buffer size" in log else None

    def fresh(self, n: int) -> list[int]:
        return [self.rng.randrange(self.lo, self.hi) for _ in range(n)]

    def close(self) -> None:
        if self.pool:
            self.pool.shutdown(wait=True)

    def parallel(self, bodies: list[dict]) -> list[serving.Answer]:
        """One request per slot in use, in parallel; EngineError naming the first that failed."""
        bodies = [{**b, "id_slot": i, "cache_prompt": True} for i, b in enumerate(bodies)]
        if self.pool:
            answers = list(self.pool.map(lambda b: serving.complete(self.server.url, b), bodies))
        else:
            answers = [serving.complete(self.server.url, bodies[0])]
        for a in answers:
            if a.error:
                raise EngineError(f"llama-server /completion: {a.error}")
        return answers

    def warm_up(self) -> None:
        self.parallel([{"prompt": self.fresh(WARMUP_TOKENS), "n_predict": 2} for _ in range(self.concurrency)])
        self.calibrate()

    def calibrate(self) -> None:
        """How many tokens short of a filled depth a follow-up finds in the cache. A model whose memory cannot be
        rolled back (SWA without swa_full, recurrent state) is reused from a context checkpoint, which llama-server
        makes 4 tokens before a prompt's end (and 4 + n_ubatch; server-context.cpp: checkpoint_offsets, BOS
        counted); a fill that many tokens past the depth puts the checkpoint on it. 0 for a model that rolls back."""
        base = [self.fresh(CALIBRATION_TOKENS + MAX_FILL_PAST) for _ in range(self.concurrency)]
        self.parallel([{"prompt": b[:CALIBRATION_TOKENS], "n_predict": 0} for b in base])
        probe = self.parallel([{"prompt": b[:CALIBRATION_TOKENS] + self.fresh(WARMUP_TOKENS), "n_predict": 1}
                               for b in base])
        cached = [_count(a.timings, "cache_n") for a in probe if "cache_n" in a.timings]
        short = CALIBRATION_TOKENS - min(cached) if cached else 0
        self.fill_past = short if 0 < short <= MAX_FILL_PAST else 0

    def fill(self, depth: int) -> float:
        """Every slot in use to `depth` through the prompt cache (and `fill_past` tokens on, where the server
        reuses a checkpoint); the server's prompt ms (the slowest slot)."""
        if depth == 0:
            return 0.0
        end = min(depth + self.fill_past, self.info.n_ctx_slot - 1)  # check_tests: the slot has a size
        answers = self.parallel([{"prompt": p[:end], "n_predict": 0} for p in self.prefix])
        self.touched = False
        return max(_ms(a.timings, "prompt_ms") for a in answers)

    def refill(self, depth: int) -> None:
        """Before a repetition on a model reused from checkpoints: each reuse restores the checkpoint one token
        earlier (and makes the next there), so the depth is filled again, a few tokens, untimed."""
        if self.fill_past and self.touched and depth:
            self.fill(depth)

    def time(self, test: BenchTest) -> tuple[int, tuple[ServerRequest, ...]]:
        """One repetition of a test on every slot in use: the sample (ns) and each request."""
        d = test.depth
        self.refill(d)
        self.touched = True
        if test.kind is TestKind.PP:
            # ignore_eos: a first token that is the end of text would stream nothing, and the prefill go untimed
            answers = self.parallel([{"prompt": p[:d] + self.fresh(test.n_tokens), "n_predict": 1, "ignore_eos": True}
                                     for p in self.prefix])
            if any(a.first_ns is None for a in answers):
                raise EngineError("llama-server streamed no token for a prompt: the prefill was not timed")
            sample = max(a.first_ns for a in answers) - min(a.sent_ns for a in answers)
            took = [_count(a.timings, "prompt_n") if "prompt_n" in a.timings else test.n_tokens for a in answers]
            if any(n < test.n_tokens for n in took):
                raise EngineError(f"{test.name}: the server processed {min(took)} of the {test.n_tokens} new prompt "
                                  "tokens (the rest came from a cache): the prefill was not timed")
            cached = [_count(a.timings, "cache_n") for a in answers if "cache_n" in a.timings]
            if d and any(n < d for n in cached):  # the fill lost: a cold d + P prefill would be timed as P
                raise EngineError(f"{test.name}: the server found {min(cached)} of the {d} context tokens in its "
                                  "prompt cache: the follow-up was not on a warm context (a slot reused, or the "
                                  "cache evicted)")
            return sample, tuple(_request(a, a.first_ns - a.sent_ns) for a in answers)
        answers = self.parallel([{"prompt": p[:d] + self.fresh(1), "n_predict": test.n_tokens, "ignore_eos": True}
                                 for p in self.prefix])
        if any(a.n_streamed < 2 for a in answers):
            raise EngineError(f"llama-server streamed fewer than 2 tokens of {test.n_tokens}")
        wall = max(a.last_ns for a in answers) - min(a.first_ns for a in answers)
        sample = wall * test.n_tokens // (test.n_tokens - 1)
        return sample, tuple(_request(a, a.last_ns - a.first_ns) for a in answers)


def _request(a: serving.Answer, client_ns: int) -> ServerRequest:
    t = a.timings
    draft = t.get("draft_n")
    return ServerRequest(max(client_ns, 1), max((a.first_ns or a.done_ns) - a.sent_ns, 1), _count(t, "prompt_n"),
                         _ms(t, "prompt_ms"), _count(t, "predicted_n"), _ms(t, "predicted_ms"), _count(t, "cache_n"),
                         None if draft is None else _count(t, "draft_n"),
                         None if draft is None else _count(t, "draft_n_accepted"))


def _count(timings: dict, name: str) -> int:
    """A token count of the server's `timings` (0 where absent); EngineError where it is not one (a server that is
    not llama-server, or a broken one): the test fails, and no record holds what it could not read back."""
    value = timings.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**53 or value != int(value):
        raise EngineError(f"llama-server's timings.{name} is not a token count: {str(value)[:40]!r}")
    return int(value)


def _ms(timings: dict, name: str) -> float:
    """A duration in ms of the server's `timings` (0 where absent); EngineError where it is not one."""
    value = timings.get(name, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e12:
        raise EngineError(f"llama-server's timings.{name} is not a duration in ms: {str(value)[:40]!r}")
    return float(value)


def check_tests(tests: list[BenchTest], info: serving.ServerInfo, concurrency: int) -> None:
    if not info.n_ctx_slot:  # no size to hold the depths to: nothing is built or sent for them
        raise EngineError("the server reports no context size (/props n_ctx 0): not a llama-server this bench can "
                          "fill to a depth")
    if concurrency > info.slots:
        raise UsageError(f"--concurrency {concurrency} needs as many slots: the server has {info.slots} (-np)")
    if any(t.kind is TestKind.TG and t.n_tokens < 2 for t in tests):
        raise UsageError("a tg test through llama-server needs -n 2 or more (decode t/s is timed between tokens)")
    deepest = max(t.depth + t.n_tokens + 1 for t in tests)
    if deepest > info.n_ctx_slot:
        raise UsageError(f"the deepest test needs {deepest} tokens in one slot; each of the server's {info.slots} "
                         f"slots holds {info.n_ctx_slot} (llama-server's -c is shared by its slots: raise -c or "
                         "lower -np)")


def run_server_sweep(model: str, configurations: list[Params], tests: list[BenchTest], repetitions: int,
                     options: ServerOptions, *, save: Callable[[Measurement], None],
                     done: Callable[[Params, BenchTest], bool] = lambda p, t: False,
                     on_event: Event | None = None) -> SweepOutcome:
    """Every configuration on a server of its own (or the one at --url); `save` gets each Measurement at once."""
    notify = on_event or (lambda kind, data: None)
    cells = PendingCells(configurations, tests, done, notify)
    for index, params, todo in cells:
        kept: set[BenchTest] = set()

        def keep(m: Measurement) -> None:
            kept.add(m.test)
            save(m)
            notify("measured", {"measurement": m})

        try:
            _run_configuration(model, params, todo, repetitions, options, keep, notify)
        except KeyboardInterrupt:
            return SweepOutcome(cells.skipped, interrupted=True)
        except (EngineError, OSError) as exc:
            for test in todo:
                if test not in kept:
                    keep(_failed(params, test, repetitions, str(exc)))
        notify("cell_done", {"index": index, "total": len(configurations), "params": params})
    return SweepOutcome(cells.skipped)


def _server(options: ServerOptions, argv: list[str] | None):
    if argv is None:
        return _attached(options.url)
    return serving.started(argv, timeout_s=options.start_timeout_s)


class _attached:
    """A running server at --url: nothing started, nothing stopped."""

    def __init__(self, url: str):
        self.server = serving.Started(url.rstrip("/"))

    def __enter__(self) -> serving.Started:
        return self.server

    def __exit__(self, *exc) -> None:
        return None


def _run_configuration(model: str, params: Params, todo: list[BenchTest], repetitions: int, options: ServerOptions,
                       keep: Callable[[Measurement], None], notify: Event) -> None:
    argv = options.argv(params, model)
    with _server(options, argv) as server:
        info = serving.info(server.url)
        if options.command and not command_params(options.command, params)[1]:
            params = params.replace(n_ctx=info.n_ctx_slot)  # no -c: the slot's context, as the server took it
        params = params.replace(n_seq=info.slots)
        check_tests(todo, info, options.concurrency)
        session = Session(server, info, options.concurrency, max(t.depth for t in todo))
        try:
            session.warm_up()
            for depth, group in groupby(todo, key=lambda t: t.depth):
                group = list(group)
                try:
                    fill_ms = session.fill(depth)
                except EngineError as exc:  # this depth fails; the deeper ones are tried still
                    for test in group:
                        keep(_failed(params, test, repetitions, f"filling the context to {depth}: {exc}"))
                    continue
                shown = []
                for test in group:
                    try:
                        m = _measure(session, server, params, test, repetitions, fill_ms)
                    except EngineError as exc:  # one test fails, the server and the later depths go on
                        m = _failed(params, test, repetitions, str(exc))
                    keep(m)
                    shown.append(m)
                notify("depth", {"depth": depth, "fill_ms": fill_ms, "slots": options.concurrency,
                                 "measurements": shown})
        finally:
            session.close()


def _failed(params: Params, test: BenchTest, repetitions: int, reason: str) -> Measurement:
    return Measurement(params=params, test=test, repetitions=repetitions, reason=reason[:2000],
                       runtime=Runtime.LLAMA_SERVER.value)


def _measure(session: Session, server: serving.Started, params: Params, test: BenchTest, repetitions: int,
             fill_ms: float) -> Measurement:
    samples, requests = [], []
    for _ in range(repetitions):
        sample, reqs = session.time(test)
        samples.append(max(sample, 1))
        requests += reqs
    block = ServerBench(server.command, server.url, session.concurrency, session.info.slots, tuple(requests),
                        round(fill_ms, 3) if fill_ms else None)
    return replace(Measurement(params=params, test=test, repetitions=repetitions, samples_ns=tuple(samples),
                               runtime=Runtime.LLAMA_SERVER.value,
                               allocations=session.allocations), server=block)


def server_options(runtime, server_cmd, url, server_bin, concurrency) -> ServerOptions | None:
    """bench's llama-server options checked: None for the Llama() runtime (which takes none of them)."""
    chosen = parse_value("runtime", runtime, listed=False) if runtime is not None else Runtime.LLAMA_CPP_PYTHON
    given = [name for name, v in (("server_cmd", server_cmd), ("url", url), ("server_bin", server_bin),
                                  ("concurrency", concurrency)) if v is not None]
    if chosen is not Runtime.LLAMA_SERVER:
        if given:
            raise UsageError(f"{', '.join(given)}: only with runtime {Runtime.LLAMA_SERVER} (--runtime "
                             f"{Runtime.LLAMA_SERVER})")
        return None
    if server_cmd and url:
        raise UsageError("give --server-cmd (a server to start) or --url (one running), not both")
    if url is not None and not url:  # an empty --url is not "no --url": nothing would be started in its place
        raise UsageError("--url is empty: give http://HOST:PORT of a running llama-server")
    if server_cmd is not None and not server_cmd:
        raise UsageError("--server-cmd is empty: give a llama-server line")
    c = parse_value("concurrency", concurrency, listed=False) if concurrency is not None else 1
    return ServerOptions(_server_line(server_cmd) if server_cmd else None, serving.check_url(url) if url else None,
                         path_option("server_bin", server_bin), c)


def _server_line(command) -> str:
    """--server-cmd as one line: a str, or its words (a list of str); its quoting checked now, not at the start."""
    if isinstance(command, (list, tuple)) and all(isinstance(w, str) for w in command):
        command = shlex.join(command)
    if not isinstance(command, str):
        raise UsageError(f"server_cmd: a llama-server line (a str, or a list of its words), not "
                         f"{type(command).__name__}")
    try:
        shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"--server-cmd {command!r}: {exc}") from None
    return command
