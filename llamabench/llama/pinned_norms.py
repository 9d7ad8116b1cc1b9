"""What llama.cpp's no_alloc projection over-counts on the later cards of a layer split.

llama.cpp pins each layer's first norm to its layer's device while it builds a graph, wherever every layer
is offloaded (src/llama-context.cpp:2643-2657: "norm may be automatically assigned to the backend of the
previous layer"; ggml_backend_sched_set_tensor_backend). A real context keeps the pins when it reserves its
compute buffers (ggml_backend_sched_reserve). A no_alloc context sizes its buffers with
ggml_backend_sched_reserve_size instead, which resets the scheduler first (ggml/src/ggml-backend.cpp:1977-1981)
and so drops the pins: each card after the first then computes its first layer's norm on the card before,
and takes the norm's output as one more input. With pipeline parallelism that input is kept in one copy per
pipeline stage (GGML_SCHED_MAX_COPIES, 4) for the whole split: 4 f32 rows of n_embd per token of the prompt
batch is what a dry run over-counts on each such card, and llama-server, which allocates for real, does not
hold. Without pipeline parallelism (--n-cpu-moe, a tensor override) the one copy is freed after its use and
the peak is the same: measured exact on the emulated cards either way.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.units import MIB
from ..memory.allocations import Allocations, is_host_buffer

PIPELINE_LOG_LINE = "pipeline parallelism enabled"  # src/llama-context.cpp:460
SCHED_MAX_COPIES = 4  # ggml/src/ggml-backend.cpp: GGML_SCHED_MAX_COPIES, the default build's


def prompt_batch_tokens(n_ctx: int, n_ubatch: int, n_seq_max: int) -> int:
    """The tokens of the prompt graph llama.cpp reserves (llama_context::sched_reserve and graph_reserve:
    min(n_ctx, n_ubatch), rounded up to a multiple of the sequences)."""
    n_tokens = min(n_ctx, n_ubatch)
    return -(-n_tokens // n_seq_max) * n_seq_max


def unpinned_norm_bytes(*, n_layer_cards: int, all_offloaded: bool, pipelined: bool, n_embd: int,
                        n_tokens: int) -> int:
    """Bytes a dry run over-counts on each card after the first that holds layers (0 where no pin applies:
    one card, layers left on the CPU, where a prompt graph pins nothing, or no pipelining)."""
    if n_layer_cards < 2 or not all_offloaded or not pipelined:
        return 0
    return SCHED_MAX_COPIES * n_embd * n_tokens * 4


def layer_cards(alloc: Allocations) -> tuple[str, ...]:
    """The cards (buffer names, in llama.cpp's device order) that hold a repeating layer's cache (KV or recurrent
    state, in the breakdown or printed): a card with the output layer alone holds weights, no layer boundary.
    A card whose layers own no cache (Gemma 3n's shared-KV layers) is missed, and keeps the over-count."""
    held = {name for name, b in alloc.breakdown.items() if b.context}
    held |= {name for d in (alloc.kv_buffers_mib, alloc.rs_buffers_mib) for name, mib in d.items() if mib}
    return tuple(name for name in alloc.compute_buffers_mib if not is_host_buffer(name) and name in held)


def as_allocated(alloc: Allocations, log: str, *, all_offloaded: bool, n_embd: int, n_tokens: int) -> Allocations:
    """A dry run's allocations with each later card's compute as a real context reserves it."""
    cards = layer_cards(alloc)
    extra = unpinned_norm_bytes(n_layer_cards=len(cards), all_offloaded=all_offloaded,
                                pipelined=PIPELINE_LOG_LINE in log, n_embd=n_embd, n_tokens=n_tokens)
    if not extra:
        return alloc
    later = set(cards[1:])
    compute = {name: round(mib - extra / MIB, 2) if name in later else mib
               for name, mib in alloc.compute_buffers_mib.items()}
    by_buffer = {name: replace(b, compute=b.compute - extra) if name in later else b
                 for name, b in alloc.breakdown.items()}
    return replace(alloc, compute_buffers_mib=compute, breakdown=by_buffer)
