"""Speculative decoding in llama-server: what each --spec-type adds to what the target context allocates.

Pure: the model's layout and the target context's `Params` in; the MTP draft context's parameters and cache,
the target's larger output limits and its rollback planes out. References (the llama.cpp vendored in
llama-cpp-python 0.3.36):
- `--spec-type draft-mtp` loads the model's NextN (MTP) layers, skipped otherwise (`common/common.cpp:1625`
  `mparams.load_mtp`; TENSOR_SKIP in e.g. `src/models/qwen35moe.cpp:41`, `src/models/glm4-moe.cpp:38-40`), and
  creates a second context on the same model, `ctx_type` MTP (`common/speculative.cpp:2514-2580`): n_ctx the
  target's (2530; this llama.cpp has no -cd), the target's slots, unified stream, batches and flash attention,
  K/V of `-ctkd/-ctvd` (default f16, whatever -ctk says: 2478-2479), n_outputs_max = slots, one output a
  sequence (2480-2481), n_rs_seq 0 (2534). Its cache holds the NextN layers only, each on its layer's device
  (`src/llama-model.cpp:2661-2667, 2792-2804`; `src/llama-kv-cache.cpp:217`).
- The target's outputs: `server_output_limits` (`tools/server/server-context.cpp:41-54`) with
  `common_speculative_get_output_limits` (`common/speculative.cpp:2585-2594`): per sequence 1 + n_max, all of
  them slots x that, each at most n_batch; n_max = --spec-draft-n-max for the draft types, the ngram types'
  own (`common_speculative_n_max`, 2315-2349).
- `--spec-type draft-eagle3` with `-md` an EAGLE3 head (arch eagle3): the head is a draft model of its own, its
  context made as the draft model's (the same parameters, ctx_other the target: 2535), whose tok_embd and output it
  borrows where it has none (src/llama-context.cpp:156-163). One decoder layer of KV at the target's cells. Being
  an encoder-decoder, its context reserves n_batch outputs (src/llama-context.cpp:250, src/llama-model.cpp:3310-
  3318), and llama-server hands it one top-k sampler chain a slot on the device (`backend_sampling`, default on:
  common/speculative.cpp:524-537), which the context reserves too: about as much compute again as its logits.
  The MTP context gets the same chains (1401-1414). dflash and dspark heads (block diffusion drafting) are refused.
- Rollback: `need_n_rs_seq` (`common/common.h:396-402`) gives the target n_rs_seq = n_max for draft-mtp,
  eagle3, dflash and dspark; llama.cpp keeps it only for the architectures of `llm_arch_supports_rs_rollback`
  (`src/llama-context.cpp:105-110`), where each sequence's recurrent state gets 1 + n_rs_seq planes
  (`src/llama-memory-recurrent.cpp:101-103`; memory.footprint applies it).
"""

from __future__ import annotations

from dataclasses import replace

from ..core.errors import UsageError
from ..model.geometry import LayerKind, ModelGeometry
from ..settings.params import Params

NONE = "none"
MTP = "draft-mtp"
ROLLBACK_TYPES = frozenset({"draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark"})  # need_n_rs_seq
# common_speculative_n_max (common/speculative.cpp:2315-2349): the ngram types' draft lengths (common/common.h)
NGRAM_N_MAX = {"ngram-simple": 48, "ngram-map-k": 48, "ngram-map-k4v": 48, "ngram-mod": 64, "ngram-cache": 8}
SIMPLE = "draft-simple"  # a draft model of its own (-md), its context beside the target's
EAGLE3 = "draft-eagle3"  # an EAGLE3 head (-md, arch eagle3): a draft model of its own, fed the target's hidden states
DRAFT_MODEL_TYPES = (SIMPLE, EAGLE3)  # the types whose draft is a model of its own (-md)
DRAFT_HEAD_ARCHS = {EAGLE3: "eagle3"}  # the architecture each head type runs (llama-server refuses any other)
# block diffusion draft heads (dflash, dspark): not sized, refused in one line
DIFFUSION_HEADS = frozenset({"draft-dflash", "draft-dspark"})
TOP_K_CHAIN = 10  # the draft sampler chain on the device: top-k 10 (common/speculative.cpp:529, 1405)


def n_max(params: Params) -> int:
    """Tokens drafted per step for this --spec-type (0 without speculative decoding)."""
    if params.spec_type == NONE:
        return 0
    return NGRAM_N_MAX.get(params.spec_type, params.spec_draft_n_max)


def check(geometry: ModelGeometry, params: Params, where: str = "", *, draft_model: bool = False) -> None:
    """A clear UsageError for a --spec-type this model cannot run, or llamabench cannot size."""
    kind = params.spec_type
    if kind in DIFFUSION_HEADS:
        raise UsageError(f"--spec-type {kind} drafts by block diffusion against the target's context: not sized "
                         "by llamabench", hint="size the target alone (--spec-type none), its MTP layer "
                         "(--spec-type draft-mtp), a draft model (-md DRAFT.gguf) or an EAGLE3 head "
                         "(-md HEAD.gguf --spec-type draft-eagle3)")
    if kind in DRAFT_MODEL_TYPES and not draft_model:
        raise UsageError(f"--spec-type {kind} needs the draft model: -md "
                         + ("HEAD.gguf (an EAGLE3 head)" if kind == EAGLE3 else "DRAFT.gguf"),
                         hint="or --spec-type draft-mtp for the model's own MTP layer")
    if draft_model and kind not in (*DRAFT_MODEL_TYPES, NONE):
        raise UsageError(f"-md with --spec-type {kind}: a draft model runs with draft-simple (an EAGLE3 head "
                         "with draft-eagle3)", hint="leave out --spec-type, or -md")
    if kind == MTP and not geometry.mtp_layers:
        what = (f"{where}: " if where else "") + f"{geometry.architecture}"
        raise UsageError(f"{what} has no MTP (NextN) layer outside its main cache "
                         f"({geometry.architecture}.nextn_predict_layers is {geometry.n_layer_nextn}): "
                         "--spec-type draft-mtp does not apply", hint="leave out --spec-type, or use an ngram-* type")


