"""Bench records as llama-bench prints them: one field list for the speed table, the memory table and CSV."""

from __future__ import annotations

from dataclasses import replace

from ..core import stats
from ..core.units import GIB
from ..records.bench import BenchRecord
from .fields import Field, fixed2, mib, table

SPEED, MEMORY, SERVER = frozenset({"speed"}), frozenset({"memory"}), frozenset({"server"})
NONE: frozenset[str] = frozenset()


def _ts(r: BenchRecord) -> str:
    if not r.ok:
        return "failed: " + " ".join((r.reason or "").split())[:100]
    spread = f" ± {r.stddev_ts:.2f}" if len(r.samples_ns) > 1 else ""  # one repetition has no spread to show
    return f"{r.avg_ts:.2f}{spread}" + (" (noisy)" if noisy(r) else "")


def noisy(r: BenchRecord) -> bool:
    """t/s that varied by more than SPREAD_WARNING of the mean between repetitions."""
    return r.ok and r.spread is not None and r.spread > stats.SPREAD_WARNING


def variance_warning(records) -> str | None:
    """The one line that names the noisy tests, or None."""
    wide = [r for r in records if noisy(r)]
    if not wide:
        return None
    return (f"{', '.join(r.test.name for r in wide)}: t/s varied by more than {stats.SPREAD_WARNING:.0%} of the mean "
            "between repetitions (marked noisy); close other programs, pin threads (--cpu-mask) or raise -r")


def _server(get):
    """A llama-server record's value (None for a Llama() record)."""
    return lambda r: get(r, r.server, str(r.test.kind)) if r.server else None


def _verdict(r: BenchRecord) -> str:
    if r.kv_match is None and r.server and r.ok:
        return "-"  # llama-server: its allocations are its own log's, not read here
    if r.kv_match is None and r.ok and r.footprint is None and r.theory_error:
        return "llama.cpp only: " + r.theory_error[:60]  # measured; no theory to set beside it
    if r.kv_match is None:
        return "failed: " + " ".join((r.reason or r.theory_error or "").split())[:60]
    return "match" if r.kv_match and r.recurrent_match else "MISMATCH"


FIELDS: tuple[Field, ...] = (
    Field("model_shown", "model", lambda r: r.model.label + (" (twin)" if r.model.is_twin else ""), views=SPEED,
          csv=False),
    Field("model", "model", lambda r: r.model.label, views=NONE),
    Field("is_twin", "twin", lambda r: r.model.is_twin, views=NONE),
    Field("model_size_bytes", "size", lambda r: r.model.size_bytes, lambda v: f"{v / GIB:.2f} GiB", "r", SPEED),
    Field("model_n_params", "params", lambda r: r.model.n_params, lambda v: f"{v / 1e6:.2f} M", "r", SPEED),
    Field("backend", "backend", lambda r: r.backend, views=SPEED),
    Field("n_gpu_layers", "ngl", lambda r: r.params.n_gpu_layers, align="r", views=SPEED),
    Field("n_threads", "threads", lambda r: r.params.n_threads, align="r", views=SPEED),
    Field("n_ctx", "n_ctx", lambda r: r.params.n_ctx, align="r", views=SPEED | MEMORY),
    Field("type_k", "type_k", lambda r: r.params.type_k, views=SPEED | MEMORY),
    Field("type_v", "type_v", lambda r: r.params.type_v, views=SPEED | MEMORY),
    Field("flash_attn", "fa", lambda r: int(r.params.flash_attn), align="r", views=SPEED | MEMORY),
    Field("n_batch", "n_batch", lambda r: r.params.n_batch, views=NONE),
    Field("n_ubatch", "n_ubatch", lambda r: r.params.n_ubatch, views=NONE),
    Field("n_cpu_moe", "n_cpu_moe", lambda r: r.params.n_cpu_moe, views=NONE),
    Field("repack", "repack", lambda r: int(r.params.repack), views=NONE),
    Field("test", "test", lambda r: r.test.name, views=SPEED),
    Field("depth", "depth", lambda r: r.test.depth, views=NONE),
    # llama-bench's own columns: n_prompt and n_gen of the test (one of them 0), n_depth its depth
    Field("n_prompt", "n_prompt", lambda r: r.test.n_tokens if r.test.kind == "pp" else 0, views=NONE),
    Field("n_gen", "n_gen", lambda r: r.test.n_tokens if r.test.kind == "tg" else 0, views=NONE),
    Field("n_depth", "n_depth", lambda r: r.test.depth, views=NONE),
    Field("t_s", "t/s", _ts, align="r", views=SPEED, csv=False),
    Field("runtime", "runtime", lambda r: r.runtime, views=SERVER),
    Field("slots", "slots (-np)", _server(lambda r, s, k: s.slots), align="r", views=SERVER),
    Field("concurrency", "requests at once", lambda r: r.concurrency, align="r", views=SERVER),
    Field("spec_type", "speculative", lambda r: r.params.spec_type, views=SERVER),
    Field("request_ts", "t/s per request", _server(lambda r, s, k: s.request_ts(k, r.test.n_tokens)), fixed2, "r",
          SERVER),
    Field("server_ts", "server's own t/s", _server(lambda r, s, k: s.server_ts(k)), fixed2, "r", SERVER),
    Field("ttft_ms", "TTFT ms", _server(lambda r, s, k: s.ttft_ms if k == "pp" else None), fixed2, "r", SERVER),
    Field("draft_acceptance", "draft accepted", _server(lambda r, s, k: s.acceptance), lambda v: f"{v:.1%}", "r",
          SERVER),
    Field("server_command", "server command", _server(lambda r, s, k: s.command or s.url), views=NONE),
    Field("status", "status", lambda r: r.status, views=NONE),
    Field("avg_ts", "avg t/s", lambda r: r.avg_ts, fixed2, "r", NONE),
    Field("stddev_ts", "stddev t/s", lambda r: r.stddev_ts, fixed2, "r", NONE),
    Field("kv_theory_bytes", "KV theory MiB",
          lambda r: r.footprint.kv_bytes + r.footprint.mtp_kv_bytes if r.footprint else None, mib, "r",
          MEMORY),
    Field("kv_llama_cpp_mib", "KV llama.cpp MiB", lambda r: r.allocations.kv_mib if r.allocations else None, fixed2,
          "r", MEMORY),
    Field("recurrent_theory_bytes", "recurrent theory MiB",
          lambda r: r.footprint.recurrent_state_bytes if r.footprint else None, mib, "r", MEMORY),
    Field("recurrent_llama_cpp_mib", "recurrent llama.cpp MiB",
          lambda r: r.allocations.recurrent_mib if r.allocations else None, fixed2, "r", MEMORY),
    Field("compute_llama_cpp_mib", "compute MiB", lambda r: r.allocations.compute_mib if r.allocations else None,
          fixed2, "r", MEMORY),
    Field("rss_delta_bytes", "RSS delta MiB", lambda r: r.memory.rss_delta_bytes if r.memory else None, mib, "r",
          MEMORY),
    Field("gpu_delta_bytes", "GPU delta MiB", lambda r: r.memory.gpu_delta_bytes if r.memory else None, mib, "r",
          NONE),
    Field("theory_vs_llama_cpp", "theory vs llama.cpp", _verdict, views=MEMORY, csv=False),
    Field("kv_match", "KV match", lambda r: r.kv_match, views=NONE),
    Field("recurrent_match", "recurrent match", lambda r: r.recurrent_match, views=NONE),
    Field("bytes_per_token", "bytes/token", lambda r: r.roofline.bytes_per_token if r.roofline else None, views=NONE),
    Field("mbu", "MBU", lambda r: r.roofline.mbu if r.roofline else None, views=NONE),
    Field("reason", "reason", lambda r: r.reason, views=NONE),
)
SERIES = Field("machine", "machine", lambda r: r.series)


