"""bench's arguments, checked and expanded into one `BenchPlan`: the configurations (llama-bench's sweep of
every list), the tests of each, the repetitions, the --rpc hosts and the results file. Nothing runs here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import LlamabenchError, UsageError
from ...core.safe_text import shell_word
from ...llama import ggml_devices
from ...memory import speculative
from ...memory.footprint import pad
from ...runtimes.registry import bench_runtime
from ...runtimes.runtime import BenchDriver, ProgramRuntime
from ...settings.bench_tests import BenchTest, bench_tests
from ...settings.params import SCHEMA, Params
from ...settings.sweep import expand, parse_value
from ...settings.values import ALL_LAYERS
from ...world import paths, sysinfo
from ..arguments import call_values
from ..source import ModelSource, resolve
from .serve import ServerOptions, command_params

BENCH_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_gpu_layers", "n_cpu_moe", "n_batch", "n_ubatch",
                "n_threads", "repack", "poll", "cpu_mask", "cpu_strict", "prio")
BENCH_PARAMS += ("tensor_split", "split_mode", "main_gpu")
BENCH_LISTS = tuple(n for n in BENCH_PARAMS if n not in ("prio", "tensor_split", "split_mode", "main_gpu"))
BENCH_TESTS = ("n_prompt", "n_gen", "n_depth")
# llama-server's slots (-np), one KV stream for them (-kvu), and its speculative decoding (--spec-type, a list:
# each a server of its own, side by side; --spec-draft-n-max)
SERVER_PARAMS = ("n_seq", "kv_unified", "spec_type", "spec_draft_n_max")


@dataclass(frozen=True)
class BenchPlan:
    """A sweep, checked: the model, where its records go, configurations x tests, and the --rpc hosts."""

    source: ModelSource
    target: Path  # the JSON Lines file the records are appended to
    configurations: tuple[Params, ...]
    tests: tuple[BenchTest, ...]
    repetitions: int
    hosts: tuple[str, ...] = ()  # --rpc: ggml-rpc-servers, in front of this build's GPUs
    server: ServerOptions | None = None  # --runtime llama-server: how to start (or reach) it

    @property
    def program(self) -> ProgramRuntime:
        """The runtime timed: a Llama() in a child, a llama-server started, or the one at --url."""
        return bench_runtime(self.server is not None, self.server.url if self.server else None)

    @property
    def runtime(self) -> str:
        return self.program.record_name

    def server_command(self, params: Params) -> str:
        """What the plan starts for one configuration (--dry-run), or the URL it attaches to."""
        if self.server is None:
            return ""
        if self.program.bench_driver is BenchDriver.ATTACHED:
            return f"attach to {self.server.url}"
        try:
            argv = self.server.argv(params, str(self.source.path or self.source.label))
        except LlamabenchError as exc:
            return f"(no llama-server: {exc})"
        return " ".join(map(shell_word, argv))  # runnable as printed: bash's $'...' for a control character


def check_room(configurations, tests) -> None:
    """Every test fits in every context: its depth plus its tokens within n_ctx (as llama.cpp pads it to 256)."""
    deepest = max(tests, key=lambda t: t.depth + t.n_tokens)
    need = deepest.depth + deepest.n_tokens
    small = [p.n_ctx for p in configurations if pad(p.n_ctx) < need]
    if small:
        raise UsageError(f"{deepest.name} needs a context of at least {need:,} tokens (depth {deepest.depth:,} + "
                         f"{deepest.n_tokens:,}); -c {min(small):,} is too small",
                         hint=f"raise -c to {need:,}, or leave -c out to size it from the tests")


def default_gpu_layers(rpc: bool) -> int:
    """-ngl not given (or auto): every layer on the GPU where a GPU backend is present or --rpc names hosts, as
    llama-bench's default (-1: all); none on a CPU build (its layers are on the CPU whatever -ngl says)."""
    return ALL_LAYERS if rpc or ggml_devices.supports_gpu_offload() else 0


def plan_bench(model: str, params: dict[str, Any], *, n_prompt=None, n_gen=None, n_depth=None, repetitions=None,
               results=None, rpc=None, server: ServerOptions | None = None) -> BenchPlan:
    """`lb.bench`'s arguments checked and expanded (`params`: the schema's, by name); results=None:
    reports/local/<label>/bench.jsonl. `server`: through llama-server instead of a Llama() context."""
    follows_tests = params.get("n_ctx") in (None, (), [])
    names, lists = (BENCH_PARAMS + SERVER_PARAMS, BENCH_LISTS + SERVER_PARAMS) if server else (BENCH_PARAMS,
                                                                                                BENCH_LISTS)
    if not server and (only := [n for n in SERVER_PARAMS if params.get(n) is not None]):
        raise UsageError(f"{', '.join(only)}: llama-server's slots, only with --runtime llama-server",
                         hint="a Llama() context of llama-bench's kind has one sequence")
    values = call_values(params, names, lists)
    if params.get("n_gpu_layers") in (None, (), []) or str(params.get("n_gpu_layers")).strip().lower() == "auto":
        values["n_gpu_layers"] = (default_gpu_layers(rpc not in (None, "", ())),)
    if server and rpc not in (None, "", ()):
        raise UsageError("--rpc spreads a Llama() context; through llama-server give its own --rpc in --server-cmd")
    hosts = parse_value("rpc", rpc, listed=False) if rpc not in (None, "", ()) else ()
    tests_values = call_values({"n_prompt": n_prompt, "n_gen": n_gen, "n_depth": n_depth}, BENCH_TESTS, BENCH_TESTS)
    reps = (parse_value("repetitions", repetitions, listed=False) if repetitions is not None
            else SCHEMA["repetitions"].default)
    values["n_threads"] = tuple(dict.fromkeys(n or sysinfo.physical_cores() for n in values["n_threads"]))  # 0: cores
    tests = bench_tests(tests_values["n_prompt"], tests_values["n_gen"], tests_values["n_depth"])
    if not tests:
        raise UsageError("nothing to measure: -p and -n are both 0")
    if follows_tests:  # llama-bench: n_ctx = n_prompt + n_gen + n_depth (per slot, through llama-server)
        need = max(t.depth for t in tests) + max(tests_values["n_prompt"]) + max(tests_values["n_gen"])
        slots = max(values.get("n_seq") or (1,)) if server else 1
        values["n_ctx"] = (need * slots,)
    configurations = expand(values)
    if server and server.command:  # what the line sets is what the records say (the rest: the bench's values)
        configurations = list(dict.fromkeys(command_params(server.command, p)[0] for p in configurations))
    if any(p.n_ctx == 0 for p in configurations):
        raise UsageError("n_ctx 0 is not allowed in a sweep: give the context length")
    check_room(configurations, tests)
    source = resolve(model)
    speculative.check_not_a_head(source.metadata.architecture, source.label, "bench")
    if source.url:
        raise UsageError(f"bench runs the model itself: download {source.url} (llamabench read only its header) and "
                         "give the file, or give a catalog id to bench its geometry twin")
    target = Path(results) if results else paths.reports_dir() / source.label / "bench.jsonl"
    if server and server.url and len(configurations) > 1:
        raise UsageError("--url attaches to one running server: one configuration, not a sweep")
    return BenchPlan(source, target, tuple(configurations), tuple(tests), reps, tuple(hosts), server)
