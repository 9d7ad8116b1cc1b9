"""`fit -hf OWNER/REPO --quant all` against a local hub (HF_ENDPOINT) holding the real Gemma 3 270M in four quants,
three made by llama.cpp's own llama-quantize and one of them a split set: each quant answers as `fit` answers for the
downloaded file (the same weights, fits and max n_ctx), each header read at most twice over, and the command names
the quant as llama.cpp's -hf does. The recipe llamabench asks of llama.cpp types every tensor as llama-quantize
wrote it."""

from __future__ import annotations

import math
import shutil

import gguf
import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.jobs.twin.writer import GGML_TYPE_NAMES
from llamabench.llama import worker
from llamabench.model.quants import ftype_of
from llamabench.world import gguf_file
from tests.support.http_server import FileServer
from tests.support.llama_server import tools_dir
from tests.support.offload_models import quantized
from tests.support.twin_split import write_split

TOOLS = tools_dir()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(TOOLS is None or not (TOOLS / "llama-quantize").is_file(),
                                 reason="llama-quantize is not built: make tools (scripts/build_llama_tools.sh)")]
QUANTS = ("Q2_K", "Q3_K_M", "Q5_K_M", "Q6_K", "Q8_0")  # the recipes held to llama-quantize's files
HUB = ("Q2_K", "Q8_0")  # by llama-quantize, beside the published Q4_K_M file and Q4_0 as a split set
REPO = "someone/gemma-3-270m-GGUF"
FIT = dict(n_ctx=32768, vram="0.9GiB", type_k="f16,q8_0", type_v="f16,q8_0", n_gpu_layers=[99])


@pytest.fixture(scope="module")
def hub(gemma, tmp_path_factory):
    """The repository's folder and each quant's local file (a split set's first part)."""
    root = tmp_path_factory.mktemp("hub")
    files = {"Q4_K_M": root / "gemma-3-270m-Q4_K_M.gguf"}
    shutil.copyfile(gemma, files["Q4_K_M"])
    for quant in HUB:
        files[quant] = root / f"gemma-3-270m-{quant}.gguf"
        shutil.copyfile(quantized(gemma, TOOLS, quant), files[quant])
    whole = tmp_path_factory.mktemp("whole") / "gemma-3-270m-Q4_0.gguf"
    shutil.copyfile(quantized(gemma, TOOLS, "Q4_0"), whole)
    (root / "Q4_0").mkdir()
    files["Q4_0"] = write_split(whole, root / "Q4_0", 2)[0]
    (root / "README.md").write_text("a model card\n")
    shutil.copyfile(files["Q8_0"], root / "mmproj-gemma-3-270m-F16.gguf")  # a sidecar: no quant of the model
    return root, files


def _rows(record) -> list[tuple]:
    return [(r.budget_label, r.settings, r.placement, r.parts, r.fits, r.max_n_ctx) for r in record.rows]


def test_every_quant_answers_as_its_downloaded_file(hub, monkeypatch):
    root, files = hub
    with FileServer(root) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        swept = lb.fit_quants(f"hf://{REPO}", quant="all", **FIT)
        served = server.served.bytes_sent
    assert sorted(q.quant for q in swept.quants) == sorted([*HUB, "Q4_K_M", "Q4_0"])
    headers = 0
    for q in swept.quants:
        assert q.error is None and q.record is not None
        parts = sorted(files[q.quant].parent.glob(files[q.quant].name.replace("00001", "*")))
        headers += sum(gguf.GGUFReader(p).data_offset for p in parts)
        assert q.size_bytes == sum(p.stat().st_size for p in parts)  # a split set: every part
        local = lb.fit(files[q.quant], **FIT)
        assert _rows(q.record) == _rows(local), q.quant  # the header read is the file
        for line in q.lines():
            assert not line.fits or line.command.startswith(f"llama-server -hf {REPO}:{q.quant} --no-mmproj -c ")
    assert swept.bytes_read <= 2 * headers and served <= 2 * headers, (swept.bytes_read, served, headers)
    quant, line = swept.best()
    assert line.fits and quant.size_bytes == max(q.size_bytes for q in swept.quants
                                                 if any(x.fits and (x.budget, x.n_ctx) == (line.budget, line.n_ctx)
                                                        for x in q.lines()))


def test_the_table_and_a_quant_the_repository_lacks(hub, monkeypatch, capsys, tmp_path):
    root, files = hub
    results = tmp_path / "results.jsonl"  # the downloaded Q2_K's weights measured against the Q8_0 (quality)
    measured = lb.quality(files["Q2_K"], base_model=files["Q8_0"], n_ctx=256, chunks=1, repack=False, results=results)
    with FileServer(root) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        assert main(["fit", "-hf", REPO, "--quant", "Q8_0,q2_k", "-c", "4096", "--vram", "0.9GiB",
                     "--results", str(results)]) == 0
        out = capsys.readouterr().out
        assert "2 quants fitted from their headers" in out and "-> the largest quant that fits" in out
        (q2,) = [line for line in out.splitlines() if line.startswith("Q2_K ")]
        assert f"{measured.rows[0].kld_mean:.4f}" in q2  # the measured KLD in its line, none invented for Q8_0
        assert f"llama-server -hf {REPO}:Q8_0 --no-mmproj" in out
        assert main(["fit", "-hf", REPO, "--quant", "IQ1_S"]) == 2
        err = capsys.readouterr().err
        assert "holds no such quant" in err and "Q4_K_M" in err and err.count("\n") == 1


@pytest.mark.parametrize("quant", QUANTS)
def test_the_recipe_is_what_llama_quantize_wrote(gemma, quant):
    written = gguf_file.read_metadata(quantized(gemma, TOOLS, quant)).tensors
    recipe = dict(worker.quantize_recipe(str(gemma), ftype_of(quant)))
    assert {t.name: GGML_TYPE_NAMES.get(t.ggml_type) for t in written} == recipe  # tensor for tensor
    for t in written:  # and so byte for byte
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[recipe[t.name].upper()]]
        assert t.shape[0] // block * size * math.prod(t.shape[1:]) == t.n_bytes, t.name


def test_a_quant_that_cannot_be_read_says_why_and_the_others_answer(hub, monkeypatch, tmp_path):
    _, files = hub
    root = tmp_path / "broken"
    (root / "Q4_0").mkdir(parents=True)
    shutil.copyfile(files["Q4_K_M"], root / files["Q4_K_M"].name)
    shutil.copyfile(files["Q4_0"], root / "Q4_0" / files["Q4_0"].name)  # the split set's first part alone
    with FileServer(root) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        swept = lb.fit_quants(f"hf://{REPO}", quant="all", **FIT)
    by_quant = {q.quant: q for q in swept.quants}
    assert by_quant["Q4_K_M"].record is not None and by_quant["Q4_K_M"].error is None
    assert by_quant["Q4_0"].record is None and "00002-of-00002" in by_quant["Q4_0"].error
    assert swept.best()[0].quant == "Q4_K_M"