def speed_table(records: list[BenchRecord], fmt: str, *, with_series: bool = False) -> str:
    """llama-bench's columns; with any llama-server record, its runtime, slots, parallel requests, per-request
    and the server's own t/s, TTFT and draft acceptance beside them."""
    fields = FIELDS
    if any(r.server for r in records):
        fields = tuple(replace(f, views=f.views | SPEED) if f.views == SERVER else f for f in FIELDS)
    return table(records, fields, fmt, view_name="speed", lead=(SERIES,) if with_series else ())


def memory_table(records: list[BenchRecord], fmt: str) -> str:
    """One row per configuration and machine: theory against llama.cpp's allocation, and the process RSS."""
    seen: dict[tuple, BenchRecord] = {}
    for r in records:
        key = (r.params, r.series)
        if key not in seen or seen[key].allocations is None:
            seen[key] = r
    return table(seen.values(), FIELDS, fmt, view_name="memory")


def pool_lines(records: list[BenchRecord]) -> list[str]:
    """A unified device's pool, once per configuration: its buffers against its own ceiling, and with the host's
    against the machine's RAM (measured: llama.cpp's allocation log, ggml_backend_dev_memory, psutil)."""
    seen: dict[tuple, str] = {}
    for r in records:
        pool = r.memory.pool if r.memory else None
        if pool is None:
            continue
        gib = lambda n: f"{n / 2**30:.2f}"  # noqa: E731
        seen.setdefault((r.params, r.series), (
            f"unified memory, {r.params.n_ctx:,} context: {pool.device} {gib(pool.device_bytes)} GiB of its ceiling "
            f"{gib(pool.ceiling_bytes)} ({'within' if pool.within_ceiling else 'PAST it'}); with the host's "
            f"{gib(pool.host_bytes)} GiB, {gib(pool.pool_bytes)} of {gib(pool.ram_bytes)} GiB of RAM"
            + ("" if pool.within_ram else " (PAST the RAM)")))
    return list(seen.values())


def render(records: list[BenchRecord], fmt: str) -> str:
    """`bench -o FORMAT`: text and md give both tables, csv every field of every record."""
    if fmt == "csv":
        return table(records, FIELDS, "csv")
    server = ("\n\nllama-server: t/s is the total of the parallel requests (every request's tokens over the wall time "
              "of them all, the client's clock: pp from the send to the first token, tg between the first and the last "
              "token); per request, the client's and the server's own timings." if any(r.server for r in records)
              else "")
    return (speed_table(records, fmt) + "\n\nt/s: mean ± sample standard deviation over the repetitions (measured)."
            + server + "\n\n"
            + memory_table(records, fmt) + "\n\ntheory: computed from the GGUF; llama.cpp: its allocation log lines "
            "(measured)." + "".join(f"\n{line}" for line in pool_lines(records)))
