"""`llamabench --help` lists every deadline and cap (issue 54), each with the number the code holds: a help that says
120 s where the code waits 300 would be one more thing to distrust."""

from __future__ import annotations

import pytest

from llamabench.cli import main
from llamabench.jobs.fit.overrides import MATCH_DEADLINE_S
from llamabench.jobs.roofline.job import CALIBRATE_MAX_BYTES
from llamabench.llama import breakdown, rpc, worker
from llamabench.world import catalog, paths, texts


def help_text(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("said, held", [
    ("LLAMABENCH_HTTP_TIMEOUT a remote header read, a hub listing, each JSON answer of a llama-server (default {})",
     paths.DEFAULT_HTTP_TIMEOUT_S),
    ("LLAMABENCH_RPC_TIMEOUT a --rpc host's (or an emulated card's) answer to llama.cpp (default {})",
     paths.DEFAULT_RPC_TIMEOUT_S),
    ("quality: {} to load the vocabularies and tokenize the text (-f)", worker.TOKENS_TIMEOUT_S),
    ("{} to list a model's tensors or ask its quantize recipe", (worker.MODEL_TENSORS_TIMEOUT_S,
                                                                  worker.RECIPE_TIMEOUT_S)),
    ("{} to match -ot patterns", MATCH_DEADLINE_S),
    ("{} for a --rpc host's memory", rpc.MEMORY_QUERY_TIMEOUT_S),
    ("{} to compile the tool's C++ helpers", breakdown.COMPILE_TIMEOUT_S),
    ("quality -f TEXT: {} MiB", texts.MAX_TEXT_BYTES / 2**20),
    ("roofline --calibrate FILE: {} MiB of results", CALIBRATE_MAX_BYTES / 2**20),
    ("LLAMABENCH_CATALOG: a models.toml of {} MiB", catalog.MAX_CATALOG_BYTES / 2**20),
])
def test_help_lists_each_deadline_and_cap_with_its_number(capsys, said, held):
    held = set(held) if isinstance(held, tuple) else {held}
    assert len(held) == 1, held  # one number said for several: they must be one
    assert said.format(f"{held.pop():g}") in help_text(capsys)


def test_the_text_cap_and_the_tokenizing_deadline_agree():
    """The cap is what the deadline meets for prose on this 2-core machine (4 MiB of Python's documentation took 132 s
    with Gemma 3's tokenizer; measured, not timed here): one pair, held in one module."""
    assert worker.TOKENS_TIMEOUT_S == texts.TOKENIZE_DEADLINE_S
    assert texts.MAX_TEXT_BYTES <= 4 * 2**20 and texts.TOKENIZE_DEADLINE_S >= 300
