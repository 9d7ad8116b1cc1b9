"""The placement and load flags (-ot/--override-tensor, --cpu-moe, --load-mode) as an attacker would type them:
patterns that backtrack for ever, thousands of them, shell text and control characters in a pattern, wrong
buffer names. Each ends in one line and exit 2, or in a command whose words are the pattern as given."""

from __future__ import annotations

import shlex
import time

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core.errors import UsageError
from llamabench.jobs.fit import overrides
from llamabench.runtimes.llama_server import llama_server_command


def _code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own usage error
        return exc.code


@pytest.mark.parametrize("pattern, says", [
    ("x," * 2000 + "x=CPU", "at most 1024 overrides"),  # every weight name against each: capped, said at once
    ("a" * 5000 + "=CPU", "at most 1024 overrides of at most 4096 characters"),
    ("a\x00b=CPU", "NUL byte or a line break"),
    ("a\nFORGED=CPU", "NUL byte or a line break"),  # a forged line in the printed command
    ("[=CPU", "is not a regular expression"),
    ("exps=CPU; rm -rf ~", "is not a buffer type"),
    ("exps=RPC0[127.0.0.1:1]", "names no --rpc host"),
])
def test_a_hostile_override_is_one_line(gemma, capsys, pattern, says):
    assert _code(["fit", str(gemma), "--vram", "16GiB", "-c", "4096", "-ot", pattern]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_pattern_that_backtracks_for_ever_ends_in_one_line(gemma, monkeypatch):
    """(\\w+\\.?)+$x takes seconds per weight name in Python's re (and in llama.cpp's std::regex): matched in a child
    under a deadline, not in the fit's own process."""
    monkeypatch.setattr(overrides, "MATCH_DEADLINE_S", 2.0)
    start = time.perf_counter()
    with pytest.raises(UsageError, match="took over 2 s"):
        lb.fit(str(gemma), vram="16GiB", n_ctx=4096, tensor_overrides=r"(\w+\.?)+$x=CPU")
    assert time.perf_counter() - start < 30


def test_shell_text_in_a_pattern_is_one_word_of_the_printed_command(gemma):
    pattern = r"blk\.1\.ffn_up$(touch /tmp/pwned)`id`'q"
    record = lb.fit(str(gemma), vram="16GiB", n_ctx=4096, type_k="f16", type_v="f16",
                    tensor_overrides=f"{pattern}=CPU")
    command = llama_server_command(record.fit, record.fit.rows[0])
    words = shlex.split(command)
    assert words[words.index("-ot") + 1] == f"{pattern}=CPU"


@pytest.mark.parametrize("keyword, value", [("tensor_overrides", 5), ("tensor_overrides", [b"exps=CPU"]),
                                            ("load_mode", "sometimes"), ("cpu_moe", "perhaps")])
def test_the_api_refuses_wrong_values_in_one_line(gemma, keyword, value):
    with pytest.raises(UsageError):
        lb.fit(str(gemma), vram="16GiB", n_ctx=4096, **{keyword: value})
