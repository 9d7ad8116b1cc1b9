"""Models and contexts through llama_cpp (llama-cpp-python's low-level ctypes API): a model loaded with no_alloc for
dry runs (llama.cpp's sizes for a context), a real model and context for timed decoding (`Session`), and the
quantizer's dry run. Everything they return is plain data; no ctypes pointer leaves the engine modules (`binding`,
`ggml_devices`, `llama_params`, `draft_contexts` and this one).
"""

from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass, replace

from ..core.errors import EngineError
from ..memory.allocations import Allocations, parse_allocations
from ..settings.params import Params
from . import breakdown, pinned_norms
from .binding import captured_log, error_reason, llama_module
from .draft_contexts import at_start, draft_context, mtp_context
from .llama_params import attach_threadpool, context_params, model_params

# src/llama-quant.cpp, llama_model_quantize_impl under dry_run: one line a tensor, its new type in parentheses where the
# quantizer changes it ("[  12/ 747] blk.0.attn_qkv.weight - [ 2048, 8192, 1, 1], type =  tq1_0, size = ... (q6_K)")
_RECIPE_LINE = re.compile(r"^\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[[^\]]*\], type =\s*(\S+), size =[^(\n]*(?:\((\S+)\))?",
                          re.MULTILINE)


def quantize_recipe(path: str, ftype: int) -> tuple[tuple[str, str], ...]:
    """Each tensor of the GGUF at `path` and the ggml type llama.cpp's quantizer gives it for the file type `ftype`
    (enum llama_ftype): llama_model_quantize with dry_run (llama_tensor_get_type: the output, embedding and attn_v
    promotions, the fallback types of rows no block divides), nothing written."""
    lc = llama_module()
    params = lc.llama_model_quantize_default_params()
    params.ftype, params.dry_run, params.allow_requantize, params.nthread = ftype, True, True, 1
    with captured_log() as lines:
        failed = lc.llama_model_quantize(os.fsencode(path), os.fsencode(os.devnull), ctypes.byref(params))
    if failed:
        raise EngineError(f"{path}: llama.cpp's quantizer refused file type {ftype} "
                          f"({error_reason(lines, 'no reason logged')})")
    return tuple((m[1], (m[3] or m[2]).lower()) for m in _RECIPE_LINE.finditer("".join(lines)))


class _Closing:
    """`with` support for the classes below, which free their llama.cpp objects in close()."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass(frozen=True)
class DryRun:
    """llama.cpp's sizes for one context, created with no_alloc (nothing big allocated)."""

    allocations: Allocations
    model_size_bytes: int  # llama_model_size: weights as loaded
    n_params: int
    n_ctx: int
    n_ctx_seq: int
    n_seq_max: int
    log: str


