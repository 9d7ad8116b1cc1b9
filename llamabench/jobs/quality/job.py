"""`quality`: each lossy choice scored against its base on a natural text, one child per context.

A KV type is scored against the same model with an f16 cache; the model's weights against `--base-model`'s logits
(both with f16 KV, and any quantized KV of the model on top). The child (llama.scoring) runs the base and every
choice side by side and reports every choice's statistics after each chunk, so a run stopped half way (Ctrl-C, a
crash, an out-of-memory) keeps the chunks it finished: the rows say how many, and why not all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...core import cache_types
from ...core.errors import UsageError
from ...llama.messages import QualityChunk, QualityJob, QualityStep, QualityText
from ...llama.worker import run_job, text_tokens
from ...records.quality import F16_BASE, QualityRow, ScoredTextRef
from ...settings.params import Params
from ...settings.sweep import cache_pairs
from ...world.texts import ScoredText, read_text
from ..arguments import call_values
from ..source import ModelSource, resolve

QUALITY_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_batch", "n_ubatch", "n_threads", "repack",
                  "n_gpu_layers", "n_cpu_moe", "tensor_split", "split_mode", "main_gpu")
QUALITY_LISTS = ("n_ctx", "type_k", "type_v")
QUALITY_N_CTX = 4096  # without -c: a context every small model takes, and the text holds many chunks of
# the least -c that scores a token: llama-perplexity scores positions n_ctx/2 .. n_ctx-2 of a chunk, n_ctx - 1 - n_ctx/2
# of them (tools/perplexity/perplexity.cpp:1738 and 1772, `first = n_ctx/2`, 1849; divergence.scored_per_chunk):
# -c 3 scores one, -c 2 none, and its statistics are NaN (llama-perplexity -c 2 prints "[1]-nan")
QUALITY_MIN_N_CTX = 3
ALL_LAYERS = 99
DEFAULT_CHOICES = (("q8_0", "q8_0"), ("q4_0", "q4_0"))  # without -ctk / -ctv and no base model: fit's lossy types

Notify = Callable[[str, dict], None]  # ("warning" | "context" | "text" | "step" | "chunk", data)


@dataclass(frozen=True)
class QualityPlan:
    source: ModelSource
    base: ModelSource | None
    params: Params  # every setting but n_ctx and the KV types, which are the plan's
    contexts: tuple[int, ...]
    choices: tuple[tuple[str, str], ...]
    text: ScoredText
    chunks: int | None
    rpc: tuple[str, ...] | None
    n_tokens: int = 0  # the text's tokens in the model's vocabulary
    n_ctx_train: int = 0

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(w for c in self.contexts if (w := beyond_training(c, self.n_ctx_train)))

    @property
    def base_label(self) -> str:
        return self.base.label if self.base is not None else F16_BASE


@dataclass(frozen=True)
class ContextOutcome:
    """One context's rows (every choice, measured or not), and what the child said of the text and the model."""

    n_ctx: int
    rows: tuple[QualityRow, ...]
    text: ScoredTextRef
    n_ctx_train: int = 0
    rows_per_decode: int = 0
    interrupted: bool = False

    @property
    def context_warning(self) -> str | None:
        return beyond_training(self.n_ctx, self.n_ctx_train)


def beyond_training(n_ctx: int, n_ctx_train: int) -> str | None:
    """One line where a context goes past the trained one (llama.cpp allows it, and so does quality)."""
    if n_ctx_train and n_ctx > n_ctx_train:
        return (f"-c {n_ctx:,} exceeds the trained context {n_ctx_train:,}: the divergences measure the model beyond "
                "what it was trained on")
    return None


def _local_file(source: ModelSource, what: str) -> ModelSource:
    if source.path is None:
        raise UsageError(f"{what} {source.label} is a catalog id: quality scores real weights, and a catalog id's "
                         "twin has none (zeros)", hint="give the GGUF file you run")
    if source.url is not None:
        raise UsageError(f"{what} {source.url} is remote: quality runs every weight, so it needs the whole file "
                         "(llama.cpp's -hf downloads it; then give its path)")
    return source


