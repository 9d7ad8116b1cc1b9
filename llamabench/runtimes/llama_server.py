"""llama.cpp's llama-server, started by the user from the printed line (and by `bench --runtime llama-server`).

The line spells every flag that decides what it allocates, the slots and the prompt cache too (their defaults
surprise): tools/server/server.cpp and common/arg.cpp of the llama.cpp vendored in llama-cpp-python 0.3.36.
"""

from __future__ import annotations

from ..core.safe_text import shell_word
from ..memory.fit_result import FitResult
from ..memory.placement import FitRow, PlacementKind
from ..memory.speculative import spec_flags, uses_draft_model
from ..settings.params import Params
from ..settings.tensor_overrides import printed_flags
from ..settings.values import Runtime
from .runtime import BenchDriver, ProgramRuntime


def llama_server_command(result: FitResult, row: FitRow) -> str:
    """The llama-server line of a row: every flag that decides what it allocates, the slots and the prompt
    cache spelled out (their defaults surprise), as sized for the llama-server runtime."""
    s, p = row.settings, row.placement
    every = str(max(99, result.n_layer_all + 1))  # all layers, the output layer too, for any depth of model
    ngl = {PlacementKind.ALL: every, PlacementKind.N_CPU_MOE: every, PlacementKind.RAM: "0"}.get(p.kind, str(p.value))
    model = " ".join(map(shell_word, result.model_words)) or f"-m {shell_word(result.model_hint)}"
    cmd = f"{Runtime.LLAMA_SERVER} {model} -c {s.n_ctx} -ngl {ngl} -fa {'on' if s.flash_attn else 'off'}"
    cmd += f" -ctk {s.type_k} -ctv {s.type_v}"
    if s.n_batch != Params.n_batch:
        cmd += f" -b {s.n_batch}"
    if s.n_ubatch != Params.n_ubatch:
        cmd += f" -ub {s.n_ubatch}"
    placed = printed_flags(s.tensor_overrides, s.cpu_moe, s.load_mode)  # before --n-cpu-moe: llama.cpp's order
    if placed:
        cmd += " " + " ".join(map(shell_word, placed))
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


LLAMA_SERVER = ProgramRuntime(Runtime.LLAMA_SERVER, "llama-server, started from the printed line",
                              BenchDriver.SPAWNED, llama_server_command)
