"""The package's shape, read from its files: no module over 600 lines, each runtime's name spelled in one place and
every runtime answering the same questions, and each job's options declared once (the API function's keywords and
the job's parameters; the schema gives each its spellings, help and default), so a command cannot drift from it."""

from __future__ import annotations

import argparse
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from llamabench import api
from llamabench.commands.output import api_options
from llamabench.jobs.bench.plan import BENCH_PARAMS
from llamabench.jobs.fit.options import FIT_PARAMS
from llamabench.jobs.inspect.job import INSPECT_PARAMS
from llamabench.jobs.quality.job import QUALITY_PARAMS
from llamabench.jobs.roofline.job import ROOFLINE_PARAMS
from llamabench.runtimes.registry import BY_NAME, RUNTIMES, bench_runtime
from llamabench.runtimes.runtime import BenchDriver
from llamabench.settings.params import SCHEMA
from llamabench.settings.values import Runtime

ROOT = Path(__file__).resolve().parents[2] / "llamabench"
MAX_LINES = 600


def test_no_module_is_over_600_lines():
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in ROOT.rglob("*.py")}
    long = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert long == {}


def string_constants(path: Path) -> set[str]:
    """Every string literal of a module but its docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings}


def test_each_runtime_name_is_spelled_in_one_place():
    """The runtime names are literals only in their enum (and llama-cpp-python as the pip distribution's name)."""
    names = {r.value for r in Runtime}
    spelled = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if string_constants(p) & names)
    assert spelled == ["settings/values.py", "world/versions.py"]


def test_every_runtime_answers_the_same_questions():
    """Each runtime by --runtime name, each way bench drives one, and a command line for a fit row."""
    assert set(BY_NAME) == set(Runtime)
    assert {bench_runtime(False).bench_driver, bench_runtime(True).bench_driver,
            bench_runtime(True, "http://127.0.0.1:8080").bench_driver} == set(BenchDriver)
    for runtime in RUNTIMES:
        assert callable(runtime.command) and runtime.record_name in {r.value for r in Runtime}


# command -> (API function, the job's context parameters, what the command declares that the API does not,
# what the API takes that the command leaves out)
JOBS = {
    "inspect": (api.inspect, INSPECT_PARAMS, set(), set()),
    "verify": (api.verify, INSPECT_PARAMS, {"matrix"}, set()),  # --matrix: lb.verify_matrix
    "fit": (api.fit, FIT_PARAMS, set(), set()),
    "bench": (api.bench, BENCH_PARAMS + ("n_seq", "kv_unified", "spec_type", "spec_draft_n_max"), set(), set()),
    "roofline": (api.roofline, ROOFLINE_PARAMS, set(), {"results"}),  # a prediction is not kept
    "quality": (api.quality, QUALITY_PARAMS, set(), set()),
}


@pytest.mark.parametrize("command", sorted(JOBS))
def test_each_commands_options_are_its_api_functions(command):
    """A command's options are its API function's keywords and its job's parameters, nothing else: an option added
    to one and not the other fails here."""
    function, params, cli_only, api_only = JOBS[command]
    parser = argparse.ArgumentParser()
    importlib.import_module(f"llamabench.commands.{command}").add_arguments(parser)
    declared = {a.dest for a in parser._actions if a.dest != "help"} - {"model", "hf_repo", "output"}
    assert declared == set(api_options(function)) - api_only | set(params) | cli_only
    assert declared <= set(SCHEMA)


def test_the_drift_check_can_fail():
    """api_options reads the signature: a keyword added to a function is an option the command must declare."""
    def job(model, *, card=None, results=None, progress=None, _source=None, **params):
        return model

    assert api_options(job) == ("card", "results")


def test_reading_a_results_file_loads_no_job():
    """The records sit below the jobs: reading them back loads no job (no fit search, no llama.cpp child)."""
    code = ("import sys, llamabench.records.records; "
            "print(sorted(m for m in sys.modules if m.startswith(('llamabench.jobs', 'llama_cpp'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
