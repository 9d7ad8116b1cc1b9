"""`fit -hf OWNER/REPO --quant all|A,B` and `fit CATALOG_ID --quant all|A,B` against a hub that lies or names too
much: a listed size never outweighs the file read; a sweep is bounded (MAX_QUANTS quants, SWEEP_SECONDS), each bound
one line that says how to narrow it; each quant is said in its own line as it is weighed; a --quant naming nothing is
one line, exit 2, before the hub is asked."""

from __future__ import annotations

import shutil

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core.errors import LlamabenchError, UsageError
from llamabench.jobs.fit import quants
from tests.support.fake_hub import REPO, asked_of, entry, fake_hub, one_error, small_twin

FIT = ["--ctx", "4096", "--vram", "24GiB"]


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    return small_twin(tmp_path_factory.mktemp("twin") / "twin.gguf")


@pytest.fixture
def repo(twin, tmp_path):
    """Three quants of one shape: Q2_K the twin itself, Q8_0 and Q6_K the twin with 1 GiB and 0.5 GiB more file."""
    root = tmp_path / "repo"
    root.mkdir()
    for name, more in (("M-Q2_K.gguf", 0), ("M-Q8_0.gguf", 2**30), ("M-Q6_K.gguf", 2**29)):
        shutil.copyfile(twin, root / name)
        with open(root / name, "r+b") as f:
            f.truncate(twin.stat().st_size + more)
    return root


def test_a_listed_size_never_outweighs_the_file_read(repo, monkeypatch, capsys):
    """A listing that says 2^59 bytes for the 0.12 GB Q2_K: the size is the file's as read (Content-Range), and the
    largest quant that fits is the largest file."""
    pages = [[entry("M-Q2_K.gguf", 2**59), entry("M-Q8_0.gguf", 1), entry("M-Q6_K.gguf", 0)]]
    with fake_hub(repo, pages, monkeypatch):
        assert main(["fit", "-hf", REPO, "--quant", "all", *FIT]) == 0
        out = capsys.readouterr().out
        assert "576460752" not in out and "the largest quant that fits 24GiB at n_ctx 4096: Q8_0" in out, out
        swept = lb.fit_quants(f"hf://{REPO}", quant="all", n_ctx=4096, vram="24GiB")
    assert {q.quant: q.size_bytes for q in swept.quants} == {q: (repo / f"M-{q}.gguf").stat().st_size
                                                             for q in ("Q2_K", "Q8_0", "Q6_K")}