def plan_quality(model: str, given: dict, *, text_file=None, chunks=None, base_model=None,
                 rpc=None) -> QualityPlan:
    """The plan from the API's keywords: UsageError in one line for what cannot be measured."""
    asked_types = any(given.get(name) not in (None, ()) for name in ("type_k", "type_v"))
    values = call_values(given, QUALITY_PARAMS, lists=QUALITY_LISTS)
    contexts = values.pop("n_ctx") if given.get("n_ctx") not in (None, ()) else (QUALITY_N_CTX,)
    values.pop("n_ctx", None)
    if any(c < QUALITY_MIN_N_CTX for c in contexts):
        raise UsageError(f"-c {min(contexts)}: quality scores the second half of each chunk of -c tokens but its last "
                         f"(llama-perplexity's n_ctx - 1 - n_ctx/2), so -c {QUALITY_MIN_N_CTX} is the least that "
                         f"scores one token: give {QUALITY_MIN_N_CTX} or more (0, the trained length, is not taken "
                         "here)")
    type_k, type_v = values.pop("type_k"), values.pop("type_v")
    source = _local_file(resolve(model), "MODEL")
    base = _local_file(resolve(str(base_model)), "--base-model") if base_model else None
    if base is None:
        pairs = cache_pairs(type_k, type_v) if asked_types else list(DEFAULT_CHOICES)
        choices = [p for p in pairs if p != ("f16", "f16")]
        if not choices:
            raise UsageError("nothing lossy to score: f16 KV is the base; give -ctk/-ctv types (q8_0, q4_0...) or "
                             "--base-model REF.gguf to score the weights")
    else:
        choices = cache_pairs(type_k, type_v)
    if given.get("n_gpu_layers") is None:
        values["n_gpu_layers"] = ALL_LAYERS  # as llama-perplexity: every layer on the GPU where there is one
    params = Params(**{k: v for k, v in values.items() if v is not None}).replace(n_seq=1)
    for type_k_, type_v_ in choices:
        if cache_types.is_quantized(type_v_) and not params.flash_attn:
            raise UsageError(f"-ctv {type_v_}: a quantized V cache needs flash attention (-fa on), in llama.cpp too")
    text = read_text(text_file)
    path = str(source.gguf_for_llama())
    tokens = text_tokens(path, text.text, str(base.path) if base else None)
    if base is not None and tokens.base_n_vocab != tokens.n_vocab:
        raise UsageError(f"--base-model {base.label} has another vocabulary ({tokens.base_n_vocab:,} tokens against "
                         f"{tokens.n_vocab:,}): KL divergence compares the same tokens")
    short = [c for c in contexts if c > tokens.n_tokens]
    if short:
        raise UsageError(f"the text is {tokens.n_tokens:,} tokens long in this model's vocabulary; -c {max(short)} "
                         f"needs at least {max(short):,} (one chunk)", hint="a longer text (-f FILE) or a smaller -c")
    return QualityPlan(source, base, params, tuple(contexts), tuple(dict.fromkeys(choices)), text,
                       chunks, tuple(rpc) if rpc else None, tokens.n_tokens, tokens.n_ctx_train)


def run_context(plan: QualityPlan, n_ctx: int, notify: Notify) -> ContextOutcome:
    """One context's rows: the child's last statistics of every choice, with why it stopped where it did not end."""
    job = QualityJob(path=str(plan.source.gguf_for_llama()), params=plan.params.replace(n_ctx=n_ctx),
                     choices=plan.choices, text=plan.text.text, chunks=plan.chunks,
                     base_path=str(plan.base.path) if plan.base else None, rpc=plan.rpc)
    seen: dict = {"text": None, "chunk": None}

    def on_event(event) -> None:
        if isinstance(event, QualityText):
            seen["text"] = event
            notify("text", {"n_ctx": n_ctx, "event": event})
        elif isinstance(event, QualityChunk):
            seen["chunk"] = event
            notify("chunk", {"n_ctx": n_ctx, "event": event})
        elif isinstance(event, QualityStep):
            total = seen["text"].n_chunks if seen["text"] else event.chunk
            notify("step", {"n_ctx": n_ctx, "chunks": total, "event": event})

    interrupted, failure = False, None
    try:
        child = run_job(job, on_event)
        if not child.ok:
            failure = child.failure or "the child process ended before the first chunk"
    except KeyboardInterrupt:
        interrupted, failure = True, "interrupted"
    text_event, chunk = seen["text"], seen["chunk"]
    ref = ScoredTextRef(plan.text.name, plan.text.sha256, plan.text.n_chars,
                        text_event.n_tokens if text_event else 0)
    planned = text_event.n_chunks if text_event else 0
    if chunk is None:
        rows = tuple(QualityRow(n_ctx, k, v, plan.base_label, 0, planned, reason=failure or "no chunk scored")
                     for k, v in plan.choices)
    else:
        reason = None if chunk.done == chunk.total and failure is None else (
            f"{failure or 'stopped'} after {chunk.done} of {chunk.total} chunks")
        rows = tuple(QualityRow.measured(n_ctx, choice, plan.base_label, chunk.done, chunk.total, s, reason)
                     for choice, s in zip(plan.choices, chunk.stats))
    return ContextOutcome(n_ctx, rows, ref, text_event.n_ctx_train if text_event else 0,
                          text_event.rows_per_decode if text_event else 0, interrupted)


def run_quality(plan: QualityPlan, *, save: Callable[[ContextOutcome], None], notify: Notify | None = None) -> bool:
    """Every context in turn, each outcome handed to `save` as it ends; True where it was interrupted (Ctrl-C), after
    the rows measured so far were saved."""
    notify = notify or (lambda kind, data: None)
    for message in plan.warnings:
        notify("warning", {"message": message})
    for index, n_ctx in enumerate(plan.contexts):
        notify("context", {"n_ctx": n_ctx, "index": index, "total": len(plan.contexts)})
        outcome = run_context(plan, n_ctx, notify)
        save(outcome)
        if outcome.interrupted:
            return True
    return False
