"""The `verify` job: theory against llama.cpp's own `llama_kv_cache: size` / `llama_memory_recurrent: size`
lines, from no_alloc dry runs (sizes, nothing timed): one context, or the exactness matrix."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any

from ...core.errors import UnsupportedArchitecture
from ...llama.worker import dry_runs
from ...memory import speculative
from ...memory.allocations import Allocations
from ...memory.footprint import Footprint, compute_footprint
from ...memory.inspection import draft_footprint
from ...memory.inspection import inspect as inspect_metadata
from ...memory.verification import Check, MatrixCell, MatrixResult, compare, describe, matrix_params
from ...model.architectures import no_rule_line, no_rule_reason
from ...model.layout import has_layout_rule
from ...records.inspect import VerifyRecord
from ...settings.params import Params
from ..inspect.job import draft_argument, runtime_params
from ..source import ModelSource, resolve


@dataclass(frozen=True)
class Verified:
    source: ModelSource
    architecture: str
    gguf: str  # the file llama.cpp sized
    params: Params  # n_ctx as llama.cpp rounded it
    footprint: Footprint | None  # None: no layout rule (`no_rule` says why), llama.cpp's own sizes only
    allocations: Allocations
    checks: tuple[Check, ...]
    context_warning: str | None = None
    no_rule: str = ""


def verify_model(model: str, params: dict[str, Any], runtime=None, model_draft=None) -> Verified:
    """One dry run of MODEL with these parameters (inspect's, in the context `runtime` creates, llama-server's by
    default), its allocations checked against the theory; an architecture without a layout rule gets llama.cpp's
    own sizes, measured, with nothing to check them against. With a draft model (-md) its own context beside the
    target's is dry-run too, and its checks follow the target's ("draft: ...")."""
    p, _ = runtime_params(params, runtime, model_draft)
    source = resolve(model)
    speculative.check_not_a_head(source.metadata.architecture, source.label, "verify")
    if not has_layout_rule(source.metadata):
        path = source.gguf_for_llama()
        dry = dry_runs(str(path), [p])[0]
        return Verified(source, source.metadata.architecture, str(path), p, None, dry.allocations, (),
                        no_rule=no_rule_reason(source.metadata.architecture))
    # validates the parameters before llama.cpp runs
    result = inspect_metadata(source.metadata, p, source.entry, draft_model=model_draft is not None)
    fp = result.footprint
    path = source.gguf_for_llama()
    sized = fp.params.replace(n_ctx=fp.shape.n_ctx)  # with the rollback planes a --spec-type adds
    dry = dry_runs(str(path), [sized])[0]
    checks = compare(fp, dry.allocations)
    if model_draft is not None:
        checks += draft_checks(draft_argument(model_draft), sized, str(path))
    return Verified(source, result.geometry.architecture, str(path), sized, fp, dry.allocations, checks,
                    result.context_warning)


def draft_checks(model_draft: str, target: Params, target_path: str) -> tuple[Check, ...]:
    """The draft model's context (speculative.draft_context of the target's), llama.cpp's dry run against theory;
    an EAGLE3 head's made against its target (`target_path`), as llama-server makes it."""
    draft = resolve(model_draft)
    if not has_layout_rule(draft.metadata):
        raise UnsupportedArchitecture(f"-md {draft.label}: {no_rule_line(draft.metadata.architecture)}",
                                      hint="verify the draft model on its own")
    sized = draft_footprint(draft.label, draft.metadata, target)
    settings = sized.footprint.params.replace(n_ctx=sized.footprint.shape.n_ctx)
    head = target.spec_type == speculative.EAGLE3
    dry = dry_runs(str(draft.gguf_for_llama()), [settings], target_path=target_path if head else None)[0]
    return tuple(replace(c, component=f"draft: {c.component}") for c in compare(sized.footprint, dry.allocations))


def exactness_matrix(model: str) -> MatrixResult:
    """n_ctx 4096 / 131072 / 5000 x f16, q8_0, q4_0 and fa off x 1 and 4 sequences (unified or not) x swa_full."""
    start = time.perf_counter()
    source = resolve(model)
    if not has_layout_rule(source.metadata):
        raise UnsupportedArchitecture(f"{source.label}: --matrix checks the theory against llama.cpp, and "
                                      f"{no_rule_line(source.metadata.architecture)}",
                                      hint="verify without --matrix shows llama.cpp's own sizes")
    path = str(source.gguf_for_llama())
    geometry = source.llama_geometry()
    cells = matrix_params(geometry.has_swa, bool(geometry.mtp_layers))
    out = []
    for p, dry in zip(cells, dry_runs(path, cells)):
        checks = compare(compute_footprint(geometry, p), dry.allocations)
        out.append(MatrixCell(p, tuple(f"{describe(p)}: {c.mismatch()}" for c in checks if not c.ok)))
    st = os.stat(path)
    return MatrixResult(model, path, st.st_size, st.st_blocks * 512, time.perf_counter() - start, tuple(out))


def verify_record(model: str, params: dict[str, Any], runtime=None, model_draft=None) -> VerifyRecord:
    """`verify`'s answer as its record."""
    found = verify_model(model, params, runtime, model_draft)
    return VerifyRecord(model=found.source.model_block(found.architecture, loaded=found.gguf), params=found.params,
                        footprint=found.footprint, allocations=found.allocations, checks=found.checks,
                        gguf=found.gguf, context_warning=found.context_warning, no_rule=found.no_rule)
