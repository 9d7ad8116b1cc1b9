"""issue 32's traps that go as far as a fit: --quant is never ignored."""

from __future__ import annotations

import shutil

import pytest

import llamabench as lb
from llamabench.cli import main
from tests.support.eagle3 import write_eagle3


@pytest.mark.parametrize("argv, says", [
    (["fit", "qwen3-5-35b-a3b", "--quant", "UD-Q4_K_XL", "-c", "8192"],
     "no published UD-Q4_K_XL size of qwen3-5-35b-a3b, and it is not one of llama-quantize's file types"),
    (["fit", "gemma-3-27b", "--quant", "Q5_K_XL", "-c", "8192"], "no published Q5_K_XL size of gemma-3-27b"),
    (["fit", "qwen3-5-35b-a3b", "--quant", "Q4_K_M", "--verify", "-c", "8192"], "with --verify"),
])
def test_a_quant_that_cannot_be_honoured_is_refused_in_one_line(capsys, argv, says):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_published_quant_sizes_the_weights(capsys):
    assert main(["fit", "qwen3-5-35b-a3b", "--quant", "Q4_K_M", "-c", "8192"]) == 0
    out = capsys.readouterr().out
    assert "published Q4_K_M file size" in out and "llama.cpp's Q4_K_M recipe (llama_tensor_get_type)" in out


def test_a_quant_beside_a_gguf_file_asks_llama_cpps_recipe_of_that_file(capsys, gemma):
    """Door round 3, trap 6: `fit FILE --quant Q8_0` was refused; it is "what would my file weigh in Q8_0"."""
    assert main(["fit", str(gemma), "--quant", "Q8_0", "-c", "8192"]) == 0
    out = capsys.readouterr().out
    assert "as llama.cpp's Q8_0 recipe types its tensors" in out and "-m gemma-3-270m-q4_k_m-Q8_0.gguf" in out


