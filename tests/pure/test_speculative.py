"""Speculative decoding: what llama-server's --spec-type adds to the target context, as memory.speculative and
memory.footprint size it. The figures are llama-server's own (-lv 4, one emulated card, 2026-12-05)."""

from __future__ import annotations

import pytest

from llamabench.core.errors import UsageError
from llamabench.memory import speculative
from llamabench.memory.footprint import compute_footprint, per_layer_bytes
from llamabench.memory.runtimes import Runtime, RuntimeConfig
from llamabench.memory.speculative import spec_flags
from llamabench.model.layout import geometry_from_metadata
from llamabench.settings.params import Params
from llamabench.world import catalog

MIB = 2**20


def geometry(model_id: str):
    return geometry_from_metadata(catalog.get_entry(model_id).metadata)


@pytest.mark.parametrize("spec, slots, outputs, per_seq, n_rs_seq", [
    ("none", 4, 4, 1, 0),  # server_output_limits without a draft
    ("draft-mtp", 1, 4, 4, 3),  # 1 + --spec-draft-n-max 3 outputs a slot; need_n_rs_seq: 3 planes
    ("draft-mtp", 4, 16, 4, 3),
    ("ngram-mod", 2, 130, 65, 0),  # ngram_mod.n_max 64, no rollback
])
def test_the_target_context_of_each_spec_type(spec, slots, outputs, per_seq, n_rs_seq):
    p = RuntimeConfig(n_parallel=slots).context(Params(n_ctx=8192, spec_type=spec))
    assert (p.n_outputs_max, p.n_outputs_max_per_seq, p.n_rs_seq) == (outputs, per_seq, n_rs_seq)


def test_the_mtp_context_takes_the_draft_cache_types_and_no_rollback():
    target = RuntimeConfig().context(Params(n_ctx=8192, type_k="q8_0", type_v="q8_0", spec_type="draft-mtp",
                                            type_k_draft="q4_0"))
    mtp = speculative.draft_context(target)
    assert (mtp.type_k, mtp.type_v, mtp.n_rs_seq, mtp.n_outputs_max, mtp.n_outputs_max_per_seq) == \
        ("q4_0", "f16", 0, 4, 1)
    assert (mtp.n_ctx, mtp.n_seq, mtp.kv_unified) == (target.n_ctx, target.n_seq, target.kv_unified)


def test_qwen3_5_mtp_as_llama_server_allocated_it():
    """Qwen3.5-35B-A3B's twin at 8192 cells: llama-server logged 16.00 MiB for the MTP context (1 layer) and
    251.25 MiB of recurrent state with --spec-type draft-mtp (-np 1: 3 rollback planes), 62.81 without."""
    g = geometry("qwen3-5-35b-a3b")
    assert [layer.index for layer in g.mtp_layers] == [40]
    with_mtp = compute_footprint(g, RuntimeConfig(n_parallel=1).context(Params(n_ctx=8192, spec_type="draft-mtp")))
    assert with_mtp.mtp_kv_bytes == 16 * MIB and with_mtp.kv_bytes == 160 * MIB
    assert round(with_mtp.recurrent_state_bytes / MIB, 2) == 251.25
    plain = compute_footprint(g, RuntimeConfig(n_parallel=1).context(Params(n_ctx=8192)))
    assert plain.mtp_kv_bytes == 0 and round(plain.recurrent_state_bytes / MIB, 2) == 62.81
    # at 131072 with the default 4 slots: 256 MiB for the MTP context, 1005 MiB of state (4 seqs x 4 planes)
    big = compute_footprint(g, RuntimeConfig().context(Params(n_ctx=131072, spec_type="draft-mtp")))
    assert big.mtp_kv_bytes == 256 * MIB and round(big.recurrent_state_bytes / MIB, 2) == 1005.00


