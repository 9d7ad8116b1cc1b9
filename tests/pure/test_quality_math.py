"""quality's pure parts: llama-perplexity's statistics from its sums, the chunks a text holds, and which measured
row a fit's lossy KV type shows (this context, else the deepest measured, else the command; never f16)."""

from __future__ import annotations

import math

import pytest

from llamabench.jobs.quality.lookup import fit_quality
from llamabench.llama.scoring import rows_per_decode
from llamabench.memory.divergence import KldSums, mean_and_uncertainty, n_chunks, percentile, quality_stats
from llamabench.records.quality import QualityRow, ScoredTextRef

TEXT = ScoredTextRef("t", "ab" * 32, 100, 50)


def test_llama_perplexity_statistics():
    assert mean_and_uncertainty(10.0, 20.0, 5) == (2.0, 0.0)  # ten values or fewer: no uncertainty, as it prints
    mean, unc = mean_and_uncertainty(22.0, 60.0, 11)
    assert mean == 2.0 and unc == pytest.approx(math.sqrt((60 / 11 - 4) / 10))
    assert percentile([0.0, 1.0, 2.0, 3.0], 0.5) == 1.5 and percentile([1.0], 0.99) == 1.0
    sums = KldSums(sum_nll=2.0 * 20, sum_nll2=4.0 * 20, sum_nll_base=1.0 * 20, sum_nll_base2=20.0, sum_kld=0.2,
                   sum_kld2=0.004, n_same_top=15, count=20)
    s = quality_stats(sums, [0.01] * 20)
    assert s.ppl == pytest.approx(math.e ** 2) and s.ppl_base == pytest.approx(math.e) and s.same_top_p == 75.0
    assert s.kld_mean == pytest.approx(0.01) and s.kld_p99 == pytest.approx(0.01) and s.n_tokens == 20


def test_chunks_and_rows():
    assert n_chunks(10_000, 4096, None) == 2 and n_chunks(10_000, 4096, 1) == 1 and n_chunks(100, 4096, None) == 0
    assert rows_per_decode(262_144, 3, 512) == 64  # a 262k vocabulary, three contexts: 64 rows of logits a call
    assert rows_per_decode(32_000, 2, 512) == 512 and rows_per_decode(10**7, 9, 512) == 32


def _row(n_ctx, kld, types=("q8_0", "q8_0"), base="f16 KV"):
    return QualityRow(n_ctx, *types, base, 1, 1, kld, 0.0, kld, kld, 10.0, 1.0, 10.0, 1.0, 90.0, 1.0, 100)


def test_a_fit_shows_this_context_else_the_deepest_measured_else_the_command():
    measured = [(_row(512, 0.1), TEXT), (_row(4096, 0.2), TEXT), (_row(4096, 0.9, base="other"), TEXT)]
    pairs = [(4096, "q8_0", "q8_0"), (8192, "q8_0", "q8_0"), (4096, "q4_0", "q4_0"), (4096, "f16", "f16")]
    here, deeper, none = fit_quality(pairs, measured, model="m.gguf", results="r.jsonl")
    assert here.at_this_context and here.row.kld_mean == 0.2
    assert not deeper.at_this_context and deeper.row.n_ctx == 4096 and deeper.n_ctx == 8192
    assert none.row is None
    assert none.command == "llamabench quality m.gguf -c 4096 -ctk q4_0 -ctv q4_0 --results r.jsonl"
