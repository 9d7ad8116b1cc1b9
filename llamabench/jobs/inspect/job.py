"""The `inspect` job: the layer layout and the theoretical KV / recurrent footprint, from the GGUF's metadata.

Reads the model's header only (a file, a URL's first bytes, or a catalog id's twin); never loads llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...core.errors import LlamabenchError, UsageError
from ...memory import speculative
from ...memory.footprint import KvPoint, kv_curve
from ...memory.inspection import Inspection, draft_footprint
from ...memory.inspection import inspect as inspect_metadata
from ...memory.runtimes import RuntimeConfig
from ...records.bench import BenchRecord
from ...records.inspect import InspectRecord
from ...records.quality import QualityRecord
from ...settings.params import Params
from ...settings.sweep import params_from
from ..arguments import call_values
from ..fit.options import runtime_config
from ..source import ModelSource, resolve
from ..twin.shape import file_in_quant, published_weights

INSPECT_PARAMS = ("n_ctx", "type_k", "type_v", "flash_attn", "n_seq", "kv_unified", "swa_full", "n_batch",
                  "n_ubatch", "n_rs_seq", "spec_type", "spec_draft_n_max", "type_k_draft", "type_v_draft")


@dataclass(frozen=True)
class Inspected:
    source: ModelSource
    inspection: Inspection
    kv_curve: tuple[KvPoint, ...]


def draft_argument(model_draft) -> str:
    text = str(model_draft).strip()
    if not text:
        raise UsageError("-md: give the draft model (a GGUF file, a URL or a catalog id)")
    return text


def runtime_params(params: dict[str, Any], runtime=None, model_draft=None) -> tuple[Params, RuntimeConfig]:
    """The context `runtime` creates (llama-server by default, as fit sizes it: its 4 unified slots unless -np
    or -kvu say otherwise), from an API call's or the command line's parameters; --swa-full where given; with a
    draft model (-md) llama-server's --spec-type draft-simple."""
    given = {k: v for k, v in params.items() if v is not None}
    values = call_values(given, INSPECT_PARAMS)
    config = runtime_config(runtime, n_seq=given.get("n_seq"), kv_unified=given.get("kv_unified") or None)
    if model_draft is not None:
        if not config.is_server:
            raise UsageError("-md is llama-server's draft model: Llama() decodes without one",
                             hint="use --runtime llama-server, or leave out -md")
        if values["spec_type"] not in (speculative.NONE, *speculative.DRAFT_MODEL_TYPES):
            raise UsageError(f"-md is a draft model of its own (--spec-type draft-simple, or draft-eagle3 for an "
                             f"EAGLE3 head), not {values['spec_type']}")
        if values["spec_type"] == speculative.NONE:
            values["spec_type"] = speculative.SIMPLE
    p = config.context(params_from(values))
    return (p.replace(swa_full=values["swa_full"]) if "swa_full" in given else p), config


def inspect_model(model: str, params: dict[str, Any], runtime=None, model_draft=None,
                  quant: str | None = None) -> Inspected:
    """The inspection of MODEL with these parameters in the context `runtime` creates (and a draft model's beside
    it), and KV against n_ctx up to the trained context; `quant`: the weights in that quant."""
    p, config = runtime_params(params, runtime, model_draft)
    source = resolve(model)
    result = inspect_metadata(source.metadata, p, source.entry, draft_model=model_draft is not None)
    if quant is not None:
        weighed = file_in_quant(source, quant) if source.path or source.url else published_weights(source, quant)
        total = weighed.scale or weighed.meta.weights_bytes
        result = replace(result, weights_bytes=total, n_tensors=len(weighed.meta.tensors), weights_basis=weighed.basis)
    if model_draft is not None:
        draft = resolve(draft_argument(model_draft))
        result = replace(result, draft=draft_footprint(draft.label, draft.metadata, result.footprint.params))
    said = config.describe(result.geometry).split(", prompt cache")[0]  # the context's part; fit adds the RAM
    result = replace(result, runtime=f"{said}, as `fit` sizes it (-np 1 or --runtime llama-cpp-python: one sequence)"
                     if config.is_server else said)
    top = max(result.geometry.n_ctx_train, result.footprint.shape.n_ctx)
    return Inspected(source, result, kv_curve(result.geometry, result.footprint.params, top))


def quant_argument(quant) -> str | None:
    """--quant as the API takes it: None, or a non-empty name."""
    if quant is None:
        return None
    if not isinstance(quant, str) or not quant.strip():
        raise UsageError(f"quant: a quant's name, e.g. Q4_K_M (not {quant!r})")
    longest = max(quant.split(","), key=len)
    if len(longest.strip()) > MAX_QUANT_NAME:
        raise UsageError(f"--quant: a name of {len(longest.strip()):,} characters ({longest.strip()[:24]!r}...): a "
                         f"quant is named in a few (Q4_K_M, UD-Q4_K_XL), {MAX_QUANT_NAME} at most")
    return quant.strip()


MAX_QUANT_NAME = 100  # characters of one --quant name (the tags hf_pick takes are as long)


def inspect_record(model: str, params: dict[str, Any], runtime=None, model_draft=None,
                   quant: str | None = None) -> InspectRecord:
    """`inspect`'s answer as its record."""
    found = inspect_model(model, params, runtime, model_draft, quant)
    return InspectRecord(model=found.source.model_block(found.inspection.geometry.architecture),
                         inspection=found.inspection, kv_curve=found.kv_curve)


def inspection_of_run(record: BenchRecord | QualityRecord) -> InspectRecord:
    """The inspect record a bench's or a quality run's results leave out, from the model its records name (a catalog
    id's twin: the id; a file: its path), at the run's parameters. Metadata only: nothing runs."""
    model = record.model.label if record.model.is_twin else (record.model.path or record.model.label)
    p = record.params
    try:
        return inspect_record(model, {"n_ctx": p.n_ctx, "type_k": p.type_k, "type_v": p.type_v,
                                      "flash_attn": p.flash_attn, "n_seq": p.n_seq, "kv_unified": p.kv_unified,
                                      "swa_full": p.swa_full})  # the run's own context
    except LlamabenchError as exc:
        raise LlamabenchError(f"{record.model.label}: the results hold no inspect record, and the model they name "
                              f"cannot be read again ({exc})",
                              hint="run `llamabench inspect MODEL --results FILE` for this model") from None
