"""llama-cpp-python's `llama_cpp.Llama()`: one sequence in the user's own Python process (llama_cpp/llama.py).

The printed call passes every argument that decides what it allocates, `swa_full=False` too (the C default is
true); it has no tensor buffer overrides, so experts cannot stay in RAM (the -ngl row is offered instead).
"""

from __future__ import annotations

from ..core.cache_types import ggml_type_id
from ..core.safe_text import python_str
from ..memory.fit_result import FitResult
from ..memory.placement import FitRow, PlacementKind
from ..memory.runtimes import PYTHON_N_UBATCH
from ..settings.tensor_overrides import LoadMode
from ..settings.values import Runtime
from .runtime import BenchDriver, ProgramRuntime


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
    mode = LoadMode(s.load_mode)  # Llama() spells --load-mode with use_mmap and use_mlock (llama_cpp/llama.py:247)
    if not mode.maps:
        batch += ", use_mmap=False"
    if mode.locks:
        batch += ", use_mlock=True"

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


LLAMA_CPP_PYTHON = ProgramRuntime(Runtime.LLAMA_CPP_PYTHON, "llama_cpp.Llama() in the user's Python",
                                  BenchDriver.CHILD, python_call)
