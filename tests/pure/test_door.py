"""What a llama.cpp user types first (issue 32's traps), each with the answer it must get."""

from __future__ import annotations

import pytest

from llamabench.cli import main
from llamabench.core.suggest import closest
from llamabench.core.units import GIB, MIB
from llamabench.settings.budget import budget, reserve
from llamabench.settings.values import flash_attn, tokens

CASES = [
    ("24GB", 24 * GIB, "24GB"),  # a "24 GB" card holds 24 GiB: 24e9 would size 22.35 GiB and change the answer
    ("24", 24 * GIB, "24GiB"),  # plain numbers are GiB
    ("16GiB", 16 * GIB, "16GiB"),  # written as the binary unit: unchanged
    ("512MB", 512 * MIB, "512MB"),  # MB is MiB, as for cards
    ("24GB+12GB", 36 * GIB, "24GB+12GB"),  # one machine's cards: each read the same way
]


@pytest.mark.parametrize("text, n_bytes, label", CASES)
def test_a_card_in_gb_is_gib_and_keeps_the_name_it_was_given(text, n_bytes, label):
    """Round 3: "64GB" printed as "64GiB" read as another size; the label is as written, the GiB printed beside."""
    b = budget(text)
    assert (b.bytes, b.label) == (n_bytes, label)


def test_a_reserve_in_mb_is_mib():
    assert reserve("512MB") == 512 * MIB


@pytest.mark.parametrize("text, value", [("1M", 1024**2), ("128k", 131072), ("32K", 32768), ("4096", 4096)])
def test_context_lengths_as_llama_cpp_users_write_them(text, value):
    assert tokens(text) == value


def test_flash_attention_auto_is_llama_servers_default_and_sized_as_on():
    assert flash_attn("auto") is True and flash_attn("off") is False


def run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dash_m_is_the_model_not_an_abbreviation_of_main_gpu(capsys, tmp_path):
    missing = tmp_path / "model.gguf"
    code, _, err = run(capsys, ["bench", "-m", str(missing), "--dry-run"])
    assert code != 0 and "main-gpu" not in err and "not an integer" not in err and "model.gguf" in err


def test_the_model_given_twice_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", "a.gguf", "-m", "b.gguf"])
    assert exc.value.code == 2
    assert "two models" in capsys.readouterr().err


def test_an_abbreviated_option_is_not_taken(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "qwen3-5-35b-a3b", "--vra", "24"])  # argparse's abbreviations would read --vram
    assert "unrecognized arguments: --vra" in capsys.readouterr().err


def test_a_misspelt_option_gets_a_did_you_mean(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "qwen3-5-35b-a3b", "--vrma", "24"])
    assert "did you mean --vram?" in capsys.readouterr().err


def test_a_misspelt_command_gets_a_did_you_mean(capsys):
    with pytest.raises(SystemExit):
        main(["fti", "qwen3-5-35b-a3b"])
    assert "did you mean fit?" in capsys.readouterr().err


@pytest.mark.parametrize("word, known, meant", [
    ("qwen3.5-35b-a3b", ["qwen3-5-35b-a3b", "qwen3-30b-a3b"], "qwen3-5-35b-a3b"),  # a dot where the id has a dash
    ("4090", ["rtx-3090", "rtx-4090", "rtx-5090"], "rtx-4090"),  # the card's number alone
    ("gema-3-27b", ["gemma-3-27b", "gpt-oss-20b"], "gemma-3-27b"),  # a typo
    ("nothing-like-it", ["gemma-3-27b", "gpt-oss-20b"], None),  # no guess where nothing is close
])
def test_closest_names(word, known, meant):
    assert closest(word, known) == meant


def test_a_misspelt_catalog_id_and_card_get_a_did_you_mean(capsys):
    code, _, err = run(capsys, ["inspect", "qwen3.5-35b-a3b"])
    assert code == 1 and "did you mean qwen3-5-35b-a3b?" in err
    code, _, err = run(capsys, ["roofline", "qwen3-5-35b-a3b", "--card", "4090"])
    assert code != 0 and "did you mean rtx-4090?" in err


