"""The speed model's inputs as an attacker would type them (round 5's own campaign): cards that are not, numbers
that are not (inf, nan, 0, negative, 1e308), depths past any context, placements that cannot be, a --calibrate file
that is not a results file. Each case the CLI in its own process under a wall time and a memory bound: an honest
success or one line, and no printed speed that is not a positive finite number."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.fuzz_harness import Case, Run, run_campaign, summary

pytestmark = pytest.mark.slow
MODEL = "qwen3-30b-a3b"


def _speeds_are_sane(run: Run) -> str | None:
    """Every t/s printed (the json rows) positive and finite."""
    if run.returncode != 0:
        return None
    try:
        rows = json.loads(run.stdout)["rows"]
    except (ValueError, KeyError, TypeError):
        return "no json rows"
    for row in rows:
        for key in ("avg_ts", "ts_low", "ts_high"):
            value = row.get(key)
            if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1e12):
                return f"{row.get('test')}: {key} {value!r}"
    return None


def test_the_speed_model_campaign(tmp_path):
    env = {"LLAMABENCH_CACHE_DIR": str(tmp_path / "cache")}
    not_results = tmp_path / "not.jsonl"
    not_results.write_bytes(b"\xff\xfe" + b"{" * 5000)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    refused = [["--card", c] for c in ("", "rtx", "rtx-4090+", "+rtx-4090", "rtx-4090+" * 40, "\x1b[31m", "4090")]
    refused += [["--card", "rtx-4090", *extra] for extra in (
        ["--backend", "metal"], ["--backend", "cuda;id"], ["-d", "-1"], ["-d", "1e9"], ["-d", "5000000000"],
        ["-p", "-5"], ["-ub", "0"], ["-c", "0", "-d", "99999999"], ["--link", "0"], ["--link-ms", "-1"],
        ["--ram-bandwidth", "nan"], ["-ngl", "5", "--ram-bandwidth", "inf"], ["-ncmoe", "999999999999"],
        ["--calibrate", str(not_results)], ["--calibrate", str(empty)], ["--calibrate", str(tmp_path)],
        ["-ts", "1,1"], ["--bw-eff", "0"], ["--compute-eff", "2"])]
    refused += [["--bandwidth", b] for b in ("0", "-900", "nan", "inf", "1e400", "９００")]
    refused += [["--bandwidth", "900", "--tflops", t] for t in ("0", "nan", "-1")]
    cases = [Case("roofline: refused", ["roofline", MODEL, *argv], env=env, must_fail=True, wall_s=60)
             for argv in refused]
    answered = [["--card", "rtx-4090", "-d", "0,131072", "-c", "131072"], ["--card", "rtx-3060-12gb", "-ngl", "10"],
                ["--card", "rtx-4090+rtx-3090", "--link", "1.25", "--link-ms", "0.2"],
                ["--card", "apple-m4-pro-24gb", "--spec-type", "draft-mtp"], ["--card", "dgx-spark", "-ub", "4096"],
                ["--bandwidth", "1e6", "--tflops", "1e6"], ["--bandwidth", "0.001"],
                ["--card", "rx-7900-xtx", "--backend", "vulkan", "-ncmoe", "48"]]
    cases += [Case("roofline: answered", ["roofline", MODEL, *argv, "-o", "json"], env=env, wall_s=120,
                   check=_speeds_are_sane) for argv in answered]
    counts, per_group, bad = run_campaign(cases)
    print(f"\ncampaign (speed model inputs): {summary(counts, per_group)}")
    assert not bad, summary(counts, per_group) + "\n" + "\n".join(f"{k}: {d}" for _, k, d in bad)
    assert not any(re.search(r"\bnan\b|\binf\b", d, re.I) for _, _, d in bad)