class DryRunModel(_Closing):
    """A model loaded with no_alloc, for many dry-run contexts (about 0.1 s each)."""

    def __init__(self, path: str, placement: Params = Params(), *, rpc=None, target: tuple[str, Params] | None = None):
        lc = llama_module()
        self._lc = lc
        self.path = path
        self._target_model = self._target_ctx = None
        if target is not None:  # an EAGLE3 head: its contexts are made against a target's (ctx_other)
            self._load_target(*target, rpc=rpc)
        with captured_log() as lines:
            params, _keep = model_params(placement, no_alloc=True, rpc=rpc)
            self._model = lc.llama_model_load_from_file(os.fsencode(path), params)
            if not self._model:
                reason = error_reason(lines, "no reason logged")
                raise EngineError(f"{path}: llama.cpp could not load the model ({reason})")
            self.load_log = "".join(lines)
        self.size = int(lc.llama_model_size(self._model))
        self.n_params = int(lc.llama_model_n_params(self._model))
        # the weights this placement keeps in system RAM, tensor by tensor (the host layers' and any a device
        # refused): the mapped span llama.cpp reports for them follows from their file offsets
        self.host_tensors = breakdown.host_tensors(self._model)

    def context(self, settings: Params) -> DryRun:
        lc = self._lc
        with captured_log() as lines:
            if self._target_ctx is not None:  # a draft head's context: against its target, with its chains
                ctx, chains = draft_context(lc, self._model, settings, self._target_ctx)
            else:
                ctx, chains = lc.llama_init_from_model(self._model, context_params(settings)), None
            if not ctx:
                raise EngineError(f"{self.path}: llama.cpp could not create the context "
                                  f"({error_reason(lines, 'no reason logged')})")
            mtp = mtp_chains = None
            try:
                try:
                    mtp, mtp_chains = mtp_context(lc, self._model, ctx, settings)
                except EngineError as exc:
                    raise EngineError(f"{self.path}: {exc} ({error_reason(lines, 'no reason logged')})") from None
                n_ctx, n_ctx_seq, n_seq = lc.llama_n_ctx(ctx), lc.llama_n_ctx_seq(ctx), lc.llama_n_seq_max(ctx)
                by_buffer = breakdown.read(ctx)  # the weights each device took: the log prints 0.00 under no_alloc
                if by_buffer is not None and mtp:  # the MTP context's caches and compute beside the target's
                    by_buffer = breakdown.merged(by_buffer, breakdown.read(mtp), contexts_only=True)
                surplus = sum(c.output_surplus(self._model) for c in (chains, mtp_chains) if c is not None)
            finally:
                if mtp:
                    lc.llama_free(mtp)
                lc.llama_free(ctx)
                for used in (mtp_chains, chains):
                    if used is not None:
                        used.free()
            log = self.load_log + "".join(lines)
        allocations = at_start(replace(parse_allocations(log), breakdown=by_buffer or {}), surplus)
        n_layer = int(lc.llama_model_n_layer(self._model))
        all_offloaded = settings.n_gpu_layers < 0 or settings.n_gpu_layers > n_layer
        allocations = pinned_norms.as_allocated(  # the later cards of a split as llama.cpp really reserves them
            allocations, log, all_offloaded=all_offloaded, n_embd=int(lc.llama_model_n_embd(self._model)),
            n_tokens=pinned_norms.prompt_batch_tokens(int(n_ctx), settings.n_ubatch, int(n_seq)))
        return DryRun(allocations, self.size, self.n_params, int(n_ctx), int(n_ctx_seq), int(n_seq), log)

    def _load_target(self, path: str, placement: Params, *, rpc=None) -> None:
        """The target an EAGLE3 head borrows its token embeddings and output from, loaded with no_alloc, and one
        small context of it (the head's graph reads the target's tensors, not its context's sizes). Its log is
        kept apart: none of its buffers are the head's."""
        lc = self._lc
        with captured_log() as lines:
            params, _keep = model_params(placement, no_alloc=True, rpc=rpc)
            self._target_model = lc.llama_model_load_from_file(os.fsencode(path), params)
            if not self._target_model:
                raise EngineError(f"{path}: llama.cpp could not load the draft head's target "
                                  f"({error_reason(lines, 'no reason logged')})")
            small = Params(n_ctx=256, n_batch=256, n_ubatch=256, n_threads=1)
            self._target_ctx = lc.llama_init_from_model(self._target_model, context_params(small))
            if not self._target_ctx:
                raise EngineError(f"{path}: llama.cpp could not create a context of the draft head's target "
                                  f"({error_reason(lines, 'no reason logged')})")

    def close(self) -> None:
        if self._target_ctx:
            self._lc.llama_free(self._target_ctx)
            self._target_ctx = None
        if self._target_model:
            self._lc.llama_model_free(self._target_model)
            self._target_model = None
        if getattr(self, "_model", None):
            self._lc.llama_model_free(self._model)
            self._model = None


