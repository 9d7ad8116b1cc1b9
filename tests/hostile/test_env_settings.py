"""Settings from the environment and the command line that meant something else (issue 54): every number the tool
reads from an environment variable is ASCII digits, parsed in one place (core.environment), and anything else is one
line naming the variable, never a ValueError ('²' passes str.isdigit, and int() then fails) nor a number Python reads
and a shell user did not write ('٣', '1_000'); and --wired-limit 0 is what iogpu.wired_limit_mb=0 is, macOS's
default ceiling, not a GPU of 0 bytes."""

from __future__ import annotations

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.core.errors import UsageError
from llamabench.memory.backends import MIN_BATCH_ENV, VULKAN_RANGE_ENV, rules_for
from llamabench.settings.budget import budget, with_wired_limit
from llamabench.world import paths

NOT_ASCII_NUMBERS = [
    "²",  # str.isdigit() is true, int() raises ValueError: the traceback of the issue
    "٣",  # an Arabic-Indic three: int() and float() read it as 3
    "３",  # a fullwidth three, the same
    "1_000",  # Python's digit grouping: 1000 to int(), no number to a shell or atoi
    "0x10", "4e3", "abc", "1 2",
]


@pytest.mark.parametrize("value", NOT_ASCII_NUMBERS)
@pytest.mark.parametrize("variable, backend", [(VULKAN_RANGE_ENV, "vulkan"), (MIN_BATCH_ENV, "cuda")])
def test_a_backend_limit_that_is_no_ascii_number_is_one_line_naming_it(variable, backend, value):
    with pytest.raises(UsageError, match=variable) as caught:
        rules_for(backend, {variable: value})
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("variable, value, field, read", [
    (VULKAN_RANGE_ENV, " 134217728 ", "max_tensor_bytes", 134217728),  # lavapipe's 128 MiB, blanks around it
    (MIN_BATCH_ENV, "64", "min_batch", 64),
    (MIN_BATCH_ENV, "-1", "min_batch", -1),  # atoi's -1: every batch offloaded, as ggml does with it
    (MIN_BATCH_ENV, "", "min_batch", 32),  # set but blank: the default
])
def test_an_ascii_number_is_read(variable, value, field, read):
    backend = "vulkan" if variable == VULKAN_RANGE_ENV else "cuda"
    assert getattr(rules_for(backend, {variable: value}), field) == read


@pytest.mark.parametrize("value", ["0", "-5", "4294967296"])
def test_a_storage_range_past_vulkans_uint32_is_refused(value):
    with pytest.raises(UsageError, match=f"{VULKAN_RANGE_ENV}.*from 1 to 4,294,967,295"):
        rules_for("vulkan", {VULKAN_RANGE_ENV: value})


def test_the_superscript_is_one_line_at_the_command(monkeypatch, capsys):
    monkeypatch.setenv(VULKAN_RANGE_ENV, "²")
    assert main(["fit", "qwen3-30b-a3b", "--backend", "vulkan", "--vram", "24GB", "-c", "4096"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"llamabench: error: {VULKAN_RANGE_ENV}='²'"), err


@pytest.mark.parametrize("value", NOT_ASCII_NUMBERS)
@pytest.mark.parametrize("variable, read", [(paths.HTTP_TIMEOUT_ENV, paths.http_timeout),
                                            (paths.RPC_TIMEOUT_ENV, paths.rpc_timeout)])
def test_a_deadline_that_is_no_ascii_number_is_one_line_naming_it(monkeypatch, variable, read, value):
    monkeypatch.setenv(variable, value)
    if value == "4e3":  # 4000 seconds, written as a number: past the most a deadline takes
        with pytest.raises(UsageError, match=f"{variable}.*at most 3600"):
            read()
        return
    with pytest.raises(UsageError, match=variable):
        read()


@pytest.mark.parametrize("value", ["²/15", "1024/٣", "1_024/15", "1024", "1024/-1"])
def test_a_low_speed_that_is_no_ascii_pair_is_one_line_naming_it(monkeypatch, value):
    monkeypatch.setenv(paths.HTTP_LOW_SPEED_ENV, value)
    with pytest.raises(UsageError, match=paths.HTTP_LOW_SPEED_ENV):
        paths.http_low_speed()


@pytest.mark.parametrize("variable, value, read", [
    (paths.HTTP_TIMEOUT_ENV, " 2.5 ", lambda: paths.http_timeout() == 2.5),
    (paths.RPC_TIMEOUT_ENV, "1e2", lambda: paths.rpc_timeout() == 100.0),
    (paths.HTTP_LOW_SPEED_ENV, "0/0", lambda: paths.http_low_speed() == (0, 0.0)),  # off, as documented
    (paths.HTTP_LOW_SPEED_ENV, "1024/15", lambda: paths.http_low_speed() == (1024, 15.0)),
])
def test_the_documented_forms_still_read(monkeypatch, variable, value, read):
    monkeypatch.setenv(variable, value)
    assert read()


# --wired-limit 0 -----------------------------------------------------------------------------------------------------
def test_wired_limit_zero_is_the_default_ceiling_as_the_sysctl_reads_it():
    """`sysctl iogpu.wired_limit_mb=0` gives the GPU macOS's default (recommendedMaxWorkingSetSize); --wired-limit 0
    sized a 0-byte GPU, on which nothing fits."""
    mac = budget("apple-m4-pro-24gb")
    assert with_wired_limit(mac, 0).bytes == mac.bytes > 0
    assert with_wired_limit(mac, 20000).bytes == 20000 * 2**20  # a number still raises (or lowers) it


def test_fit_with_wired_limit_zero_answers_as_without_it():
    plain = lb.fit("qwen3-30b-a3b", vram="apple-m4-pro-24gb", n_ctx=4096)
    zero = lb.fit("qwen3-30b-a3b", vram="apple-m4-pro-24gb", n_ctx=4096, wired_limit=0)
    assert zero.fit.budgets[0].bytes == plain.fit.budgets[0].bytes
    assert [r.max_n_ctx for r in zero.fit.rows] == [r.max_n_ctx for r in plain.fit.rows]
