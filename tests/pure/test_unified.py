"""A unified machine (a Mac, a Ryzen AI Max, a GB10) is one pool with two limits: the device's buffers within its
own ceiling, and the device's, the host's and the mapped weights within the RAM less the OS's share. Pure: the fit's
arithmetic with a fake compute buffer, and the named machines held to the figures llama.cpp's logs print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamabench import api
from llamabench.core.errors import UsageError
from llamabench.jobs.fit.search import Fitter
from llamabench.memory.placement import Placement, PlacementKind, recommend
from llamabench.memory.runtimes import RuntimeConfig
from llamabench.memory.unified import Verdict, read_pool
from llamabench.model.metadata import TensorInfo
from llamabench.model.weights import breakdown
from llamabench.render.fit import fits_text, pool_line
from llamabench.settings.budget import Budget, budget, with_wired_limit
from llamabench.settings.params import Params
from tests.pure.test_fit_search import GEOMETRY, N_LAYER  # the small MoE those tests size

MIB, GIB = 2**20, 2**30
def moe(expert_bytes: int) -> tuple[TensorInfo, ...]:
    """token_embd, the layers (attention and routed experts), output: in file order, with their offsets."""
    names = [("token_embd.weight", 100 * MIB)]
    for il in range(N_LAYER):
        names += [(f"blk.{il}.attn_q.weight", 10 * MIB), (f"blk.{il}.ffn_up_exps.weight", expert_bytes)]
    names += [("output_norm.weight", 4096), ("output.weight", 100 * MIB)]
    out, offset = [], 0
    for name, n in names:
        out.append(TensorInfo(name, (1024, max(1, n // 1024)), 8, n, offset))
        offset += n
    return tuple(out)


def fitter(expert_bytes: int, **options) -> Fitter:
    """llama-server's context without its prompt cache (--cache-ram 0): the pool is the model's alone."""
    weights = breakdown(moe(expert_bytes), N_LAYER, set(), basis="test")
    return Fitter(GEOMETRY, weights, lambda s: 50 * MIB, reserve=0, runtime=RuntimeConfig(cache_ram_mib=0), **options)


def mac(name: str, os_reserve: int = 4 * GIB) -> Budget:
    from dataclasses import replace
    b = budget(name)
    return replace(b, pool=replace(b.pool, os_reserve=os_reserve))


@pytest.mark.parametrize("name, printed, ram_gib", [
    ("apple-m4-pro-24gb", "17179.89 MB", 24), ("apple-m4-16gb", "12713.12 MB", 16),
    ("apple-m3-16gb", "12713.12 MB", 16), ("apple-m1-max-64gb", "49152 MiB", 64)])
def test_the_named_macs_ceilings_are_the_figures_in_llama_cpps_logs(name, printed, ram_gib):
    """recommendedMaxWorkingSetSize as ggml-metal-device.m prints it (bytes / 1e6, "%8.2f MB"), or in MiB."""
    b = budget(name)
    shown = f"{b.bytes / 1e6:.2f} MB" if printed.endswith(" MB") else f"{b.bytes / MIB:.0f} MiB"
    assert shown == printed and b.pool.ram == ram_gib * GIB and b.pool.backend == "metal"


def test_a_moe_that_fits_a_card_with_experts_in_ram_is_refused_on_a_24gb_mac():
    """About 22 GiB of weights: a 16 GiB card with the experts in 64 GiB of RAM holds it; on a 24 GB Mac the
    experts "in RAM" are in the same pool, and the RAM limit binds, named."""
    s = Params(n_ctx=8192)
    discrete = fitter(2688 * MIB, ram=Budget("64GiB", 64 * GIB)).rows(Budget("16GiB", 16 * GIB), s)
    best = recommend(discrete)
    assert best is not None and best.placement.kind is PlacementKind.N_CPU_MOE
    on_mac = fitter(2688 * MIB, maps_file=True).rows(mac("apple-m4-pro-24gb"), s)
    assert recommend(on_mac) is None
    card_ok = [r for r in on_mac if r.card_fits]
    assert card_ok and all(not r.ram_fits for r in card_ok)
    assert fits_text(card_ok[0]).startswith("RAM no") and "does NOT fit" in pool_line(card_ok[0])
    whole = next(r for r in on_mac if r.placement.kind is PlacementKind.ALL)
    assert fits_text(whole).startswith("no (working set")  # all on the card: past the 16 GiB working set


def test_a_model_within_the_working_set_is_accepted():
    s = Params(n_ctx=8192)
    best = recommend(fitter(1024 * MIB, maps_file=True).rows(mac("apple-m4-pro-24gb"), s))
    assert best is not None and best.placement.kind is PlacementKind.ALL and best.pooled
    assert best.card_total <= budget("apple-m4-pro-24gb").bytes and best.pool_bytes <= 20 * GIB


def test_wired_limit_moves_the_answer_as_the_sysctl_does():
    """About 17 GiB on the card: past the 24 GB Mac's 16 GiB working set, within it at iogpu.wired_limit_mb=19456."""
    s = Params(n_ctx=4096)
    f = fitter(2048 * MIB, maps_file=True)
    whole = Placement(PlacementKind.ALL)
    assert not f._row_of(mac("apple-m4-pro-24gb"), s, whole).card_fits
    raised = with_wired_limit(mac("apple-m4-pro-24gb"), 19456)
    assert raised.bytes == 19456 * MIB and "iogpu.wired_limit_mb=19456" in raised.pool.ceiling_basis
    assert f._row_of(raised, s, whole).fits


