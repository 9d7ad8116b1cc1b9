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


@pytest.mark.slow
def test_the_placement_flags_campaign(gemma, tmp_path):
    """Round 5's own campaign on -ot, --cpu-moe and --load-mode, each case the CLI in its own process under a wall
    time and a memory bound: an honest success or one line, never a traceback, a hang or a forged line."""
    from tests.support.fuzz_harness import Case, run_campaign, summary

    env = {"LLAMABENCH_CACHE_DIR": str(tmp_path / "cache")}
    model, moe = str(gemma), "qwen3-30b-a3b"
    base = ["-c", "4096", "--vram", "16GiB"]
    bad = [["-ot", p] for p in ("", "=", "a=b=c", "(?P<x>=CPU", "a{99999999}=CPU", "\\=CPU", "a=CPU,",
                                ",a=CPU", "a=CUDA99", "a=Vulkan_Host_", "a=RPC0[", "a=RPC0[::1]:1", "ä=CPU\x1b[31m")]
    bad += [["--load-mode", m] for m in ("", "MMAP+", "none,mlock", "mmap mlock")]
    bad += [["--cpu-moe", "--n-cpu-moe", "-1"], ["-ot", "x=CPU", "--cpu-only", "--ram", "8GiB"]]
    cases = [Case("placement: refused", ["fit", model, *base, *argv], env=env, must_fail=True, wall_s=60)
             for argv in bad if "--cpu-only" not in argv]
    cases.append(Case("placement: refused", ["fit", model, "-c", "4096", "-ot", "x=CPU", "--cpu-only", "--ram",
                                             "8GiB"], env=env, must_fail=True))
    good = [["-ot", r"blk\.1[0-9]\.ffn_.*_exps=CPU", "--no-mmap"], ["--cpu-moe", "--mlock"],
            ["-ot", "exps=CPU", "-ot", "attn=CPU", "--load-mode", "mmap+mlock"], ["-ot", ".*=CPU"],
            ["-ot", "output=CPU", "-ngl", "10"], ["-ot", r"token_embd=CUDA0", "--load-mode", "none"],
            ["-ot", "=CPU"],  # an empty pattern matches every name: every tensor in RAM, as llama.cpp takes it
            ["--load-mode", " dio "]]
    cases += [Case("placement: answered", ["fit", moe, *base, *argv], env=env, wall_s=120) for argv in good]
    counts, per_group, bad_outcomes = run_campaign(cases)
    print(f"\ncampaign (placement flags): {summary(counts, per_group)}")
    assert not bad_outcomes, summary(counts, per_group) + "\n" + "\n".join(f"{k}: {d}" for _, k, d in bad_outcomes)
