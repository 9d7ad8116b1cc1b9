"""fit's words for llama.cpp's placement and load flags (-ot, --cpu-moe, --load-mode): a note for each pattern that
places nothing, and the basis line that says how the tensors were placed and how the host's weights are held."""

from __future__ import annotations

import json
import subprocess
import sys

from ...core.errors import UsageError
from ...model.weights import WeightsBreakdown
from ...settings.tensor_overrides import LoadMode, Placer, overrides_of, printed_flags

MATCH_DEADLINE_S = 20.0  # every weight's name against every -ot pattern, in a child: a pattern that backtracks
# exponentially ((\w+\.?)+$x: seconds a name) would stall the fit here, and llama.cpp's load as much


def matched(placer: Placer, overrides_text: list[str], names: list[str]) -> Placer:
    """The placer with each name's first matching pattern worked out in a child under MATCH_DEADLINE_S; a one-line
    UsageError where the patterns take longer (llama.cpp's std::regex would stall loading the model as long)."""
    if not placer:
        return placer
    code = ("import json,sys\nfrom llamabench.settings.tensor_overrides import first_matches\n"
            "a=json.load(sys.stdin)\njson.dump(first_matches(a['p'],a['n']),sys.stdout)")
    try:
        done = subprocess.run([sys.executable, "-c", code], input=json.dumps({"p": overrides_text, "n": names}),
                              capture_output=True, text=True, timeout=MATCH_DEADLINE_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"-ot: matching the patterns against this model's {len(names)} weight names took over "
                         f"{MATCH_DEADLINE_S:.0f} s (a pattern that backtracks, such as nested repeats: (x+)+); "
                         "llama.cpp's regex would stall loading the model as long",
                         hint="simplify the pattern, e.g. blk\\.(1[0-9])\\.ffn_.*_exps=CPU") from None
    if done.returncode != 0:
        raise UsageError(f"-ot: the patterns could not be matched: {done.stderr.strip().splitlines()[-1:]}")
    return placer.with_matches(dict(zip(names, json.loads(done.stdout))))


def placement_words(model: str, weights: WeightsBreakdown, tensor_overrides: tuple[str, ...], cpu_moe: bool,
                    load_mode: LoadMode, used: set[int]) -> tuple[list[str], str]:
    """(notes, the basis line; "" where every flag is its default). UsageError for --cpu-moe on a dense model.
    `used`: the overrides that place some tensor (first match), by index."""
    overrides = overrides_of(tensor_overrides, cpu_moe)
    if cpu_moe and not weights.has_experts():
        raise UsageError(f"{model} has no routed experts: --cpu-moe does not apply")
    notes = [f"-ot {o.text}: no weight tensor of this model matches, so it places nothing (llama.cpp matches each "
             "name with regex_search: blk.N.ffn_up_exps.weight)"
             for i, o in enumerate(overrides) if i not in used]
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
