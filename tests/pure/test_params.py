"""The one parameter schema: every command's argparse, the sweep expansion and the API come from it."""

from __future__ import annotations

import argparse

import pytest

from llamabench.cli import COMMANDS, build_parser
from llamabench.core.errors import UsageError
from llamabench.settings import params
from llamabench.settings.params import DEFAULT_N_CTX, SCHEMA, Params
from llamabench.settings.sweep import expand, parse_value


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_flag_means_one_schema_field_in_every_command():
    seen: dict[str, str] = {}
    for name, sub in subparsers().items():
        for action in sub._actions:
            if action.dest == "help":
                continue
            assert action.dest in SCHEMA, (name, action.dest)
            for flag in action.option_strings:
                assert seen.setdefault(flag, action.dest) == action.dest, (name, flag)
                if flag != "--json":
                    spec = SCHEMA[action.dest]
                    assert flag in spec.flags + spec.negated + spec.older


def test_the_schema_lists_every_params_field():
    assert params.CONTEXT_PARAMS == tuple(f.name for f in Params.__dataclass_fields__.values())
    assert Params().n_ctx == SCHEMA["n_ctx"].default == DEFAULT_N_CTX == 131072


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in ("report",)])
def test_32k_is_a_context_length_everywhere(command):
    sub = subparsers()[command]
    if not any(a.dest == "n_ctx" for a in sub._actions):
        pytest.skip(f"{command} takes no context length")
    args = sub.parse_args(["qwen3-30b-a3b", "-c", "32k"])
    assert args.n_ctx in (32768, (32768,))


def test_depths_are_spelled_alike_in_bench_and_demo():
    for command in ("bench", "demo"):
        assert subparsers()[command].parse_args(["qwen3-30b-a3b", "-d", "0,4k"]).n_depth == (0, 4096)


@pytest.mark.parametrize("text, expected", [
    ("512", (512,)),
    ("0,4k", (0, 4096)),
    ("0-16384+4096", (0, 4096, 8192, 12288, 16384)),  # llama-bench's first-last+step
    ("512-4096*2", (512, 1024, 2048, 4096)),  # and first-last*factor
])
def test_lists_and_ranges(text, expected):
    assert parse_value("n_depth", text, listed=True) == expected


@pytest.mark.parametrize("name, text", [("n_depth", "4096-0+1"), ("n_prompt", "1-8*1"), ("n_ctx", "")])
def test_bad_lists_are_usage_errors(name, text):
    with pytest.raises(UsageError):
        parse_value(name, text, listed=True)


def test_expand_is_the_product_in_schema_order():
    out = expand({"type_k": ("f16", "q8_0"), "n_ctx": (4096, 8192)})
    assert [(p.n_ctx, p.type_k) for p in out] == [(4096, "f16"), (4096, "q8_0"), (8192, "f16"), (8192, "q8_0")]
    assert all(p.type_v == "f16" for p in out)


def test_the_child_job_is_params_to_dict():
    p = Params(n_ctx=8192, n_gpu_layers=12, n_cpu_moe=3, repack=False, cpu_mask="0x3")
    assert Params.from_dict(p.to_dict()) == p
    assert "-c 8192" in p.label and "-ngl 12" in p.label and "-ncmoe 3" in p.label


def test_flags_without_a_value_are_on():
    args = subparsers()["inspect"].parse_args(["m.gguf", "--kv-unified", "--swa-full", "-fa", "off"])
    assert args.kv_unified is True and args.swa_full is True and args.flash_attn is False


def test_older_spellings_still_parse():
    bench = subparsers()["bench"]
    assert bench.parse_args(["m.gguf", "-nr", "1"]).repack == (False,)  # llama-bench's -nr 1 is --repack 0
    assert bench.parse_args(["m.gguf", "--no-repack", "0,1"]).repack == (True, False)
    assert bench.parse_args(["m.gguf", "--repack", "0"]).repack == (False,)
    inspect = subparsers()["inspect"]
    args = inspect.parse_args(["--swa-full", "--kv-unified", "qwen3-30b-a3b"])  # a flag before MODEL takes no value
    assert args.model == "qwen3-30b-a3b" and args.swa_full and args.kv_unified


def test_a_negated_flag_alone_is_llama_servers_spelling():
    fit, bench = subparsers()["fit"], subparsers()["bench"]
    assert fit.parse_args(["m.gguf", "--no-op-offload"]).op_offload is False  # llama-server's flag, alone
    args = fit.parse_args(["--no-op-offload", "m.gguf"])  # before MODEL: the word after it is the model
    assert args.op_offload is False and args.model == "m.gguf"
    assert fit.parse_args(["m.gguf", "-nopo", "0"]).op_offload is True  # llama-bench's 0|1 still taken
    assert bench.parse_args(["-nr", "m.gguf"]).repack == (False,) and bench.parse_args(["-nr", "m.gguf"]).model


@pytest.mark.parametrize("mask", ["-1", "+1", "1_0", "0x 1", "0xg"])
def test_cpu_masks_are_hex(mask):
    with pytest.raises(UsageError, match="hex CPU mask"):
        parse_value("cpu_mask", mask, listed=False)


def test_a_zero_thread_count_means_the_physical_cores():
    import llamabench as lb
    from llamabench.world import sysinfo

    plan = lb.bench("qwen3-30b-a3b", n_ctx=1024, n_threads=[0, 3], dry_run=True)
    assert [p.n_threads for p in plan.configurations] == list(dict.fromkeys([sysinfo.physical_cores(), 3]))


def test_the_quant_sweeps_bounds_in_help_are_the_ones_applied():
    """settings cannot import jobs: the --quant help states the sweep's cap and deadline as numbers, held here."""
    from llamabench.jobs.fit.quants import MAX_QUANTS, SWEEP_SECONDS

    assert f"{MAX_QUANTS} quants at most and {SWEEP_SECONDS:g} s in all" in SCHEMA["quant"].help