class Session(_Closing):
    """A real model and context (weights loaded, KV allocated), for timed decoding in this process."""

    def __init__(self, path: str, settings: Params, *, rpc=None, threadpool: bool = False,
                 draft: tuple[str, Params, "list[str] | None"] | None = None, on_progress=None):
        lc = llama_module()
        self._lc = lc
        self.settings = settings
        self._model = None
        self._ctx = None
        self._draft_model = self._draft_ctx = self._draft_chains = None
        with captured_log() as lines:
            params, _keep = model_params(settings, no_alloc=False, rpc=rpc, on_progress=on_progress)
            self._model = lc.llama_model_load_from_file(os.fsencode(path), params)
            if not self._model:
                raise EngineError(f"llama.cpp could not load {path} ({error_reason(lines, 'no reason logged')})")
            self._ctx = lc.llama_init_from_model(self._model, context_params(settings))
            self._mtp = self._mtp_chains = None
            if not self._ctx:
                reason = error_reason(lines, "no reason logged")
                self.close()
                raise EngineError(f"llama.cpp could not create the context: {reason}")
            try:
                self._mtp, self._mtp_chains = mtp_context(lc, self._model, self._ctx, settings)  # as llama-server
                if draft is not None:  # on its own devices (-devd) where given, else the target's
                    self._load_draft(draft[0], draft[1], rpc=rpc if draft[2] is None else draft[2],
                                     on_progress=on_progress)
            except EngineError as exc:
                self.close()
                raise EngineError(f"{exc}: {error_reason(lines, 'no reason logged')}") from None
            self.log = "".join(lines)
        self._threadpool = None
        if threadpool:  # as llama-bench: one threadpool, attached for decode and batch
            self._threadpool, self._free_threadpool = attach_threadpool(settings)
            lib = lc.llama_cpp._lib
            lib.llama_attach_threadpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            lib.llama_attach_threadpool(self._ctx, self._threadpool, None)
        surplus = sum(c.output_surplus(m) for c, m in ((self._mtp_chains, self._model),
                                                        (self._draft_chains, self._draft_model)) if c is not None)
        self.allocations = at_start(parse_allocations(self.log), surplus)  # llama-server's buffers at its start
        self.n_ctx = int(lc.llama_n_ctx(self._ctx))
        self.n_batch = int(lc.llama_n_batch(self._ctx))
        self.model_size_bytes = int(lc.llama_model_size(self._model))
        self.n_params = int(lc.llama_model_n_params(self._model))
        self.model_desc = self._desc()
        vocab = lc.llama_model_get_vocab(self._model)
        self.n_vocab = int(lc.llama_vocab_n_tokens(vocab))
        self.rolls_back = not (lc.llama_model_is_recurrent(self._model) or lc.llama_model_is_hybrid(self._model))
        self.position = 0
        self._next_token = 0

    def _desc(self) -> str:
        buf = ctypes.create_string_buffer(256)
        self._lc.llama_model_desc(self._model, buf, 256)
        return buf.value.decode("utf-8", errors="replace")

    def _tokens(self, n: int):
        first = 3 if self.n_vocab > 3 else 0
        span = max(1, self.n_vocab - first)
        ids = [first + (self._next_token + i * 7919) % span for i in range(n)]
        self._next_token += n
        return (self._lc.llama_token * n)(*ids)

    def decode(self, n_tokens: int, *, on_chunk=None) -> None:
        """Decode n_tokens of prompt in batches of n_batch (logits for the last token only)."""
        lc = self._lc
        done = 0
        while done < n_tokens:
            n = min(self.n_batch, n_tokens - done)
            tokens = self._tokens(n)  # keep a reference while llama_decode reads it
            rc = lc.llama_decode(self._ctx, lc.llama_batch_get_one(tokens, n))
            if rc != 0:
                raise EngineError(f"llama_decode returned {rc} at position {self.position} "
                                  "(context full or out of memory)")
            done += n
            self.position += n
            if on_chunk:
                on_chunk(n)
        lc.llama_synchronize(self._ctx)

    def generate(self, n_tokens: int) -> None:
        """Decode n_tokens one at a time, as text generation does (sampling left out)."""
        lc = self._lc
        for _ in range(n_tokens):
            token = self._tokens(1)
            rc = lc.llama_decode(self._ctx, lc.llama_batch_get_one(token, 1))
            if rc != 0:
                raise EngineError(f"llama_decode returned {rc} at position {self.position}")
            self.position += 1
        lc.llama_synchronize(self._ctx)

    def snapshot(self):
        """The state of sequence 0 at the current position (KV cells and recurrent state)."""
        lc = self._lc
        if self.rolls_back:
            return self.position
        if self.position == 0:
            return (0, None, 0)
        size = lc.llama_state_seq_get_size(self._ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = lc.llama_state_seq_get_data(self._ctx, buf, size, 0)
        if written != size:
            raise EngineError(f"llama_state_seq_get_data wrote {written} of {size} bytes")
        return (self.position, buf, size)

    def restore(self, snap) -> None:
        lc = self._lc
        if self.rolls_back:
            ok = lc.llama_memory_seq_rm(lc.llama_get_memory(self._ctx), 0, snap, -1)
            if not ok:
                raise EngineError("llama_memory_seq_rm could not roll the sequence back")
            self.position = snap
            return
        position, buf, size = snap
        if position == 0:
            self.clear()
            return
        lc.llama_memory_seq_rm(lc.llama_get_memory(self._ctx), 0, -1, -1)
        if lc.llama_state_seq_set_data(self._ctx, buf, size, 0) == 0:
            raise EngineError("llama_state_seq_set_data failed to restore the sequence")
        self.position = position

    def clear(self) -> None:
        self._lc.llama_memory_clear(self._lc.llama_get_memory(self._ctx), True)
        self.position = 0

    def _load_draft(self, path: str, params: Params, *, rpc=None, on_progress=None) -> None:
        """llama-server's draft model (-md) and its context, on `rpc`'s devices (common/speculative.cpp:2538-2556)."""
        lc = self._lc
        draft_params, _keep = model_params(params, no_alloc=False, rpc=rpc, on_progress=on_progress)
        self._draft_model = lc.llama_model_load_from_file(os.fsencode(path), draft_params)
        if not self._draft_model:
            raise EngineError(f"llama.cpp could not load the draft model {path}")
        self._draft_ctx, self._draft_chains = draft_context(lc, self._draft_model, params, self._ctx)
        if not self._draft_ctx:
            raise EngineError("llama.cpp could not create the draft model's context")

    def close(self) -> None:
        if getattr(self, "_draft_ctx", None):
            self._lc.llama_free(self._draft_ctx)
            self._draft_ctx = None
        if getattr(self, "_draft_model", None):
            self._lc.llama_model_free(self._draft_model)
            self._draft_model = None
        if getattr(self, "_mtp", None):
            self._lc.llama_free(self._mtp)
            self._mtp = None
        for name in ("_draft_chains", "_mtp_chains"):  # after their contexts
            if getattr(self, name, None) is not None:
                getattr(self, name).free()
                setattr(self, name, None)
        if self._ctx:
            self._lc.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "attach_threadpool", None):
            self._free_threadpool(self._threadpool)
            self._threadpool = None
        if self._model:
            self._lc.llama_model_free(self._model)
            self._model = None