def test_each_quant_is_said_in_its_own_line_as_it_is_weighed(repo, monkeypatch, capsys):
    with fake_hub(repo, None, monkeypatch):
        assert main(["fit", "-hf", REPO, "--quant", "Q2_K,q8_0", *FIT]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert [line.split(":")[1].split("(")[0].strip() for line in lines] == ["[1/2] Q2_K", "[2/2] Q8_0"], err
    assert all(line.startswith("llamabench: [") and "fits 24GiB at n_ctx 4096" in line for line in lines), err


def test_a_repository_naming_thousands_of_quants_is_one_line_before_any_header(tmp_path, monkeypatch, capsys):
    pages = [[entry(f"M-Q4_K_{i}.gguf") for i in range(2500)]]
    with fake_hub(tmp_path, pages, monkeypatch) as hub:
        line = one_error(capsys, ["fit", "-hf", REPO, "--quant", "all"], "names 2,500 quants", code=2)
        assert f"a sweep weighs {quants.MAX_QUANTS} at most" in line and "--quant Q4_K_M,Q5_K_M" in line
        assert len(asked_of(hub)) == 1  # the listing, and no header
        many = ",".join(f"Q4_K_{i}" for i in range(quants.MAX_QUANTS + 1))
        one_error(capsys, ["fit", "-hf", REPO, "--quant", many], f"names {quants.MAX_QUANTS + 1} quants", code=2)
        assert len(asked_of(hub)) == 1  # a list too long is refused before the hub is asked
    one_error(capsys, ["fit", "qwen3-30b-a3b", "--quant", many], "--quant Q4_K_M,Q5_K_M", code=2)


def test_a_sweep_past_its_deadline_is_one_line_that_says_how_to_narrow_it(repo, monkeypatch, capsys):
    monkeypatch.setattr(quants, "SWEEP_SECONDS", 0.0)
    with fake_hub(repo, None, monkeypatch):
        line = one_error(capsys, ["fit", "-hf", REPO, "--quant", "all", *FIT], "passed its 0 s deadline after 0 of 3")
        assert "--quant Q4_K_M,Q5_K_M" in line
        with pytest.raises(LlamabenchError, match="deadline"):
            lb.fit_quants(f"hf://{REPO}", quant="all", n_ctx=4096, vram="24GiB")
    one_error(capsys, ["fit", "qwen3-30b-a3b", "--quant", "all", *FIT], "passed its 0 s deadline after 0 of")


@pytest.mark.parametrize("quant", ["", ",", " , "])
def test_a_quant_list_naming_nothing_is_one_line_before_the_hub_is_asked(tmp_path, monkeypatch, capsys, quant):
    with fake_hub(tmp_path, [[entry("M-Q4_K_M.gguf")]], monkeypatch) as hub:
        one_error(capsys, ["fit", "-hf", REPO, "--quant", quant], "no quant named", code=2)
        one_error(capsys, ["fit", "-hf", f"{REPO}:Q4_K_M", "--quant", quant], "quant", code=2)
        with pytest.raises(UsageError, match="no quant named"):
            lb.fit_quants(f"hf://{REPO}", quant=quant)
        assert asked_of(hub) == []


def test_fit_help_states_the_sweeps_bounds(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    assert f"{quants.MAX_QUANTS} quants at most and {quants.SWEEP_SECONDS:g} s in all" in capsys.readouterr().out


def test_a_sweep_with_options_that_cannot_go_together_is_one_line_not_a_row_a_quant(capsys):
    """Door round 3, trap 8: a Mac and a card in one --quant all gave six identical error rows and exit 1, where one
    model gives one line and exit 2. The fit's keywords are checked once, before any quant is weighed."""
    argv = ["fit", "qwen3-30b-a3b", "--quant", "all", "--vram", "apple-m4-pro-24gb,rtx-4090", "-c", "32k"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "a unified machine and a discrete card size differently" in err and len(err.strip().splitlines()) == 1


def test_a_sweep_past_the_trained_context_says_so_at_its_verdict(capsys):
    """Door round 3, trap 5: the --quant table said "fits 131072" for every quant of a 40,960-token model, with no
    note at all. The warning stands where the verdict is."""
    assert main(["fit", "exaone-4-0-1-2b", "--quant", "Q4_K_M,Q8_0", "--vram", "24GiB", "-c", "128k"]) == 0
    out = capsys.readouterr().out
    verdict = out.index("-> the largest quant that fits")
    warning = out.index("is past the model's trained context")
    assert warning < verdict


@pytest.mark.slow
def test_the_quant_on_a_file_or_a_catalog_id_campaign(gemma, tmp_path):
    """Round 5's own campaign on `--quant` asked of a GGUF file (llama.cpp's recipe) and of a catalog id: names that
    are no file type, lists that name nothing or too much, shell text, a quant beside -ot; each the CLI in its own
    process, an honest success or one line."""
    from tests.support.fuzz_harness import Case, run_campaign, summary

    env = {"LLAMABENCH_CACHE_DIR": str(tmp_path / "cache")}
    fit = ["-c", "4096", "--vram", "16GiB"]
    refused = ["", ",", " , ", "Q9_Z", "Q4_K_M;id", "$(id)", "Q4_K_M\n-ot", "q4_k_m," * 70, "Q4_K_M,Q9_Z", "ALL,Q8_0",
               "Q4_K_M" * 200, "\x1b[31m"]
    cases = [Case("quant: refused", ["fit", where, "--quant", q, *fit], env=env, must_fail=True, wall_s=90)
             for where in (str(gemma), "qwen3-30b-a3b") for q in refused]
    cases += [Case("quant: refused", ["inspect", str(gemma), "--quant", q], env=env, must_fail=True)
              for q in ("", "Q9_Z", "all")]
    answered = [(str(gemma), "q8_0"), (str(gemma), "IQ4_XS"), (str(gemma), "Q2_K,Q8_0"), ("qwen3-30b-a3b", "Q3_K_M"),
                ("qwen3-30b-a3b", "q4_k_m,Q8_0"), ("gemma-3-27b", "all")]
    cases += [Case("quant: answered", ["fit", where, "--quant", q, *fit], env=env, wall_s=240) for where, q in answered]
    cases.append(Case("quant: answered", ["inspect", str(gemma), "--quant", "Q3_K_M"], env=env))
    counts, per_group, bad = run_campaign(cases)
    print(f"\ncampaign (--quant on files and catalog ids): {summary(counts, per_group)}")
    assert not bad, summary(counts, per_group) + "\n" + "\n".join(f"{k}: {d}" for _, k, d in bad)