def check_draft(params: Params, architecture: str, label: str) -> None:
    """A clear UsageError where the draft model (-md) is not what this --spec-type runs: llama-server throws for an
    EAGLE3 type whose head is not eagle3 (common/speculative.cpp:500-505), and an EAGLE3 head run as a plain
    draft model has no target features to read."""
    kind = params.spec_type
    wanted = DRAFT_HEAD_ARCHS.get(kind)
    if wanted is not None and architecture != wanted:
        raise UsageError(f"-md {label} is a {architecture} model, not an EAGLE3 head: --spec-type {kind} runs "
                         f"a {wanted} GGUF", hint="leave out --spec-type (the draft model runs as draft-simple)")
    for head_kind, arch in DRAFT_HEAD_ARCHS.items():
        if architecture == arch and kind != head_kind:
            raise UsageError(f"-md {label} is an EAGLE3 head: it runs beside its target with --spec-type "
                             f"{head_kind}, not as a model of its own", hint=f"add --spec-type {head_kind}")
    if architecture in ("dflash", "gemma4-assistant"):
        raise UsageError(f"-md {label} is a {architecture} draft head: not sized by llamabench",
                         hint="size the target alone, or with a draft model of its own")


def check_not_a_head(architecture: str, label: str, command: str) -> None:
    """A clear UsageError for a draft head given as the model: llama.cpp creates its context only against a
    target's (src/llama-context.cpp:146-163)."""
    if architecture in DRAFT_HEAD_ARCHS.values():
        raise UsageError(f"{label} is an EAGLE3 draft head ({architecture}): llama.cpp runs it only beside its "
                         f"target's context", hint=f"{command} TARGET.gguf -md {label} --spec-type draft-eagle3")


def uses_draft_model(kind: str) -> bool:
    """Whether llama-server loads a draft model (-md) for this --spec-type, its context beside the target's."""
    return kind in DRAFT_MODEL_TYPES


def backend_samplers(kind: str) -> bool:
    """Whether the draft context of this --spec-type gets llama-server's sampler chains on the device
    (common/speculative.cpp:524-537 for EAGLE3, 1401-1414 for MTP; draft-simple samples on the CPU)."""
    return kind in (MTP, EAGLE3)


def has_mtp(geometry: ModelGeometry) -> bool:
    return bool(geometry.mtp_layers)


def target_context(params: Params, *, slots: int) -> Params:
    """The target context llama-server creates with this --spec-type: its output limits and rollback planes."""
    per_seq = 1 + n_max(params)
    return params.replace(n_outputs_max=min(params.n_batch, slots * per_seq),
                          n_outputs_max_per_seq=min(params.n_batch, per_seq),
                          n_rs_seq=params.spec_draft_n_max if params.spec_type in ROLLBACK_TYPES else 0)


def draft_context(target: Params) -> Params:
    """The draft context beside `target` (the target's context parameters as llama-server creates them): the MTP
    context on the target's model, or the draft model's own (-md): the same parameters for both
    (common_base_params_to_speculative, common/speculative.cpp:2446-2500; its n_ctx the target's, 2530). An
    EAGLE3 head's keeps --spec-type draft-eagle3, so that the engine gives it its target and its sampler chains."""
    return target.replace(type_k=target.type_k_draft, type_v=target.type_v_draft, n_rs_seq=0,
                          n_outputs_max=min(target.n_batch, target.n_seq), n_outputs_max_per_seq=1,
                          spec_type=EAGLE3 if target.spec_type == EAGLE3 else NONE)


def spec_flags(params: Params) -> tuple[str, ...]:
    """llama-server's speculative decoding flags these parameters were sized with (none: nothing to add)."""
    if params.spec_type == NONE:
        return ()
    flags = ("--spec-type", params.spec_type)
    if params.spec_draft_n_max != Params.spec_draft_n_max and params.spec_type not in NGRAM_N_MAX:
        flags += ("--spec-draft-n-max", str(params.spec_draft_n_max))
    if params.spec_type in (MTP, *DRAFT_MODEL_TYPES) and (params.type_k_draft, params.type_v_draft) != ("f16", "f16"):
        flags += ("-ctkd", params.type_k_draft, "-ctvd", params.type_v_draft)
    return flags


def mtp_geometry(geometry: ModelGeometry) -> ModelGeometry:
    """The MTP context's cache as a layout of its own: the NextN layers, plain attention, no recurrent state."""
    return replace(geometry, layers=geometry.mtp_layers, recurrent_r_width=0, recurrent_s_width=0,
                   index_v_width_max=0, mtp_layers=())


def mtp_layer_indices(geometry: ModelGeometry) -> tuple[int, ...]:
    return tuple(layer.index for layer in geometry.mtp_layers if layer.kind is not LayerKind.NONE)
