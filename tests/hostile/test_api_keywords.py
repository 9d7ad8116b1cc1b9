"""The API's keywords of the wrong type (issue 54): each is a UsageError in one line before the job starts, never a
TypeError from deep inside it ('int' object is not callable) nor a value taken for another (True as 1 GB/s). The
keywords that are no llama.cpp parameter are checked by kind in one place (jobs.arguments.checked); the schema's
parameters by their parsers (settings.sweep.parse_value)."""

from __future__ import annotations

import inspect

import pytest

import llamabench as lb
from llamabench.core.errors import UsageError
from llamabench.jobs.arguments import CALLBACKS, PATHS

CATALOG_ID = "qwen3-30b-a3b"  # a catalog id: nothing to download, and every job but quality plans on it
JOBS = ("inspect", "verify", "fit", "fit_quants", "bench", "roofline", "quality")


def refused(call, *, match: str) -> str:
    with pytest.raises(UsageError, match=match) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("call, match", [
    (lambda: lb.quality("model.gguf", on_event=5), "on_event: a function"),  # 'int' object is not callable
    (lambda: lb.bench(CATALOG_ID, n_prompt=16, n_gen=0, dry_run=True, on_event="print"), "on_event: a function"),
    (lambda: lb.fit(CATALOG_ID, progress=5), "progress: a function"),  # taken, and never called
    (lambda: lb.fit_quants(CATALOG_ID, quant=5), "quant: 'all' or a comma list"),
    (lambda: lb.fit_quants(CATALOG_ID, quant=["Q4_K_M", "Q8_0"]), "quant: 'all' or a comma list"),
    (lambda: lb.fit_quants(CATALOG_ID, progress=5), "progress: a function"),  # fit's, passed on: checked first
    (lambda: lb.roofline(CATALOG_ID, results=5), "results: a path"),  # TypeError from pathlib
    (lambda: lb.roofline(CATALOG_ID, card="rtx-4090", calibrate=["a.jsonl"]), "calibrate: a path"),
    (lambda: lb.roofline(CATALOG_ID, bandwidth=True), "bandwidth: True and False are for on/off"),  # was 1 GB/s
    (lambda: lb.roofline(CATALOG_ID, card="rtx-4090", bw_eff=True), "bw_eff: True and False"),
    (lambda: lb.inspect(CATALOG_ID, n_ctx=[4096, False]), "n_ctx: True and False"),
])
def test_a_keyword_of_the_wrong_type_is_one_line(call, match):
    refused(call, match=match)


def keyword_only(name: str) -> list[str]:
    return [p.name for p in inspect.signature(getattr(lb, name)).parameters.values()
            if p.kind is p.KEYWORD_ONLY and not p.name.startswith("_")]


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("wrong", [5, 2.5, object(), b"bytes", ["a", "b"]])
def test_every_callback_and_path_keyword_of_every_job_is_checked(job, wrong):
    """Generally: whatever a job's callbacks and files are called, a value of another type is refused before the job
    reads or runs anything (the model is a catalog id, or a file that does not exist: the refusal comes first)."""
    model = "missing.gguf" if job == "quality" else CATALOG_ID
    checked = [name for name in keyword_only(job) if name in CALLBACKS or name in PATHS]
    assert checked, job
    for name in checked:
        if name in CALLBACKS and callable(wrong):
            continue
        refused(lambda: getattr(lb, job)(model, **{name: wrong}), match=f"^{name}: ")


def test_a_callable_and_a_path_are_taken(tmp_path):
    seen = []
    run = lb.bench(CATALOG_ID, n_prompt=16, n_gen=0, dry_run=True, on_event=lambda kind, data: seen.append(kind),
                   results=tmp_path / "r.jsonl")
    assert run.dry_run and run.results == str(tmp_path / "r.jsonl")
    assert lb.roofline(CATALOG_ID, card="rtx-4090", bandwidth=None).rows
