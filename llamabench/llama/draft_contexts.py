"""Draft contexts as llama-server creates them: the MTP context beside its target, a draft model's or EAGLE3
head's against the target's, and the sampler chains they carry (with what those add to the output buffer).
"""

from __future__ import annotations

import ctypes
from dataclasses import replace

from ..core.errors import EngineError
from ..memory import speculative
from ..memory.allocations import Allocations
from ..settings.params import Params
from .llama_params import MTP, context_params


class SamplerChains:
    """llama-server's draft sampler chains on the device, one a slot (top-k), for the draft context of the types
    that have them (speculative.backend_samplers): given to the context as it is created, which reserves their
    graph as llama-server's re-reservation after `llama_set_sampler` does (src/llama-context.cpp:250-270). The
    chains must outlive the context: `free` them after it."""

    def __init__(self, lc, kind: str, n_seq: int):
        self._lc = lc
        self.chains = []
        self.configs = None
        if not speculative.backend_samplers(kind):
            return
        self.configs = (lc.llama_sampler_seq_config * n_seq)()
        for seq in range(n_seq):
            chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_k(speculative.TOP_K_CHAIN))
            self.configs[seq].seq_id = seq
            self.configs[seq].sampler = ctypes.cast(chain, ctypes.c_void_p)
            self.chains.append(chain)

    def attach(self, params) -> None:
        if self.chains:
            params.samplers = ctypes.cast(self.configs, ctypes.POINTER(self._lc.llama_sampler_seq_config))
            params.n_samplers = len(self.chains)

    def output_surplus(self, model) -> int:
        """What the chains add to the context's output buffer, made with them: room for each slot's sampled
        logits, probabilities, token and candidates (src/llama-context.cpp:2158-2162). llama-server gives the
        chains after the context is made, so its output buffer at start has none of it, and grows by it at the
        first decode; the dry runs report the buffer at start, as llama-server's log does."""
        if not self.chains:
            return 0
        n_vocab = int(self._lc.llama_vocab_n_tokens(self._lc.llama_model_get_vocab(model)))
        return (2 * n_vocab * 4 + (1 + n_vocab) * 4) * len(self.chains)

    def free(self) -> None:
        for chain in self.chains:
            self._lc.llama_sampler_free(chain)
        self.chains = []


def draft_context(lc, model, settings: Params, other, *, mtp: bool = False):
    """A draft context as llama-server creates it (common/speculative.cpp:2514-2580): ctx_other the target's
    context (`other`), which llama.cpp keeps only where the head needs it (src/llama-context.cpp:146-163), ctx_type
    MTP for the MTP context, and the sampler chains of its --spec-type. Returns (context or None, chains to free
    after it)."""
    chains = SamplerChains(lc, MTP if mtp else settings.spec_type, settings.n_seq)
    params = context_params(settings)
    params.ctx_other = other
    if mtp:
        params.ctx_type = lc.LLAMA_CONTEXT_TYPE_MTP
    chains.attach(params)
    ctx = lc.llama_init_from_model(model, params)
    if not ctx:
        chains.free()
    return ctx, chains


def mtp_context(lc, model, target, settings: Params):
    """The MTP draft context llama-server creates beside `target` with --spec-type draft-mtp, and its sampler
    chains; (None, None) where the settings ask for none."""
    if settings.spec_type != MTP:
        return None, None
    ctx, chains = draft_context(lc, model, speculative.draft_context(settings), target, mtp=True)
    if not ctx:
        raise EngineError("llama.cpp could not create the MTP draft context (does this architecture run draft-mtp?)")
    return ctx, chains


def at_start(alloc: Allocations, surplus: int) -> Allocations:
    """The allocations with the host output buffer as llama-server has it at start (`surplus`: what the draft
    contexts' sampler chains added to it; SamplerChains.output_surplus)."""
    if not surplus or not alloc.output_buffers_mib:
        return alloc
    outputs = dict(alloc.output_buffers_mib)
    name = max(outputs, key=outputs.get)
    outputs[name] = round(outputs[name] - surplus / 2**20, 2)
    return replace(alloc, output_buffers_mib=outputs)