def test_a_benchs_results_alone_make_a_report(capsys, tmp_path, gemma):
    results = tmp_path / "bench.jsonl"
    assert main(["bench", str(gemma), "-c", "512", "-p", "16", "-n", "2", "-r", "1", "-t", "2", "--repack", "0",
                 "--results", str(results)]) == 0
    capsys.readouterr()
    assert main(["report", str(results), "--out-dir", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    assert "no inspect record: the layout and theory were read from the model's metadata again" in err
    assert (tmp_path / "report" / "report.md").is_file() and (tmp_path / "report" / "record.json").is_file()


def test_a_second_fit_asks_llama_cpp_nothing_it_answered_before(gemma):
    import llamabench as lb

    first = lb.fit(str(gemma), n_ctx=8192, vram=["2GiB"], emulate=True).fit
    again = lb.fit(str(gemma), n_ctx=8192, vram=["2GiB"], emulate=True).fit
    assert first.dry_runs > 0 and again.dry_runs == 0  # every dry run's figures kept on disk, keyed by file and build
    assert again.rows == first.rows  # the same answer


def test_the_dry_run_cache_is_keyed_by_the_file(gemma, tmp_path):
    import shutil

    import llamabench as lb

    copy = tmp_path / "copy.gguf"
    shutil.copyfile(gemma, copy)
    lb.fit(str(copy), n_ctx=8192, vram=["2GiB"], emulate=True)
    with open(copy, "r+b") as f:  # the same name, another file: its dry runs are not the old one's
        f.seek(0, 2)
        f.write(b"\0" * 32)
    assert lb.fit(str(copy), n_ctx=8192, vram=["2GiB"], emulate=True).fit.dry_runs > 0


def test_an_architecture_without_a_layout_rule_is_benched_with_llama_cpps_numbers(tmp_path, capsys):
    """Nothing llama.cpp can load is refused: dots3note has no layout rule in llamabench, and bench still measures
    it (allocations and t/s from llama.cpp), each record saying there is no theory beside them."""
    from llamabench.jobs.twin.generic import write_from_metadata
    from llamabench.records.bench import BenchRecord
    from llamabench.records.records import read_records
    from tests.support import every_arch

    twin = write_from_metadata(every_arch.metadata("dots3note"), tmp_path / "dots3note.gguf").path
    results = tmp_path / "bench.jsonl"
    assert main(["bench", str(twin), "-p", "8", "-n", "2", "-r", "1", "-t", "2", "--repack", "0",
                 "--results", str(results)]) == 0
    records = [r for r in read_records(results).records if isinstance(r, BenchRecord)]
    assert len(records) == 2 and all(r.ok and r.allocations and r.footprint is None for r in records)
    assert all("no layout rule" in r.theory_error for r in records)
    assert "llama.cpp only: architecture 'dots3note'" in capsys.readouterr().out


@pytest.fixture(scope="module")
def no_rule_twin(tmp_path_factory):
    """A dots3note twin: an architecture llama.cpp loads and llamabench has no layout rule for."""
    from llamabench.jobs.twin.generic import write_from_metadata
    from tests.support import every_arch

    return write_from_metadata(every_arch.metadata("dots3note"), tmp_path_factory.mktemp("no-rule") / "d.gguf").path


def test_an_architecture_without_a_layout_rule_is_verified_with_llama_cpps_sizes(no_rule_twin, capsys):
    """verify answers with llama.cpp's own lines, measured, saying there is no theory to check them against;
    --matrix (theory against llama.cpp) is refused in one line."""
    import llamabench as lb

    record = lb.verify(str(no_rule_twin), n_ctx=16384)
    assert record.footprint is None and record.checks == () and "indexer cache" in record.no_rule
    assert record.allocations.kv_bytes > 0 and len(record.allocations.kv_caches) == 3
    assert main(["verify", str(no_rule_twin), "--ctx", "16384"]) == 0
    out = capsys.readouterr().out
    assert "no theory to check" in out and f"KV total {record.allocations.kv_mib:.2f} MiB" in out
    assert main(["verify", str(no_rule_twin), "--matrix"]) == 1
    err = capsys.readouterr().err
    assert "verify without --matrix" in err and err.count("\n") == 1


def test_an_architecture_without_a_layout_rule_is_fitted_with_llama_cpps_caches(no_rule_twin):
    """fit sizes the caches with llama.cpp's dry run at each n_ctx (they grow with it), card and host apart,
    and --verify, creating the answer for real on the emulated card, agrees to the printed 0.01 MiB."""
    import llamabench as lb

    small = lb.fit(str(no_rule_twin), n_ctx=4096, vram=["2GiB"], emulate=True, type_k="f16", type_v="f16",
                   n_gpu_layers=2)
    large = lb.fit(str(no_rule_twin), n_ctx=65536, vram=["2GiB"], emulate=True, type_k="f16", type_v="f16",
                   n_gpu_layers=2, verify=True)
    assert "measured" in large.fit.basis["KV"] and any("no layout rule" in n for n in large.fit.notes)
    row = large.fit.rows[0]
    before = small.fit.rows[0]
    assert row.parts.kv > 0 and row.host.kv > 4 * before.host.kv > 0  # the host's layer grows with n_ctx, measured
    assert large.verify is not None and large.verify.ok


def test_a_fit_tells_its_progress(gemma, tmp_path):
    """Each dry run llama.cpp answers is told as a line (the command shows it on stderr once a second has gone):
    the first fit of a file makes some, a second of the same file asks llama.cpp nothing it answered before."""
    copy = tmp_path / "fresh.gguf"
    shutil.copyfile(gemma, copy)
    lines: list[str] = []
    lb.fit(str(copy), n_ctx=8192, vram=["2GiB"], emulate=True, progress=lines.append)
    assert lines and lines[0].startswith("fit: llama.cpp dry run 1: n_ctx ")
    again: list[str] = []
    lb.fit(str(copy), n_ctx=8192, vram=["2GiB"], emulate=True, progress=again.append)
    assert again == []


def test_an_architecture_without_a_layout_rule_gets_a_roofline_and_a_twin(no_rule_twin, tmp_path, capsys):
    """Every command answers: roofline with the caches llama.cpp allocates at each depth (growing with it), twin
    with llama.cpp's own dry runs holding the twin's caches to the file's; a split or placement is one line."""
    import llamabench as lb

    record = lb.roofline(str(no_rule_twin), bandwidth=500, n_ctx=16384)
    kv = [r.kv_read_bytes for r in record.rows]
    assert kv == sorted(kv) and kv[-1] > 4 * kv[1] > 0  # measured, growing with the depth
    assert all(r.full_gqa_ts is None for r in record.rows)
    assert main(["roofline", str(no_rule_twin), "--bandwidth", "500", "-c", "8192"]) == 0
    assert "measured" in capsys.readouterr().out
    assert main(["roofline", str(no_rule_twin), "--card", "rtx-4090", "-ncmoe", "2"]) == 2
    assert "not --calibrate, a split or a placement" in capsys.readouterr().err
    out = tmp_path / "twin.gguf"
    assert main(["twin", str(no_rule_twin), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert out.is_file() and "llama.cpp sizes the twin's caches as the file's" in said
    assert lb.verify(str(out), n_ctx=16384).allocations.kv_bytes == lb.verify(str(no_rule_twin),
                                                                               n_ctx=16384).allocations.kv_bytes


def test_the_recommended_placement_is_the_one_expected_to_decode_fastest(capsys):
    """Trap 8: a dense 27B on 16 GiB was answered with f16 KV and 35 of 63 layers on the card; the rows that
    read the fewest weights from system RAM per token come first, and the answer says why."""
    record = lb.fit("gemma-3-27b", vram="16GiB", n_ctx=131072)
    best = record.fit.recommended("16GiB", 131072)
    fitting = [r for r in record.fit.rows if r.fits]
    assert best.ram_read_bytes == min(r.ram_read_bytes for r in fitting)
    assert (best.settings.type_k, best.placement.n_gpu_layers(record.fit.n_layer_all)) == ("q4_0", 46)
    # no published size: llama.cpp's own Q4_K_M recipe on the shape twin, what llama-quantize writes (not tq1_0 bytes)
    assert ("llama.cpp's Q4_K_M recipe (llama_tensor_get_type) on a full-size shape twin, 15.41 GiB (16.54 GB of "
            "10^9 bytes)") in record.fit.basis["weights"]
    assert main(["fit", "gemma-3-27b", "--vram", "16GiB"]) == 0
    assert "chosen for speed: each token reads 3.98 GiB of weights from system RAM" in capsys.readouterr().out


def test_where_nothing_fits_the_largest_context_comes_with_its_kv_type_and_command(qwen, capsys):
    """Trap 8: with -ngl 99, "largest context that fits: 24832" came with no KV type and no command."""
    assert main(["fit", str(qwen), "--vram", "1GiB", "-ngl", "99", "-c", "131072"]) == 0
    out = capsys.readouterr().out
    # sized as CUDA: flash attention of a batch converts the q4_0 cache to f16 in the compute buffer (24,832 on the
    # emulated card as it is, --backend cpu)
    assert "the largest context that fits: 24,320 with q4_0/q4_0 KV" in out
    assert "-c 24320 -ngl 99 -fa on -ctk q4_0 -ctv q4_0" in out


def test_inspect_and_verify_take_a_draft_model(qwen, capsys):
    """Issue 30: -md in inspect and verify (fit had it): the draft's own context at the target's cells and slots,
    as llama-server creates it (96.00 MiB of KV for Qwen2.5-Coder-0.5B drafting for itself at 8192, 4 slots)."""
    record = lb.inspect(str(qwen), n_ctx=8192, model_draft=str(qwen))
    draft = record.inspection.draft
    assert draft is not None and draft.footprint.kv_bytes == 96 * 2**20 and draft.footprint.params.n_seq == 4
    assert record.footprint.params.spec_type == "draft-simple"
    checked = lb.verify(str(qwen), n_ctx=8192, model_draft=str(qwen))
    assert checked.ok and any(c.component.startswith("draft: KV total") for c in checked.checks)
    assert main(["inspect", str(qwen), "-c", "8192", "-md", str(qwen)]) == 0
    assert "Draft model" in capsys.readouterr().out
    assert main(["inspect", str(qwen), "-md", str(qwen), "--spec-type", "draft-mtp"]) == 2
    assert "draft-simple" in capsys.readouterr().err


def test_inspect_and_verify_take_an_eagle3_head(qwen, tmp_path, capsys):
    """-md HEAD --spec-type draft-eagle3: the head's one layer of KV at the target's cells and slots, checked against
    llama.cpp's dry run of the head's context made against the target's (ctx_other), as llama-server makes it; the
    head alone is not a model llama.cpp runs, and says so with the command to use."""
    head = write_eagle3(qwen, tmp_path / "eagle3-head.gguf")
    record = lb.inspect(str(qwen), n_ctx=8192, model_draft=str(head), spec_type="draft-eagle3")
    assert record.inspection.draft.footprint.kv_bytes == 4 * 2**20  # 1 layer x 2 KV heads x 64 x 8192 cells, K+V
    checked = lb.verify(str(qwen), n_ctx=8192, model_draft=str(head), spec_type="draft-eagle3")
    assert checked.ok and any(c.component.startswith("draft: KV total") for c in checked.checks)
    assert main(["verify", str(head)]) == 2
    assert "is an EAGLE3 draft head" in capsys.readouterr().err
    assert main(["inspect", str(qwen), "-md", str(head)]) == 2  # run as a plain draft model: no target features
    assert "--spec-type draft-eagle3" in capsys.readouterr().err