def test_bench_sizes_its_context_from_the_tests_as_llama_bench():
    import llamabench as lb
    plan = lb.bench("qwen3-30b-a3b", n_prompt=256, n_gen=32, n_depth="0,2048", dry_run=True)
    assert [p.n_ctx for p in plan.configurations] == [2048 + 256 + 32]  # not 131072 for a model trained to 40k


def test_a_depth_past_the_context_is_refused_before_anything_runs():
    import llamabench as lb
    with pytest.raises(lb.UsageError, match="pp512 @ d4096 needs a context of at least 4,608 tokens"):
        lb.bench("qwen3-30b-a3b", n_ctx=2048, n_depth=4096, dry_run=True)


def test_fit_json_rows_carry_their_placement_and_null_for_no_context():
    from llamabench.core.units import GIB as _GIB
    from llamabench.memory.placement import PlacementKind
    from llamabench.records.fit import FitRecord
    from tests.pure.test_records import MODEL
    from tests.pure.test_render import fit_result

    result = fit_result(int(1.2 * _GIB))
    record = FitRecord(model=MODEL, fit=result)
    data = record.to_dict()
    for row, stored in zip(result.rows, data["fit"]["rows"]):
        placed = row.placement.params(row.settings, result.n_layer_all)
        assert stored["settings"]["n_gpu_layers"] == placed.n_gpu_layers  # was 0 on every row
        assert stored["settings"]["n_cpu_moe"] == placed.n_cpu_moe
        assert stored["max_n_ctx"] == (row.max_n_ctx or None)  # 0 would read as -c 0, the trained length
    assert any(r.placement.kind is PlacementKind.N_CPU_MOE for r in result.rows)
    best = data["summary"]["recommendations"][0]
    assert {"type_k", "type_v", "n_gpu_layers", "n_cpu_moe", "max_n_ctx"} <= set(best)
    assert FitRecord.from_dict(data) == record  # the stored form reads back as the same rows


def test_fit_shows_resident_ram_apart_from_what_it_grows_to_and_warns_against_the_machine():
    import dataclasses

    from llamabench.core.units import GIB as _GIB
    from llamabench.render.fit import render_text
    from tests.pure.test_render import fit_result

    result = fit_result(int(1.2 * _GIB))
    text = render_text(result)
    assert "RAM now" in text and "RAM grows to" in text  # two columns, not one sum
    assert " GiB at start, grows to " in text and "this machine" not in text  # machine RAM unknown: no warning
    small = render_text(dataclasses.replace(result, machine_ram=2 * _GIB))  # 8 GiB prompt cache on a 2 GiB machine
    assert "can grow past this machine's 2.00 GiB of RAM (shrink it with --cache-ram" in small


def test_a_max_context_capped_at_the_trained_length_says_so():
    import dataclasses

    from llamabench.core.units import GIB as _GIB
    from llamabench.render.fit import max_ctx_text
    from tests.pure.test_render import fit_result

    result = fit_result(int(1.2 * _GIB))
    row = next(r for r in result.rows if r.max_n_ctx)
    assert max_ctx_text(row, row.max_n_ctx) == f"{row.max_n_ctx} (trained)"
    assert max_ctx_text(row, row.max_n_ctx + 256) == str(row.max_n_ctx)
    assert max_ctx_text(dataclasses.replace(row, max_n_ctx=0), 0).startswith("none")


