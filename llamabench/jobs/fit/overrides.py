"""fit's words for llama.cpp's placement and load flags (-ot, --cpu-moe, --load-mode): a note for each pattern that
places nothing, and the basis line that says how the tensors were placed and how the host's weights are held."""

from __future__ import annotations

import re

from ...core.errors import UsageError
from ...model.weights import WeightsBreakdown
from ...settings.tensor_overrides import LoadMode, overrides_of, printed_flags


def placement_words(model: str, weights: WeightsBreakdown, tensor_overrides: tuple[str, ...], cpu_moe: bool,
                    load_mode: LoadMode) -> tuple[list[str], str]:
    """(notes, the basis line; "" where every flag is its default). UsageError for --cpu-moe on a dense model."""
    overrides = overrides_of(tensor_overrides, cpu_moe)
    if cpu_moe and not weights.has_experts():
        raise UsageError(f"{model} has no routed experts: --cpu-moe does not apply")
    notes = [f"-ot {o.text}: no weight tensor of this model matches, so it places nothing (llama.cpp matches each "
             "name with regex_search: blk.N.ffn_up_exps.weight)"
             for o in overrides if not any(re.search(o.pattern, name) for name in weights.tensor_names)]
    words = [f"the tensor buffer overrides ({' '.join(printed_flags(tensor_overrides, cpu_moe, 'auto'))}) placed "
             "tensor by tensor, the first pattern a name matches first (llama-model-loader.cpp:1235), then "
             "--n-cpu-moe's"] if overrides else []
    if not load_mode.maps:
        words.append(f"--load-mode {load_mode}: the host's weights read into allocated buffers, the bytes of the "
                     "tensors kept there (no mapped span)" + ("; locked in RAM (mlock): never swapped"
                                                              if load_mode.locks else "")
                     + "; on CUDA in its pinned host buffer (CUDA_Host), which cannot be swapped either")
    elif load_mode.locks:
        words.append("--load-mode mmap+mlock: the mapped span locked in RAM (never swapped)")
    return notes, "; ".join(words)