def test_the_mtp_layers_kv_sits_on_its_own_layer():
    g = geometry("glm-4-5-air")  # 46 trunk layers + 1 NextN: llama-server logged 32.00 MiB at 8192 cells
    p = RuntimeConfig(n_parallel=1).context(Params(n_ctx=8192, spec_type="draft-mtp", type_k_draft="q8_0",
                                                   type_v_draft="q8_0"))
    layers = per_layer_bytes(g, p)
    assert layers[46] == (17 * MIB, 0)  # -ctkd/-ctvd q8_0: 17.00 MiB as llama-server logged it
    assert sum(kv for kv, _ in layers.values()) == compute_footprint(g, p).kv_bytes + 17 * MIB


@pytest.mark.parametrize("spec, draft, says", [
    ("draft-simple", False, "needs the draft model: -md DRAFT.gguf"),
    ("draft-eagle3", False, "needs the draft model: -md HEAD.gguf .an EAGLE3 head."),
    ("draft-dflash", True, "drafts by block diffusion .*: not sized"),
    ("draft-dspark", False, "drafts by block diffusion .*: not sized"),
    ("draft-mtp", True, "-md with --spec-type draft-mtp"),
])
def test_what_cannot_be_sized_is_refused_in_one_line(spec, draft, says):
    with pytest.raises(UsageError, match=says):
        speculative.check(geometry("qwen3-5-35b-a3b"), Params(spec_type=spec), draft_model=draft)


@pytest.mark.parametrize("spec, arch, says", [
    ("draft-eagle3", "qwen2", "is a qwen2 model, not an EAGLE3 head"),  # llama-server: "draft model is not eagle3"
    ("draft-simple", "eagle3", "is an EAGLE3 head: .* --spec-type draft-eagle3"),  # no target features to read
    ("draft-simple", "dflash", "is a dflash draft head: not sized"),
])
def test_a_draft_model_its_type_does_not_run_is_refused(spec, arch, says):
    with pytest.raises(UsageError, match=says):
        speculative.check_draft(Params(spec_type=spec), arch, "d.gguf")
    speculative.check_draft(Params(spec_type="draft-eagle3"), "eagle3", "h.gguf")  # the pair that runs
    speculative.check_draft(Params(spec_type="draft-simple"), "qwen2", "d.gguf")


def test_an_eagle3_context_keeps_its_type_and_gets_sampler_chains():
    target = RuntimeConfig().context(Params(n_ctx=8192, spec_type="draft-eagle3"))
    draft = speculative.draft_context(target)
    assert draft.spec_type == "draft-eagle3" and draft.n_rs_seq == 0 and draft.n_ctx == 8192
    assert speculative.backend_samplers("draft-eagle3") and speculative.backend_samplers("draft-mtp")
    assert not speculative.backend_samplers("draft-simple")  # the plain draft model samples on the CPU
    assert speculative.spec_flags(target) == ("--spec-type", "draft-eagle3")


def test_draft_mtp_on_a_model_without_an_mtp_layer_is_refused():
    with pytest.raises(UsageError, match="has no MTP .NextN. layer"):
        speculative.check(geometry("qwen3-30b-a3b"), Params(spec_type="draft-mtp"))


def test_the_printed_flags_carry_what_was_sized():
    assert spec_flags(Params()) == ()
    assert spec_flags(Params(spec_type="draft-mtp")) == ("--spec-type", "draft-mtp")
    assert spec_flags(Params(spec_type="draft-mtp", spec_draft_n_max=5, type_k_draft="q8_0")) == \
        ("--spec-type", "draft-mtp", "--spec-draft-n-max", "5", "-ctkd", "q8_0", "-ctvd", "f16")
    assert spec_flags(Params(spec_type="ngram-mod", spec_draft_n_max=5)) == ("--spec-type", "ngram-mod")


def test_llama_cpp_python_has_no_speculative_decoding():
    with pytest.raises(UsageError, match="llama-server's"):
        RuntimeConfig(Runtime.LLAMA_CPP_PYTHON).context(Params(spec_type="draft-mtp"))