def test_the_bench_csv_has_llama_benchs_test_columns_and_no_true_or_false():
    import csv
    import io

    from llamabench.render.bench import render
    from tests.pure.test_records import bench_record

    text = render([bench_record(), bench_record(depth=512)], "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert (rows[1]["n_prompt"], rows[1]["n_gen"], rows[1]["n_depth"]) == ("0", "16", "512")  # tg16 @ d512
    assert "True" not in text and "False" not in text and rows[0]["is_twin"] in ("0", "1")


def test_a_card_size_given_twice_is_one_table(capsys):
    """--vram 512MiB,512MiB once printed each table with both alternatives' rows (the label was the key)."""
    assert main(["fit", "qwen3-5-35b-a3b", "--vram", "24GiB,16GiB,24GiB", "--ctx", "4096", "-ctk", "f16",
                 "-ctv", "f16", "-ngl", "0", "--spec-type", "none", "-o", "json"]) == 0
    import json
    fit = json.loads(capsys.readouterr().out)["fit"]
    assert [b["label"] for b in fit["budgets"]] == ["24GiB", "16GiB"]
    assert len(fit["rows"]) == 2  # one -ngl 0 row per card size


def test_roofline_prices_what_fit_recommends_with_experts_or_layers_in_ram(capsys):
    """Trap 10: `roofline -ncmoe 16` was unrecognized; fit's placements are priced beside the whole-card ceiling."""
    import llamabench as lb

    def placed(**kw):
        return [r.placed_ts for r in lb.roofline("qwen3-5-35b-a3b", card="rtx-4060-ti-16gb", n_ctx=32768,
                                                    ram_bandwidth=60, **kw).rows]

    whole = [r.avg_ts for r in lb.roofline("qwen3-5-35b-a3b", card="rtx-4060-ti-16gb", n_ctx=32768).rows]
    assert placed(n_cpu_moe=0) == pytest.approx(whole)  # nothing in RAM: the whole-card ceiling
    few, many = placed(n_cpu_moe=8), placed(n_cpu_moe=24)
    assert all(m < f < w for m, f, w in zip(many, few, whole))  # more experts in RAM, slower
    assert all(a < w for a, w in zip(placed(n_gpu_layers=20), whole))
    assert main(["roofline", "qwen3-5-35b-a3b", "--card", "rtx-4090", "-ncmoe", "16", "--ram-bandwidth", "60"]) == 0
    out = capsys.readouterr().out
    assert "estimate" in out and "placed t/s" in out and "--n-cpu-moe 16" in out
    for argv, says in ((["--card", "rtx-4090", "--ram-bandwidth", "60"], "give -ngl or --n-cpu-moe"),
                       (["--card", "rtx-4090+rtx-3090", "-ngl", "10"], "one --card")):
        assert main(["roofline", "qwen3-5-35b-a3b", *argv]) == 2
        assert says in capsys.readouterr().err


def test_fit_takes_a_card_by_the_name_roofline_uses_and_refuses_a_bare_model_number(capsys):
    """Trap 10: fit and roofline named the same card two ways; `--vram 4090` was 4090 GiB."""
    from llamabench.settings.budget import budget as parse_budget

    assert parse_budget("rtx-4090").bytes == 24 * GIB and parse_budget("rtx-4090").label == "rtx-4090"
    two = parse_budget("rtx-4090+rtx-3060-12gb")
    assert [c.bytes for c in two.cards] == [24 * GIB, 12 * GIB]
    with pytest.raises(SystemExit) as ended:  # argparse's own refusal of --vram, in one line
        main(["fit", "qwen3-5-35b-a3b", "--vram", "4090", "-c", "4096"])
    assert ended.value.code == 2 and "did you mean rtx-4090 (24 GiB)?" in capsys.readouterr().err


def test_a_cpu_bench_plan_points_to_a_cards_speed(gemma, capsys, monkeypatch):
    """Door round 3, trap 8: bench --dry-run on a CPU build times the CPU and did not say where a card's speed is."""
    from llamabench.llama import ggml_devices

    monkeypatch.setattr(ggml_devices, "supports_gpu_offload", lambda: False)
    assert main(["bench", str(gemma), "--dry-run", "-c", "4096"]) == 0
    out = capsys.readouterr().out
    assert f"llamabench roofline {gemma} --card rtx-4090" in out