def test_metal_maps_the_files_span_once_in_the_ram_and_not_again_for_mtp():
    """The card's buffer spans its tensors in the file (the host's token_embd and experts in between included);
    the RAM holds each page once. The MTP context runs on the target model's own weights (the vendored
    common/speculative.cpp, llama_init_from_model(model_tgt, ...)): nothing is mapped twice. The fit doubled them
    (a Mac's MTP row cost 21.66 GiB more where CUDA's cost 0.99)."""
    f = fitter(256 * MIB, maps_file=True)
    s = Params(n_ctx=4096)
    file_bytes = sum(t.n_bytes for t in moe(256 * MIB))
    experts_in_ram = Placement(PlacementKind.N_CPU_MOE, 4)
    row = f._row_of(mac("apple-m1-max-64gb"), s, experts_in_ram)
    assert row.parts.weights == file_bytes - 100 * MIB  # blk.0 to the output: the host's experts 0-3 in between
    shared = row.parts.total + row.host.total - row.pool_bytes
    assert shared == row.parts.weights + row.host.weights - file_bytes  # the pages both map, counted once
    mtp = f.mapped_card_weights(Params(n_ctx=4096, spec_type="draft-mtp"), Placement(PlacementKind.ALL), 0)
    assert mtp == f.mapped_card_weights(s, Placement(PlacementKind.ALL), 0)


@pytest.mark.parametrize("kwargs, words", [
    ({"vram": "apple-m4-pro-24gb", "ram": "64GiB"}, "--ram does not apply"),
    ({"vram": "apple-m4-pro-24gb,16GiB"}, "compare them in two runs"),
    ({"vram": "16GiB", "wired_limit": 20000}, "--wired-limit"),
    ({"vram": "dgx-spark", "wired_limit": 20000}, "not a Mac"),
    ({"vram": "apple-m4-pro-24gb", "wired_limit": 30000}, "more than"),
    ({"vram": "rtx-4090", "unified": True}, "--unified takes one size"),
    ({"vram": "apple-m4-pro-24gb", "backend": "vulkan"}, "runs llama.cpp's metal backend"),
    ({"vram": "apple-m4-pro-24gb", "reserve": "30GiB"}, "leaves nothing"),
])
def test_what_a_unified_machine_does_not_take_is_refused_in_one_line(kwargs, words):
    with pytest.raises(UsageError, match=words):
        api.fit("qwen3-5-35b-a3b", n_ctx=4096, **kwargs)


