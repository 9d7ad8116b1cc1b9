"""A text scored as llama-perplexity scores it, the base and every lossy choice in lockstep (in the child).

tools/perplexity/perplexity.cpp (`perplexity` with --kl-divergence-base, then `kl_divergence`): the text is
tokenized with the vocabulary's BOS (common_tokenize, add_special), cut into chunks of n_ctx tokens, the first token
of each chunk made BOS where the vocabulary adds one, the cache cleared between chunks, and only the second half of
each chunk scored (logits at positions n_ctx/2 .. n_ctx-2, each predicting the next token).

llama-perplexity runs the base once and writes every scored token's log-probs to a file (n_vocab uint16 a token,
8 GiB a chunk at 32k with a 262k vocabulary), then runs each choice against it, holding a chunk's logits in RAM
(n_ctx/2 x n_vocab floats). Here the base's context and every choice's context decode the same tokens side by
side, a few rows at a time: the base's rows are made compact (the same uint16 form, llama.logprobs) and every
choice is compared against them at once, so nothing vocab-sized outlives a decode call. The rows of one call are
bounded (`rows_per_decode`) so that the logits of every context (llama.cpp's output buffer and the graph's logits
tensor) stay within LOGITS_BUDGET_BYTES; the unscored half decodes in whole batches, as llama-perplexity.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Callable

import numpy as np

from ..core.errors import EngineError
from ..memory.divergence import n_chunks, quality_stats
from ..settings.params import Params
from . import logprobs
from .binding import captured_log, error_reason, llama_module
from .engine import _Closing
from .llama_params import context_params, model_params

LOGITS_BUDGET_BYTES = 512 * 1024 * 1024  # the logits of one decode call, every context together, twice each
ROWS_STEP = 32


def rows_per_decode(n_vocab: int, n_contexts: int, n_ubatch: int) -> int:
    """Scored rows per decode call: as many as the budget allows (a multiple of 32, at least 32), and never more than
    n_ubatch (the context's min(n_ubatch, n_batch)): llama_decode takes at most n_batch tokens a call
    (llama-context.cpp:1785, GGML_ASSERT(n_tokens_all <= cparams.n_batch)), and llama-perplexity decodes a chunk
    in calls of n_batch tokens whatever n_batch is (perplexity.cpp:1722-1723, 1786-1787): -b 8 is 8 a call."""
    fits = LOGITS_BUDGET_BYTES // (2 * 4 * n_vocab * n_contexts)
    return min(n_ubatch, max(ROWS_STEP, fits // ROWS_STEP * ROWS_STEP))


def tokenize(lc, vocab, text: str) -> np.ndarray:
    """The text's tokens as llama-perplexity makes them (common_tokenize: add_special, no special parsing)."""
    data = text.encode("utf-8")
    cap = len(data) + 16
    buf = (lc.llama_token * cap)()
    n = lc.llama_tokenize(vocab, data, len(data), buf, cap, True, False)
    if n < 0:
        raise EngineError(f"llama.cpp could not tokenize the text ({n})")
    return np.ctypeslib.as_array(buf)[:n].astype(np.int32)


def text_tokens(path: str, text: str, base_path: str | None = None) -> tuple[int, int, int, int | None]:
    """(tokens of the text, n_vocab, trained context, the base's n_vocab or None), from vocabularies alone."""
    lc = llama_module()
    params = lc.llama_model_default_params()
    params.vocab_only = True
    found = []
    with captured_log() as lines:
        for p in (path, base_path):
            if p is None:
                found.append(None)
                continue
            model = lc.llama_model_load_from_file(os.fsencode(p), params)
            if not model:
                raise EngineError(f"llama.cpp could not load {p} ({error_reason(lines, 'no reason logged')})")
            try:
                vocab = lc.llama_model_get_vocab(model)
                n_tokens = len(tokenize(lc, vocab, text)) if p == path else 0
                found.append((n_tokens, int(lc.llama_vocab_n_tokens(vocab)), int(lc.llama_model_n_ctx_train(model))))
            finally:
                lc.llama_model_free(model)
    (n_tokens, n_vocab, n_ctx_train), base = found
    return n_tokens, n_vocab, n_ctx_train, base[1] if base else None


class _Batch:
    """One llama_batch reused for every call and every context (the same tokens go to each)."""

    def __init__(self, lc, capacity: int):
        self._lc = lc
        self.batch = lc.llama_batch_init(capacity, 0, 1)
        self.capacity = capacity

    def fill(self, tokens: np.ndarray, first_pos: int, outputs_from: int) -> int:
        """The tokens at positions first_pos.., logits for those at `outputs_from` and after; their count."""
        b = self.batch
        n = len(tokens)
        for i in range(n):
            b.token[i] = int(tokens[i])
            b.pos[i] = first_pos + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = first_pos + i >= outputs_from
        b.n_tokens = n
        return sum(first_pos + i >= outputs_from for i in range(n))

    def free(self) -> None:
        if self.batch is not None:
            self._lc.llama_batch_free(self.batch)
            self.batch = None


class Scoring(_Closing):
    """The model (and the base model, where the choice is the weights), and a context for the base and each choice."""

    def __init__(self, path: str, base_path: str | None, settings: Params, choices: list[tuple[str, str]], *,
                 rpc=None, on_progress=None):
        lc = llama_module()
        self._lc = lc
        self._models: list = []
        self._contexts: list = []
        self._batch = None
        with captured_log() as lines:
            params, _keep = model_params(settings, no_alloc=False, rpc=rpc, on_progress=on_progress)
            model = self._load(path, params, lines)
            base_model = self._load(base_path, params, lines) if base_path else model
            self.vocab = lc.llama_model_get_vocab(model)
            self.n_vocab = int(lc.llama_vocab_n_tokens(self.vocab))
            base_vocab = int(lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(base_model)))
            if base_vocab != self.n_vocab:
                self.close()
                raise EngineError(f"the base model has another vocabulary ({base_vocab:,} tokens against the model's "
                                  f"{self.n_vocab:,}): KL divergence compares the same tokens")
            if lc.llama_vocab_get_add_eos(self.vocab):
                self.close()
                raise EngineError("this vocabulary adds EOS to every text: llama-perplexity refuses it too")
            self.n_ctx_train = int(lc.llama_model_n_ctx_train(model))
            n_ctx = settings.n_ctx
            n_batch = min(settings.n_batch, n_ctx)
            self.rows = rows_per_decode(self.n_vocab, 1 + len(choices), min(settings.n_ubatch, n_batch))
            ctx_settings = settings.replace(n_batch=n_batch, n_ubatch=min(settings.n_ubatch, n_batch), n_seq=1,
                                            n_outputs_max=self.rows)
            self.settings = ctx_settings
            for owner, (type_k, type_v) in [(base_model, ("f16", "f16"))] + [(model, c) for c in choices]:
                ctx = lc.llama_init_from_model(owner, context_params(ctx_settings.replace(type_k=type_k,
                                                                                            type_v=type_v)))
                if not ctx:
                    reason = error_reason(lines, "no reason logged")
                    self.close()
                    raise EngineError(f"llama.cpp could not create the {type_k}/{type_v} context: {reason}")
                self._contexts.append(ctx)
        self.threads = settings.n_threads or max(1, os.cpu_count() or 1)
        self._batch = _Batch(lc, max(n_batch, self.rows))

    def _load(self, path: str, params, lines):
        model = self._lc.llama_model_load_from_file(os.fsencode(path), params)
        if not model:
            self.close()
            raise EngineError(f"llama.cpp could not load {path} ({error_reason(lines, 'no reason logged')})")
        self._models.append(model)
        return model

    def tokenize(self, text: str) -> np.ndarray:
        return tokenize(self._lc, self.vocab, text)

    def _decode(self, ctx, what: str) -> None:
        rc = self._lc.llama_decode(ctx, self._batch.batch)
        if rc != 0:
            raise EngineError(f"llama_decode returned {rc} in the {what} context (out of memory?)")

    def _logits(self, ctx) -> int:
        return ctypes.cast(self._lc.llama_get_logits(ctx), ctypes.c_void_p).value

    def score(self, tokens: np.ndarray, chunks_asked: int | None, *, on_chunk: Callable, on_step: Callable) -> None:
        """Every chunk through every context; after each, `on_chunk(done, total, seconds, stats)` with each choice's
        statistics so far (llama.divergence.QualityStats); `on_step(chunk, tokens done, n_ctx, seconds)` after each
        decode call."""
        lc = self._lc
        n_ctx = self.settings.n_ctx
        total = n_chunks(len(tokens), n_ctx, chunks_asked)
        first = n_ctx // 2
        add_bos = bool(lc.llama_vocab_get_add_bos(self.vocab))
        bos = int(lc.llama_vocab_bos(self.vocab))
        width = logprobs.row_width(self.n_vocab)
        base_rows = np.empty((self.rows, width), dtype=np.uint16)
        choices = [logprobs.ChoiceSums() for _ in self._contexts[1:]]
        start = time.perf_counter()
        for chunk in range(total):
            window = tokens[chunk * n_ctx:(chunk + 1) * n_ctx].copy()
            if add_bos:
                window[0] = bos
            for ctx in self._contexts:
                lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
            pos = 0
            while pos < n_ctx:
                step = self.settings.n_batch if pos < first else self.rows
                end = min(pos + step, first if pos < first else n_ctx)
                n_out = self._batch.fill(window[pos:end], pos, first)
                self._decode(self._contexts[0], "base")
                next_tokens = window[max(pos, first) + 1:end + 1]
                scored = min(n_out, len(next_tokens))  # the last position predicts nothing in the chunk
                if scored:
                    logprobs.base_rows(self.n_vocab, self._logits(self._contexts[0]), next_tokens[:scored],
                                       base_rows[:scored], self.threads)
                for ctx, sums in zip(self._contexts[1:], choices):
                    self._decode(ctx, "choice")
                    if scored:
                        sums.add(self.n_vocab, self._logits(ctx), next_tokens[:scored], base_rows[:scored],
                                 self.threads)
                pos = end
                on_step(chunk + 1, pos, n_ctx, time.perf_counter() - start)
            stats = tuple(quality_stats(s.sums(), np.sort(s.all_kld())) for s in choices)
            on_chunk(chunk + 1, total, time.perf_counter() - start, stats)

    def close(self) -> None:
        if getattr(self, "_batch", None) is not None:
            self._batch.free()
            self._batch = None
        for ctx in getattr(self, "_contexts", []):
            self._lc.llama_free(ctx)
        self._contexts = []
        for model in getattr(self, "_models", []):
            self._lc.llama_model_free(model)
        self._models = []
