"""llama-server beside Llama() at the same depth: the same test, machine and KV settings, the difference stated."""

from __future__ import annotations

from ..records.bench import BenchRecord
from ..render.table import render_markdown
from ..settings.values import Runtime


def _key(r: BenchRecord) -> tuple:
    p = r.params
    return r.machine.host, r.test, p.type_k, p.type_v, p.flash_attn, p.n_gpu_layers


def pairs(bench: list[BenchRecord]) -> list[tuple[BenchRecord, BenchRecord]]:
    """(Llama() record, llama-server record with one request at a time) per test measured by both."""
    llama = {_key(r): r for r in bench if r.ok and r.runtime != Runtime.LLAMA_SERVER}
    return [(llama[_key(r)], r) for r in sorted(bench, key=lambda r: (r.test.depth, str(r.test.kind), r.test.n_tokens))
            if r.ok and r.runtime == Runtime.LLAMA_SERVER and r.concurrency == 1 and _key(r) in llama]


def comparison_md(bench: list[BenchRecord]) -> str | None:
    """The markdown table of `pairs`, or None where no test was measured by both runtimes."""
    found = pairs(bench)
    if not found:
        return None
    rows = []
    for llama, server in found:
        own = server.server.server_ts(str(server.test.kind)) if server.server else None
        rows.append([server.test.name, f"{server.test.depth:,}", f"{llama.avg_ts:.2f}", f"{server.avg_ts:.2f}",
                     "-" if own is None else f"{own:.2f}", f"{(server.avg_ts - llama.avg_ts) / llama.avg_ts:+.1%}",
                     f"{server.params.n_seq}"])
    return render_markdown(["test", "depth", "Llama() t/s", "llama-server t/s", "server's own t/s",
                            "llama-server vs Llama()", "slots"], rows, align="lrrrrrr")
