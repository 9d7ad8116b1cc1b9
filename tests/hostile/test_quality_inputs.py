"""`quality`'s inputs as a user gives them (issue 54): a batch below 32 is taken as llama-perplexity takes it, a context
that scores no token is one line before any model is loaded, and a text too long to tokenize within the deadline is
refused by its size, the cap and the deadline agreeing and said in --help."""

from __future__ import annotations

import json

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core.errors import UsageError
from llamabench.jobs.quality import job
from llamabench.llama.scoring import rows_per_decode
from llamabench.memory.divergence import scored_per_chunk
from llamabench.world import texts


def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("llamabench: error: "), err
    return err[0]


# -b: llama_decode takes at most n_batch tokens a call (GGML_ASSERT(n_tokens_all <= cparams.n_batch)) --------------
@pytest.mark.parametrize("n_vocab, n_contexts, n_batch, rows", [
    (262_144, 3, 8, 8),  # -b 8 on Gemma 3's vocabulary: the logits budget allows 64 rows, the batch 8
    (32_000, 2, 1, 1),  # -b 1: one token a call, as llama-perplexity -b 1 decodes
    (10**7, 9, 31, 31),  # the budget's floor of 32 rows is still no more than the batch
    (10**7, 9, 512, 32),  # a batch above the floor: the floor
    (262_144, 3, 512, 64),  # the default batch: the budget's 64
])
def test_a_decode_call_never_holds_more_rows_than_the_batch(n_vocab, n_contexts, n_batch, rows):
    assert rows_per_decode(n_vocab, n_contexts, n_batch) == rows


@pytest.mark.slow
def test_a_batch_below_32_is_scored_as_llama_perplexity_scores_it(gemma, capsys):
    """-b 8 aborted llama.cpp after the model loaded (the scored half went 32 rows a call into a context of n_batch 8);
    llama-perplexity -b 8 decodes each chunk 8 tokens a call, and so does quality now. -nr: the CPU's repacked AMX
    weights crash this machine's llama.cpp whatever the batch (llama-perplexity too)."""
    assert main(["quality", str(gemma), "-c", "64", "-b", "8", "--chunks", "1", "-nr", "-t", "2",
                 "-ctk", "q8_0", "-ctv", "f16", "-o", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    (row,) = record["rows"]
    assert row["chunks"] == 1 and row["n_tokens_scored"] == scored_per_chunk(64) and row["reason"] is None
    assert 0 < row["kld_mean"] < 1 and record["rows_per_decode"] == 8


# -c: the second half of a chunk less its last token must hold a token ----------------------------------------------
@pytest.mark.parametrize("n_ctx, scored", [
    (2, 0),  # positions 1..0: nothing, and llama-perplexity -c 2 prints "[1]-nan"
    (3, 1),  # position 1 predicts token 2: the least that scores
    (4, 1),  # positions 2..2
    (512, 255),  # the judge's -c 512: 255 a chunk (tests/llama_tools/test_quality.py)
])
def test_the_tokens_a_chunk_scores(n_ctx, scored):
    assert scored_per_chunk(n_ctx) == scored
    assert (scored >= 1) == (n_ctx >= job.QUALITY_MIN_N_CTX)


@pytest.fixture
def nothing_loads(monkeypatch):
    """The refusals come before any model or vocabulary is loaded: loading fails the test."""
    def loaded(*_args, **_kwargs):
        raise AssertionError("a model was loaded for an input that could be refused before")
    monkeypatch.setattr(job, "text_tokens", loaded)
    monkeypatch.setattr(job, "run_job", loaded)


@pytest.mark.parametrize("n_ctx", ["1", "2", "2,4096"])
def test_a_context_that_scores_nothing_is_one_line_before_loading(nothing_loads, tmp_path, capsys, n_ctx):
    """-c 2 was taken, scored no token, and ended in a NaN the record could not hold (an internal error)."""
    assert main(["quality", str(tmp_path / "model.gguf"), "-c", n_ctx]) == 2
    line = one_error(capsys)
    assert f"-c {min(int(c) for c in n_ctx.split(','))}:" in line and "give 3 or more" in line, line


def test_the_api_refuses_it_too(nothing_loads, tmp_path):
    with pytest.raises(UsageError, match="give 3 or more"):
        lb.quality(tmp_path / "model.gguf", n_ctx=2)


# -f: a text the deadline can tokenize --------------------------------------------------------------------------------
def test_a_text_past_the_cap_is_refused_by_its_size(tmp_path):
    """256 MiB was taken, a text llama.cpp's tokenizer (quadratic in Gemma's newline tokens) cannot count within the
    300 s allowed on this machine: 4 MiB of prose takes some 130 s here. Refused by its size alone (a sparse file:
    nothing read)."""
    text = tmp_path / "big.txt"
    with open(text, "wb") as f:
        f.truncate(texts.MAX_TEXT_BYTES + 1)
    with pytest.raises(UsageError, match=r"4 MiB at most, what llama.cpp tokenizes within quality's 300 s"):
        texts.read_text(text)
    (tmp_path / "fits.txt").write_text("a natural text\n" * 100)
    assert texts.read_text(tmp_path / "fits.txt").n_chars == 1500


def test_quality_help_says_its_limits(capsys):
    with pytest.raises(SystemExit):
        main(["quality", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "The text (-f) is 4 MiB at most, tokenized within 300 s." in out
    assert "-c is 3 or more" in out and "-b takes any batch" in out
