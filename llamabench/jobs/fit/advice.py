"""What to run: the llama-server command and the Llama() call of a fit row, and the placement in words.

Part of the fit answer (services), shared by every printer; the command lines are built from the
row's parameters, the same ones `fit --verify` creates.
"""

from __future__ import annotations

from ...core.cache_types import ggml_type_id
from ...core.safe_text import python_str, shell_word
from ...memory.runtimes import PYTHON_N_UBATCH
from ...memory.speculative import spec_flags, uses_draft_model
from ...settings.params import Params
from .result import FitResult
from .search import FitRow, Placement, PlacementKind


def describe_placement(p: Placement, n_layer_all: int) -> str:
    where = describe_one(p, n_layer_all)
    if len(p.split) > 1 and any(p.split):
        where = where.replace("on the card", "on the cards") + f", -ts {','.join(map(str, p.split))}"
    return where


def describe_one(p: Placement, n_layer_all: int) -> str:
    if p.kind is PlacementKind.ALL:
        return "all layers on the card"
    if p.kind is PlacementKind.RAM:
        return "everything in system RAM"
    if p.kind is PlacementKind.N_CPU_MOE:
        return f"experts of layers 0-{p.value - 1} in RAM (--n-cpu-moe {p.value})"
    if p.value > n_layer_all:
        return f"all {n_layer_all + 1} layers on the card (-ngl {p.value})"
    return f"{p.value} of {n_layer_all + 1} layers on the card (-ngl {p.value})"


def short_placement(p: Placement) -> str:
    """For plot labels: the flag alone."""
    flag = {PlacementKind.ALL: "all on cards" if len(p.split) > 1 else "all on card", PlacementKind.RAM: "all in RAM",
            PlacementKind.N_CPU_MOE: f"--n-cpu-moe {p.value}", PlacementKind.NGL: f"-ngl {p.value}"}[p.kind]
    return flag + (f" -ts {','.join(map(str, p.split))}" if len(p.split) > 1 and any(p.split) else "")


def llama_server_command(result: FitResult, row: FitRow) -> str:
    """The llama-server line of a row: every flag that decides what it allocates, the slots and the prompt
    cache spelled out (their defaults surprise), as sized for the llama-server runtime."""
    s, p = row.settings, row.placement
    every = str(max(99, result.n_layer_all + 1))  # all layers, the output layer too, for any depth of model
    ngl = {PlacementKind.ALL: every, PlacementKind.N_CPU_MOE: every, PlacementKind.RAM: "0"}.get(p.kind, str(p.value))
    model = " ".join(map(shell_word, result.model_words)) or f"-m {shell_word(result.model_hint)}"
    cmd = f"llama-server {model} -c {s.n_ctx} -ngl {ngl} -fa {'on' if s.flash_attn else 'off'}"
    cmd += f" -ctk {s.type_k} -ctv {s.type_v}"
    if s.n_batch != Params.n_batch:
        cmd += f" -b {s.n_batch}"
    if s.n_ubatch != Params.n_ubatch:
        cmd += f" -ub {s.n_ubatch}"
    if p.kind is PlacementKind.N_CPU_MOE:
        cmd += f" --n-cpu-moe {p.value}"
    if len(p.split) > 1 and any(p.split):
        cmd += " -ts " + ",".join(map(str, p.split))
    if not s.op_offload:
        cmd += " --no-op-offload"
    draft = ("-md", _draft_words(result.draft_hint)) if uses_draft_model(s.spec_type) and result.draft_hint else ()
    # -devd after --rpc, which registers the devices it names (llama.cpp reads the flags in order)
    devd = ("-devd", result.draft_devices) if draft and result.draft_devices else ()
    return " ".join([cmd, *draft, *spec_flags(s), *map(shell_word, result.server_args), *devd])


def _draft_words(hint: str) -> str:
    """-md's value as shell words: the draft file quoted, the " -ngld N" the hint may end with kept as flags."""
    path, ngld, layers = hint.rpartition(" -ngld ")
    return shell_word(path) + ngld + layers if ngld and layers.isdigit() else shell_word(hint)


def run_line(result: FitResult, row: FitRow) -> str:
    """What to run for this row: the line of the runtime the fit was sized for."""
    return llama_server_command(result, row) if result.runtime.is_server else python_call(result, row)


def python_call(result: FitResult, row: FitRow) -> str:
    if row.placement.kind is PlacementKind.N_CPU_MOE:
        # Llama() has no tensor buffer overrides, so it cannot keep experts in RAM: offer the -ngl row
        alt = [x for x in result.rows if x.budget_label == row.budget_label and x.settings == row.settings
               and x.placement.kind is PlacementKind.NGL and x.fits]
        if not alt:
            return "# llama_cpp.Llama() cannot keep experts in RAM (no tensor buffer overrides): use llama-server"
        return python_call(result, alt[0]) + "  # Llama() cannot keep experts in RAM: fewer layers on the card instead"
    s, p = row.settings, row.placement
    ngl = {PlacementKind.ALL: "-1", PlacementKind.RAM: "0"}.get(p.kind, str(p.value))
    batch = f", n_ubatch={s.n_ubatch}" if s.n_ubatch != PYTHON_N_UBATCH else ""
    if len(p.split) > 1 and any(p.split):
        batch += f", tensor_split=[{', '.join(str(float(n)) for n in p.split)}]"
    if "-sm" in result.server_args:  # -sm none -mg N
        batch += f", split_mode=0, main_gpu={result.server_args[result.server_args.index('-mg') + 1]}"
    if not s.op_offload:
        batch += ", op_offload=False"

    return (f'{_python_model(result)}, n_ctx={s.n_ctx}, n_gpu_layers={ngl}, '
            f"flash_attn={s.flash_attn}, type_k={ggml_type_id(s.type_k)}, type_v={ggml_type_id(s.type_v)}{batch}, "
            f"swa_full=False)")


def _python_model(result: FitResult) -> str:
    """Llama() opening the model: its path, or from_pretrained for a file of a Hugging Face repository (-hf)."""
    words = result.model_words
    if words[:1] == ("-hf",):  # the file read, by its path in the repository
        repo = words[1].partition(":")[0]
        return (f"llama_cpp.Llama.from_pretrained(repo_id={python_str(repo)}, "
                f"filename={python_str(result.model_hint)}")
    return f"llama_cpp.Llama(model_path={python_str(result.model_hint)}"
