"""`llamabench inspect` through main(): output, JSON keys, metadata-only files and bad input."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.jobs.twin.writer import write_gguf
from llamabench.records.inspect import InspectRecord

QWEN35MOE_KEYS = {
    "block_count": 40, "context_length": 262144, "embedding_length": 2048, "attention.head_count": 16,
    "attention.head_count_kv": 2, "attention.key_length": 256, "attention.value_length": 256,
    "full_attention_interval": 4, "ssm.conv_kernel": 4, "ssm.state_size": 128, "ssm.group_count": 16,
    "ssm.time_step_rank": 32, "ssm.inner_size": 4096,
}


def metadata_only(path, arch, suffix_keys):
    write_gguf(path, arch, {f"{arch}.{k}": v for k, v in suffix_keys.items()} | {"general.architecture": arch}, [])
    return path


def run_json(capsys, *argv) -> InspectRecord:
    """`inspect ... --json`, read back as the typed record it prints."""
    assert main(list(argv)) == 0
    return InspectRecord.from_dict(json.loads(capsys.readouterr().out))


def test_builtin_default_headline_numbers(capsys):
    record = run_json(capsys, "inspect", "qwen3-5-35b-a3b", "--json")
    # the CLI prints the API's record
    assert record == replace(lb.inspect("qwen3-5-35b-a3b"), timestamp=record.timestamp)
    fp, layers = record.footprint, record.inspection.geometry.layers
    assert fp.kv_bytes_per_token == 20480
    assert fp.full_gqa_kv_bytes_per_token == 81920
    assert fp.reduction == 4.0
    assert fp.kv_bytes == 2_684_354_560
    # llama-server's default context, as fit sizes it: 4 slots on one unified stream, a DeltaNet state per slot
    assert (fp.params.n_seq, fp.params.kv_unified) == (4, True)
    assert fp.recurrent_state_bytes == 4 * 65_863_680
    assert lb.inspect("qwen3-5-35b-a3b", n_seq=1).footprint.recurrent_state_bytes == 65_863_680
    assert lb.inspect("qwen3-5-35b-a3b", runtime="llama-cpp-python").footprint.recurrent_state_bytes == 65_863_680
    assert fp.shape.n_ctx == 131072 == lb.DEFAULT_N_CTX
    assert [layer.index for layer in layers if layer.kind == "full"] == list(range(3, 40, 4))
    assert {str(layer.kind) for layer in layers} == {"full", "recurrent"}


def test_qwen3_30b_bytes_per_token(capsys):
    assert run_json(capsys, "inspect", "qwen3-30b-a3b", "--json").kv_bytes_per_token == 98304
    assert lb.inspect("qwen3-30b-a3b", n_ctx="128k").kv_bytes == 12 * 2**30


def test_human_table_groups_runs(capsys):
    assert main(["inspect", "qwen3-5-35b-a3b"]) == 0
    out = capsys.readouterr().out
    assert "3, 7, ..., 39" in out
    assert "0-2, 4-6, ..., 36-38" in out
    assert "20,480 B/token" in out and "2560.00 MiB" in out and "251.25 MiB" in out and "4.00x" in out


def test_ctx_rounding_and_cache_types(capsys):
    record = run_json(capsys, "inspect", "qwen3-5-35b-a3b", "--json", "--ctx", "132107", "-ctk", "q8_0", "-ctv", "q4_0")
    assert record.footprint.shape.n_ctx == 132352
    assert record.kv_bytes_per_token == 10 * 512 * 34 // 32 + 10 * 512 * 18 // 32


def test_metadata_only_gguf(tmp_path, capsys):
    path = metadata_only(tmp_path / "meta.gguf", "qwen35moe", QWEN35MOE_KEYS)
    record = run_json(capsys, "inspect", str(path), "--json")
    assert record.inspection.weights_bytes == 0
    assert record.kv_bytes == 2_684_354_560


def test_weights_bytes_is_sum_of_tensors(tmp_path, capsys):
    from llamabench.jobs.twin.writer import TensorSpec

    specs = [TensorSpec("token_embd.weight", (64, 259)), TensorSpec("output_norm.weight", (64,), "f32", "ones")]
    keys = {f"llama.{k}": v for k, v in dict(block_count=1, context_length=4096, embedding_length=64,
                                                attention__head_count=1).items()}
    keys = {k.replace("__", "."): v for k, v in keys.items()}
    write_gguf(tmp_path / "w.gguf", "llama", keys | {"general.architecture": "llama"}, specs)
    record = run_json(capsys, "inspect", str(tmp_path / "w.gguf"), "--json")
    assert record.inspection.weights_bytes == 64 * 259 * 2 + 64 * 4


def _bad_inputs(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("this is not a model\n")
    version = tmp_path / "v99.gguf"
    version.write_bytes(b"GGUF" + (99).to_bytes(4, "little") + bytes(32))
    good = metadata_only(tmp_path / "good.gguf", "qwen35moe", QWEN35MOE_KEYS)
    header_cut = tmp_path / "header_cut.gguf"
    header_cut.write_bytes(good.read_bytes()[:200])
    missing = metadata_only(tmp_path / "missing.gguf", "qwen35moe",
                            {k: v for k, v in QWEN35MOE_KEYS.items() if k != "block_count"})
    zero = metadata_only(tmp_path / "zero.gguf", "qwen35moe", QWEN35MOE_KEYS | {"block_count": 0})
    wrong_len = metadata_only(tmp_path / "wrong_len.gguf", "granitehybrid",
                              {"block_count": 4, "context_length": 4096, "embedding_length": 64,
                               "attention.head_count": 4, "attention.head_count_kv": (0, 4, 0),
                               "ssm.conv_kernel": 4, "ssm.inner_size": 128, "ssm.state_size": 16,
                               "ssm.time_step_rank": 4, "ssm.group_count": 1})
    unknown = metadata_only(tmp_path / "unknown.gguf", "rwkv9", {"block_count": 4, "context_length": 4096,
                                                                "embedding_length": 64})
    no_rule = metadata_only(tmp_path / "no_rule.gguf", "deepseek4", {"block_count": 4, "context_length": 4096,
                                                                     "embedding_length": 64})
    missing_ssm = metadata_only(tmp_path / "missing_ssm.gguf", "qwen35moe",
                                {k: v for k, v in QWEN35MOE_KEYS.items() if k != "ssm.inner_size"})
    return [
        (text, "not a GGUF file"),
        (version, "version 99"),
        (header_cut, "truncated"),
        (missing, "block_count"),
        (zero, "block_count is 0"),
        (wrong_len, "3 entries for 4 layers"),
        (unknown, "architecture 'rwkv9': no layout rule in llamabench"),
        (no_rule, "architecture 'deepseek4': no layout rule in llamabench (compressed"),
        (missing_ssm, "ssm.inner_size"),
        (tmp_path / "absent.gguf", "no such file"),
    ]


def test_bad_inputs_get_one_line_errors(tmp_path, capsys):
    for path, needle in _bad_inputs(tmp_path):
        assert main(["inspect", str(path)]) == 1, path
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert "Traceback" not in err
        assert str(path) in err, err
        assert needle in err, (needle, err)


def test_truncated_tensor_data(tmp_path, capsys):
    from llamabench.jobs.twin.build import write_twin
    from llamabench.world import catalog

    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, tmp_path / "twin.gguf")
    cut = tmp_path / "cut.gguf"
    shutil.copyfile(twin.path, cut)
    with open(cut, "r+b") as f:
        f.truncate(twin.file_bytes // 2)
    assert main(["inspect", str(cut)]) == 1
    err = capsys.readouterr().err
    assert "truncated" in err and str(cut) in err


@pytest.mark.parametrize("argv, needle", [
    (["inspect", "no-such-model"], "neither a GGUF file nor a catalog id"),
    (["inspect", "qwen3-30b-a3b", "-ctv", "q8_0", "-fa", "off"], "needs flash attention"),
])
def test_bad_options(argv, needle, capsys):
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_unknown_cache_type_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", "qwen3-30b-a3b", "-ctk", "q3_k"])
    assert exc.value.code == 2
    assert "unknown cache type" in capsys.readouterr().err


def test_a_count_key_that_is_not_a_count(tmp_path, capsys):
    path = metadata_only(tmp_path / "str.gguf", "qwen35moe", QWEN35MOE_KEYS | {"expert_count": 8,
                                                                                "expert_used_count": "eight"})
    assert main(["inspect", str(path)]) == 1
    err = capsys.readouterr().err
    assert "expert_used_count should be a count" in err and err.count("\n") == 1
