"""llama.cpp's placement and load flags as fit takes them: -ot/--override-tensor REGEX=BUFFER,..., --cpu-moe,
--load-mode (and the older --no-mmap, --mlock). Parsed as common/arg.cpp parses them, placed tensor by tensor as
llama-model-loader.cpp places them, printed as given; the RAM columns say how the host's weights are held."""

from __future__ import annotations

import argparse

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core.errors import UsageError
from llamabench.model.metadata import TensorInfo
from llamabench.model.weights import breakdown
from llamabench.settings import arguments
from llamabench.settings.sweep import parse_value
from llamabench.settings.tensor_overrides import CPU, LoadMode, Placer, TensorOverride, overrides_of

EXPERTS = ("ffn_up_exps", "ffn_down_exps", "ffn_gate_exps")


@pytest.mark.parametrize("text, says", [
    ("exps", "is not REGEX=BUFFER"),  # no '=': llama.cpp throws "invalid value"
    ("exps=", "no buffer type"),
    ("(exps=CPU", "is not a regular expression"),  # std::regex would throw at load
    ("exps=GPU0", "is not a buffer type llama.cpp names"),  # llama.cpp lists the buffer types and stops
    ("exps=cpu", "is not a buffer type"),  # the names are case-sensitive (ggml_backend_buft_name)
])
def test_a_wrong_override_is_one_line(text, says):
    with pytest.raises(UsageError, match=says):
        parse_value("tensor_overrides", text, listed=False)


@pytest.mark.parametrize("text, pieces", [
    (r"blk\.1\.ffn_.*_exps=CPU", (r"blk\.1\.ffn_.*_exps=CPU",)),
    ("a=CPU,b=CUDA1,c=CUDA_Host", ("a=CPU", "b=CUDA1", "c=CUDA_Host")),  # split at every ',', in order
    ("x=y=CPU", None),  # the first '=' splits: buffer 'y=CPU' is no buffer type
    ("a=RPC0[10.0.0.2:50052]", ("a=RPC0[10.0.0.2:50052]",)),
])
def test_overrides_parse_as_llama_cpp_splits_them(text, pieces):
    if pieces is None:
        with pytest.raises(UsageError):
            parse_value("tensor_overrides", text, listed=False)
    else:
        assert parse_value("tensor_overrides", text, listed=False) == pieces


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    arguments.add_arguments(parser, ("tensor_overrides", "load_mode", "cpu_moe"))
    return parser


@pytest.mark.parametrize("argv, overrides, mode", [
    (["-ot", "a=CPU", "--override-tensor", "b=CPU,c=CPU"], ("a=CPU", "b=CPU", "c=CPU"), "auto"),  # repeated: appended
    (["--no-mmap"], (), "none"),
    (["--mlock"], (), "mmap+mlock"),  # older builds: mmap stays on, its pages locked
    (["--no-mmap", "--mlock"], (), "mlock"),
    (["--mlock", "--no-mmap"], (), "mlock"),
    (["-lm", "MMAP"], (), "mmap"),
])
def test_the_cli_takes_repeated_overrides_and_the_older_load_flags(argv, overrides, mode):
    args = _parser().parse_args(argv)
    assert args.tensor_overrides == overrides and args.load_mode == mode


def _tensor(name: str, n: int = 1024) -> TensorInfo:
    return TensorInfo(name, (n,), 0, n)


def _moe_weights():
    tensors = [_tensor("token_embd.weight"), _tensor("output.weight")]
    for il in range(4):
        tensors += [_tensor(f"blk.{il}.attn_q.weight")] + [_tensor(f"blk.{il}.{e}.weight", 4096) for e in EXPERTS]
    return breakdown(tuple(tensors), 4, set(), basis="test")


