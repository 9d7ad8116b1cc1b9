"""Fuzz cases for what a shared results file or a projector can do (classes 1, 6 and 7 of the hostile campaign).

`cases(tmp, stack)` builds the files under `tmp` and returns the cases; `test_fuzz_hostile.py` runs them with
the others. Every results file is a real record set (the tracked example, reports/qwen3-5-35b-a3b) with one
field mutated, as someone who shares a file could write it:
  1 shared results file: model labels that name folders outside --out-dir (`report F --out-dir ...`)
  6 values read back: NaN, Infinity, negative, zero, 400-digit, null, list, string and object values in the
    numeric and string fields report and `roofline --calibrate` read; projectors with absurd vision values
  7 terminal injection: escape sequences and forged lines in labels, names, hosts and keys
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from pathlib import Path

from llamabench.jobs.twin.writer import TensorSpec, write_gguf
from tests.support import REPO
from tests.support.fuzz_harness import Case, Run

REAL = REPO / "reports" / "qwen3-5-35b-a3b" / "results.jsonl"
MODEL = "qwen3-5-35b-a3b"
TG_DEEP = 6  # in real_records(): the tg record at depth 2048 (the deepest, calibrated on)
TG_SHALLOW = 4
G1, G6, G7 = "1 shared results file", "6 values read back", "7 terminal injection"


def real_records() -> list[dict]:
    """The newest run of the tracked example: inspect, verify, fit, then pp and tg at depths 0 and 2048."""
    return [json.loads(line) for line in REAL.read_text().splitlines() if line.strip()][7:]


def set_at(record: dict, dotted: str, value) -> dict:
    record = copy.deepcopy(record)
    *parents, last = dotted.split(".")
    node = record
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return record


def write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN and Infinity bare, as Python writes them
    return path


# checks -------------------------------------------------------------------------------------------
_NOT_A_NUMBER = re.compile(r"\b(nan|infinity)\b|(?<![\w.])-?inf\b", re.I)
_NEGATIVE_SPEED = re.compile(r"(?<![\w.+])-\d[\d,]*(\.\d+)?\s*(t/s|tok/s|GB/s|TFLOPS)")


def _numbers_wrong(text: str, where: str) -> str | None:
    if m := _NOT_A_NUMBER.search(text):
        return f"{where} prints {m[0]!r}"
    if m := _NEGATIVE_SPEED.search(text):
        return f"{where} prints a negative speed {m[0]!r}"
    return None


def _roofline_table_wrong(text: str) -> str | None:
    """Every column of the roofline table but the error is a count or a speed: none negative."""
    for line in text.splitlines():
        cells = line.split()
        if cells and re.fullmatch(r"[\d,]+", cells[0]):
            negative = [c for i, c in enumerate(cells) if c.startswith("-") and c != "-" and not c.endswith("%")]
            if negative:
                return f"a negative value in the roofline table: {line.strip()}"
    return None


def sane_output(out_dir: Path | None = None):
    """A check: no NaN, infinity or negative speed on stdout, nor in the report it wrote (when it did)."""

    def check(run: Run) -> str | None:
        wrong = _numbers_wrong(run.stdout, "stdout") or _roofline_table_wrong(run.stdout)
        if wrong or run.returncode != 0 or out_dir is None:
            return wrong
        for name in ("report.md", "record.json"):
            path = out_dir / name
            if path.exists() and (wrong := _numbers_wrong(path.read_text(errors="replace"), name)):
                return wrong
        return None

    return check


def no_escape(run: Run) -> str | None:
    for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        if any(c in text for c in "\x1b\x07\x9b\u202e"):
            return f"a raw escape character reached {name}"
        if any(line.strip().startswith("FORGED") for line in text.splitlines()):
            return f"a forged line reached {name}"
    return None


# 1: labels that name folders --------------------------------------------------------------------
def _labels(tmp: Path) -> list[str]:
    return ["../../escaped", "../../../../escaped-top", "../" * 40 + str(tmp / "escaped-root").lstrip("/"),
            str(tmp / "abs-target"), "/", ".", "..", "", "a\x00b", "x" * 300, "é" * 200, "..\\..\\win",
            "a/../../../sub", "~", "-rf", ".hidden"]


def label_cases(tmp: Path, env: dict) -> list[Case]:
    inspect = real_records()[0]
    cases = []
    for i, label in enumerate(_labels(tmp)):
        w = tmp / f"label-{i}" / "w"
        out = w / "a" / "b" / "out"
        out.mkdir(parents=True)  # made before, so that only `out` changes in the watched folder
        results = write(tmp / f"label-{i}" / "in" / "results.jsonl", [inspect, set_at(inspect, "model.label", label)])
        # where the label would land if joined to --out-dir as it is: outside it, a path that must not appear
        reached = out.joinpath(label).resolve() if "\x00" not in label else out
        inside = reached == out or out in reached.parents
        forbidden = () if inside else (reached / "record.json",) if reached.is_dir() else (reached,)
        cases.append(Case(group=G1, argv=["report", str(results), "--out-dir", str(out)], env=env, cwd=w,
                          inputs=(results,), watch=w, allowed=(out,), forbidden=forbidden, check=no_escape))
    # one model alone: its folder is made under the reports folder (LLAMABENCH_REPORTS_DIR)
    for i, label in enumerate(("../../../escaped-single", str(tmp / "abs-single"), "")):
        w = tmp / f"single-{i}" / "w"
        w.mkdir(parents=True)
        results = write(tmp / f"single-{i}" / "in" / "results.jsonl", [set_at(inspect, "model.label", label)])
        cases.append(Case(group=G1, argv=["report", str(results)], cwd=w,
                          env={**env, "LLAMABENCH_REPORTS_DIR": str(w / "reports")}, inputs=(results,), watch=w,
                          allowed=(w / "reports",), forbidden=(tmp / "escaped-single", tmp / "abs-single"),
                          check=no_escape))
    # a folder of the label's name that is a link out of --out-dir: refused, nothing written through it
    w = tmp / "link" / "w"
    (w / "out").mkdir(parents=True)
    (tmp / "link" / "outside").mkdir()
    (w / "out" / "evil").symlink_to(tmp / "link" / "outside")
    results = write(tmp / "link" / "in" / "results.jsonl", [inspect, set_at(inspect, "model.label", "evil")])
    cases.append(Case(group=G1, argv=["report", str(results), "--out-dir", str(w / "out")], env=env, cwd=w,
                      inputs=(results,), watch=tmp / "link", allowed=(w / "out",), must_fail=True,
                      forbidden=(tmp / "link" / "outside" / "record.json",)))
    return cases


# 6: values read back ----------------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
# (record index, field, value): each must be refused as a broken record
REFUSED = [(TG_DEEP, "samples_ns", [NAN]), (TG_DEEP, "samples_ns", [INF, 1]), (TG_DEEP, "samples_ns", [-1852310947]),
           (TG_DEEP, "samples_ns", [0, 0]), (TG_DEEP, "samples_ns", [10**400]), (TG_DEEP, "samples_ns", None),
           (TG_DEEP, "samples_ns", "x"), (TG_DEEP, "test.n_tokens", 0), (TG_DEEP, "test.n_tokens", [1]),
           (TG_DEEP, "test.depth", -1), (TG_DEEP, "test.depth", 3.7), (TG_DEEP, "repetitions", True),
           (TG_DEEP, "roofline.mbu", NAN), (TG_DEEP, "roofline.achieved_gbps", -0.2),
           (TG_DEEP, "roofline.weights_bytes", 0), (TG_DEEP, "roofline.full_gqa_attention_flops", None),
           (TG_DEEP, "machine.memory_bandwidth.peak_gbps", INF), (TG_DEEP, "model.name", [1]),
           (TG_DEEP, "model.label", None), (TG_DEEP, "params", {"n_ctx": {}}), (TG_SHALLOW, "samples_ns", [-1, -1]),
           (0, "inspection.footprint.kv_bytes_per_token", -20480), (0, "kv_curve.0.n_ctx", NAN),
           (2, "fit.contexts", [10**400]), (1, "allocations.kv_caches.0.size_mib", INF)]


def value_cases(tmp: Path, env: dict) -> list[Case]:
    cases = []
    for i, (index, dotted, value) in enumerate(REFUSED):
        rows = real_records()
        rows[index] = set_at(rows[index], dotted, value)
        results = write(tmp / f"value-{i}" / "results.jsonl", rows)
        out = tmp / f"value-{i}" / "out"
        cases.append(Case(group=G6, argv=["report", str(results), "--out-dir", str(out)], env=env, cwd=results.parent,
                          inputs=(results,), must_fail=True, forbidden=(out,), check=sane_output(out)))
        if index in (TG_DEEP, TG_SHALLOW) and i % 3 == 0:  # the calibration reads the tg records
            cases.append(Case(group=G6, argv=["roofline", MODEL, "--calibrate", str(results)], env=env,
                              cwd=results.parent, inputs=(results,), must_fail=True, check=sane_output()))
    # an integer past Python's 4300 digits: json.loads itself refuses it (a ValueError, not a JSONDecodeError)
    results = write(tmp / "value-digits" / "results.jsonl", real_records())
    text = results.read_text().splitlines()
    text[TG_DEEP] = text[TG_DEEP].replace('"repetitions": 2', '"repetitions": ' + "9" * 5000, 1)
    results.write_text("\n".join(text) + "\n")
    cases += [Case(group=G6, argv=["report", str(results), "--out-dir", str(tmp / "value-digits" / "out")], env=env,
                   cwd=results.parent, inputs=(results,), check=sane_output(tmp / "value-digits" / "out")),
              Case(group=G6, argv=["roofline", MODEL, "--calibrate", str(results)], env=env, cwd=results.parent,
                   inputs=(results,), check=sane_output())]
    # honest successes: odd but possible values, each answered without NaN, infinity or a negative speed
    odd = {"deeper-faster": [(TG_DEEP, "samples_ns", [1000, 1000])],
           "slowest": [(TG_DEEP, "samples_ns", [2**62, 2**62]), (TG_SHALLOW, "samples_ns", [2**62, 2**62])],
           "no-peak": [(TG_DEEP, "roofline.peak_gbps", None), (TG_DEEP, "roofline.mbu", None)],
           "no-flops": [(i, f"roofline.{k}", 0) for i in (TG_DEEP, TG_SHALLOW) for k in ("attention_flops",
                                                                                         "full_gqa_attention_flops")]}
    for name, changes in odd.items():
        rows = real_records()
        for index, dotted, value in changes:
            rows[index] = set_at(rows[index], dotted, value)
        results = write(tmp / f"odd-{name}" / "results.jsonl", rows)
        out = tmp / f"odd-{name}" / "out"
        cases += [Case(group=G6, argv=["report", str(results), "--out-dir", str(out)], env=env, cwd=results.parent,
                       inputs=(results,), check=sane_output(out)),
                  Case(group=G6, argv=["roofline", MODEL, "--calibrate", str(results)], env=env, cwd=results.parent,
                       inputs=(results,), check=sane_output())]
    return cases


def projector(path: Path, **vision) -> Path:
    """A small clip GGUF: the vision values given (None: the key left out), one tiny tensor."""
    values = {"image_size": 896, "patch_size": 14, "embedding_length": 1152, "feed_forward_length": 4304,
              "block_count": 27, "attention.head_count": 16} | vision
    keys = {"general.architecture": "clip", "clip.has_vision_encoder": True, "clip.projector_type": "gemma3",
            **{f"clip.vision.{k}": v for k, v in values.items() if v is not None}}
    write_gguf(path, "clip", keys, [TensorSpec("v.post_ln.weight", (64,), "f32", "zeros")])
    return path


FIT = ["fit", MODEL, "-c", "4096", "-ctk", "f16", "-ctv", "f16"]


def projector_cases(tmp: Path, env: dict) -> list[Case]:
    bad = {"patch-over-image": {"image_size": 16, "patch_size": 32}, "huge-image": {"image_size": 4294967295},
           "image-8193": {"image_size": 8193}, "patch-0": {"patch_size": 0}, "no-heads": {"attention.head_count": 0},
           "heads-2e9": {"attention.head_count": 2_000_000_000}, "negative-image": {"image_size": -896},
           "image-as-text": {"image_size": "896"}, "image-as-float": {"image_size": 896.0},
           "no-patch-key": {"patch_size": None}}
    cases = []
    for name, values in bad.items():
        path = projector(tmp / "proj" / f"{name}.gguf", **values)
        cases.append(Case(group=G6, argv=[*FIT, "--mmproj", str(path)], env=env, cwd=tmp / "proj", inputs=(path,),
                          must_fail=True, check=sane_output()))
    path = projector(tmp / "proj" / "gemma3.gguf")  # a real encoder's values: an honest fit
    cases.append(Case(group=G6, argv=[*FIT, "--mmproj", str(path)], env=env, cwd=tmp / "proj", inputs=(path,),
                      check=sane_output(), wall_s=120))
    return cases


# 7: terminal injection ----------------------------------------------------------------------------
INJECTIONS = {"model.name": "Q\x1b]0;pwned-title\x07\x1b[2J", "model.label": "m\nFORGED all match",
              "machine.host": "vm\x1b[31m\r\nFORGED host", "machine.cpu": "\x9b2J\u202eevil",
              "params.type_k": "f16\x1b[2J", "allocations.kv_buffers_mib": {"CPU\x1b[2J\nFORGED": 2560.0}}


def injection_cases(tmp: Path, env: dict) -> list[Case]:
    cases = []
    for i, (dotted, value) in enumerate(INJECTIONS.items()):
        rows = [set_at(r, dotted, value) for r in real_records()] if dotted.startswith(("model.", "machine.")) \
            else [set_at(r, dotted, value) if r["schema"].startswith("llamabench/bench") else r for r in real_records()]
        results = write(tmp / f"inject-{i}" / "results.jsonl", rows)
        out = tmp / f"inject-{i}" / "out"
        cases += [Case(group=G7, argv=["report", str(results), "--out-dir", str(out)], env=env, cwd=results.parent,
                       inputs=(results,), check=no_escape),
                  Case(group=G7, argv=["roofline", MODEL, "--calibrate", str(results)], env=env, cwd=results.parent,
                       inputs=(results,), check=no_escape)]
    # lines passed over are named in warnings: an escape in the schema version, a torn line of raw escapes
    rows = real_records() + [set_at(real_records()[0], "schema", "llamabench/inspect-record/9\x1b]0;x\x07\nFORGED")]
    results = write(tmp / "inject-schema" / "results.jsonl", rows)
    with open(results, "ab") as f:
        f.write(b'{"schema": "llamabench/bench-rec\x1b[2J\x07\n')
    cases.append(Case(group=G7, argv=["report", str(results), "--out-dir", str(tmp / "inject-schema" / "out")], env=env,
                      cwd=results.parent, inputs=(results,), check=no_escape))
    return cases


def cases(tmp: Path, stack: contextlib.ExitStack) -> list[Case]:
    """Every case of classes 1, 6 and 7 (`stack` takes what must be undone after the campaign: nothing here)."""
    env = {"LLAMABENCH_CACHE_DIR": str(tmp / "cache"), "LLAMABENCH_REPORTS_DIR": str(tmp / "reports")}
    return label_cases(tmp, env) + value_cases(tmp, env) + projector_cases(tmp, env) + injection_cases(tmp, env)