def test_an_unnamed_mac_takes_the_logged_share_and_others_the_ram():
    from llamabench.settings.budget import unified_budget
    assert unified_budget(budget("24GB"), "metal").bytes == 16 * GIB
    assert unified_budget(budget("64GB"), "metal").bytes == 48 * GIB
    spark = unified_budget(budget("128GB"), "cuda")
    assert spark.bytes == 128 * GIB and spark.pool.ceiling_name == "device memory" and not spark.pool.maps_file


LOGS = Path(__file__).resolve().parents[1] / "support" / "data" / "unified_logs"
# a regression, not a capacity limit: a 353 MiB allocation refused with 10 GB free (llama.cpp#29270, Asahi's driver)
NOT_CAPACITY = {"vulkan_asahi_m1_16gb_gemma4_e2b_oom"}


def held_out_logs() -> list[dict]:
    return [e for e in json.loads((LOGS / "index.json").read_text()) if e["id"] not in NOT_CAPACITY]


@pytest.mark.parametrize("entry", held_out_logs(), ids=lambda e: e["id"])
def test_real_metal_and_vulkan_uma_logs_get_the_verdict_their_outcome_shows(entry):
    """Held out: llama.cpp logs users posted from Macs and integrated GPUs (tests/support/data/unified_logs, each with
    its source). The rule the fit applies, on the buffers each log printed: a Mac over its working set warned or
    failed, under it ran; an MTP draft loaded from the same file maps it again; a Vulkan iGPU failed where one
    allocation passed its driver's limit, and ran within the RAM."""
    ram = entry["ram_gib"] * GIB if entry["ram_gib"] else None
    reading = read_pool((LOGS / entry["file"]).read_text(), ram_bytes=ram)
    assert reading is not None and reading.backend == entry["backend"]
    expected = Verdict.FITS if entry["outcome"] == "ran" else (Verdict.OVER_CEILING, Verdict.OVER_ALLOCATION)
    assert reading.verdict() in (expected if isinstance(expected, tuple) else (expected,))


def test_the_held_out_set_holds_both_backends_and_both_outcomes():
    entries = held_out_logs()
    assert {e["backend"] for e in entries} >= {"metal", "vulkan"}
    assert {e["outcome"] == "ran" for e in entries if e["backend"] == "metal"} == {True, False}
    assert {e["outcome"] == "ran" for e in entries if e["backend"] == "vulkan"} == {True, False}


def test_a_unified_devices_bench_record_reports_the_pool():
    """bench on a Mac or an iGPU: the device's buffers against its ceiling, and with the host's against the RAM."""
    from llamabench.memory.allocations import parse_allocations
    from llamabench.memory.unified import unified_memory
    log = ("load_tensors:  MTL0_Mapped model buffer size =  2207.10 MiB\n"
           "load_tensors:   CPU_Mapped model buffer size =   308.23 MiB\n"
           "llama_kv_cache:       MTL0 KV buffer size =   896.00 MiB\n"
           "sched_reserve:       MTL0 compute buffer size =   256.50 MiB\n"
           "sched_reserve:        CPU compute buffer size =    28.01 MiB\n")
    pool = unified_memory("MTL0", int(11453.25e6), parse_allocations(log), 16 * GIB)
    assert round(pool.device_bytes / MIB, 2) == 2207.10 + 896.00 + 256.50 and pool.within_ceiling
    assert round(pool.host_bytes / MIB, 2) == 308.23 + 28.01 and pool.within_ram


def test_a_unified_device_on_the_machine_is_one_pool_with_its_own_ceiling(monkeypatch):
    """On a Metal (or IGPU) build, fit without --vram takes the device's own figure (ggml_backend_dev_memory: the
    working set less what is held) and the machine's RAM."""
    from llamabench.jobs.fit import options
    from llamabench.llama.devices import Device
    mtl = Device("MTL0", "Apple M4 Pro", free_bytes=16 * GIB, total_bytes=16 * GIB, is_gpu=True, unified=True)
    monkeypatch.setattr(options, "device_memory", lambda: [mtl])
    monkeypatch.setattr(options.sysinfo, "total_ram_bytes", lambda: 24 * GIB)
    (b,) = options.gpu_budgets()
    assert b.bytes == 16 * GIB and b.pool.ram == 24 * GIB and b.pool.backend == "metal" and b.pool.maps_file