@pytest.mark.parametrize("overrides, n_cpu_moe, in_ram", [
    ((), 0, 1024),  # the input embeddings alone
    ((TensorOverride("exps", CPU),), 0, 1024 + 12 * 4096),  # every expert
    ((TensorOverride(r"blk\.1\.ffn_up", CPU),), 0, 1024 + 4096),
    ((TensorOverride(r"blk\.0\.", "CUDA0"), TensorOverride("exps", CPU)), 0, 1024 + 9 * 4096),  # the first match wins
    ((TensorOverride(r"blk\.3\.ffn_up_exps", "CUDA0"),), 4, 1024 + 11 * 4096),  # -ot before --n-cpu-moe's patterns
    ((TensorOverride("token_embd", "CUDA0"),), 0, 0),  # any tensor, the input embeddings too
])
def test_each_tensor_goes_where_its_first_matching_pattern_sends_it(overrides, n_cpu_moe, in_ram):
    weights = _moe_weights()
    places = weights.tensor_devices(lambda il: 0, n_cpu_moe=n_cpu_moe, place=Placer.of(overrides).place)
    assert weights.placed_on_host(places, mapped=False) == in_ram
    assert sum(weights.placed_on_devices(places, 1)) + in_ram == weights.total_bytes


def test_cpu_moe_is_an_override_of_every_expert():
    assert overrides_of((), True) == (TensorOverride(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps", CPU),)
    assert overrides_of(("a=CUDA0",), True)[0].pattern == "a"  # -ot first, as the printed command orders them


@pytest.mark.parametrize("mode, pinned, words", [
    ("auto", "CUDA_Host", "mapped"), ("none", "CUDA_Host", "pinned (CUDA_Host)"), ("none", "", "allocated"),
    ("mlock", "", "allocated, locked (mlock)"), ("mmap+mlock", "", "mapped, locked (mlock)")])
def test_the_ram_column_says_how_the_hosts_weights_are_held(mode, pinned, words):
    assert LoadMode(mode).host_weights_words(pinned) == words


def test_fit_prints_the_flags_as_llama_server_takes_them_and_sizes_allocated_weights(gemma, capsys):
    """--no-mmap is --load-mode none in this llama.cpp (its llama-server refuses --no-mmap); the host's weights are
    then the tensors read into a buffer (not the file's mapped span), pinned on CUDA."""
    assert main(["fit", str(gemma), "--vram", "16GiB", "-c", "4096", "-ctk", "f16", "-ctv", "f16", "-ngl", "6",
                 "--no-mmap", "-ot", r"blk\.1[0-7]\.ffn_up=CPU"]) == 0
    out = capsys.readouterr().out
    assert r"-ot 'blk\.1[0-7]\.ffn_up=CPU' --load-mode none" in out and "pinned (CUDA_Host)" in out
    mapped = lb.fit(str(gemma), vram="16GiB", n_ctx=4096, type_k="f16", type_v="f16", n_gpu_layers=[6],
                    tensor_overrides=[r"blk\.1[0-7]\.ffn_up=CPU"]).fit.rows[0]
    read = lb.fit(str(gemma), vram="16GiB", n_ctx=4096, type_k="f16", type_v="f16", n_gpu_layers=[6],
                  tensor_overrides=[r"blk\.1[0-7]\.ffn_up=CPU"], load_mode="none").fit.rows[0]
    assert read.host.weights < mapped.host.weights  # the span holds the card's tensors between
    assert read.parts.weights == mapped.parts.weights


@pytest.mark.parametrize("argv, says", [
    (["-ot", "exps=CUDA1"], "16GiB has 1 device(s)"),  # no second card
    (["-ot", "exps=RPC0[10.0.0.9:50052]"], "names no --rpc host"),
    (["--cpu-moe"], "has no routed experts"),  # Gemma 3 is dense
    (["-ot", "exps=CPU", "--runtime", "llama-cpp-python"], "Llama() takes no tensor buffer override"),
    (["--cpu-moe", "--cpu-only", "--ram", "8GiB"], "--cpu-only puts every tensor in system RAM"),  # no card
    (["--load-mode", "sometimes"], "is not a load mode"),
])
def test_placement_mistakes_are_one_line(gemma, capsys, argv, says):
    card = [] if "--cpu-only" in argv else ["--vram", "16GiB"]
    try:
        code = main(["fit", str(gemma), *card, "-c", "4096", *argv])
    except SystemExit as exc:  # argparse's own usage error
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_a_pattern_that_matches_nothing_is_said(gemma):
    record = lb.fit(str(gemma), vram="16GiB", n_ctx=4096, type_k="f16", type_v="f16", tensor_overrides="exps=CPU")
    assert any("-ot exps=CPU: no weight tensor of this model matches" in n for n in record.fit.notes)
