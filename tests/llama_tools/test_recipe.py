"""llama.cpp's quantize recipe, asked without writing (llama_model_quantize with dry_run), is what llama-quantize
writes: on the real Qwen2.5-Coder 0.5B, every tensor's type and bytes in the file llama.cpp's own tool makes. The
recipe types a catalog model's shape twin where no file is at hand (twin.shape.typed_shape_twin)."""

from __future__ import annotations

import subprocess

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.jobs.twin.writer import GGML_TYPE_NAMES
from llamabench.llama import worker
from llamabench.model.quants import ftype_of
from llamabench.runtimes.llama_server import llama_server_command
from llamabench.world import gguf_file
from tests.support.llama_server import tools_dir
from tests.support.offload_models import QUANTIZE_TIMEOUT_S

TOOLS = tools_dir()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(TOOLS is None or not (TOOLS / "llama-quantize").is_file(),
                                 reason="llama-quantize is not built: make tools (scripts/build_llama_tools.sh)")]


@pytest.mark.parametrize("quant", ["Q3_K_M", "Q8_0"])
def test_the_recipe_is_what_llama_quantize_writes(qwen, tmp_path, quant):
    out = tmp_path / f"qwen-{quant}.gguf"
    done = subprocess.run([str(TOOLS / "llama-quantize"), "--allow-requantize", str(qwen), str(out), quant],
                          capture_output=True, text=True, timeout=QUANTIZE_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    written = {t.name: t for t in gguf_file.read_metadata(out).tensors}
    recipe = dict(worker.quantize_recipe(str(qwen), ftype_of(quant)))
    assert recipe.keys() == written.keys()
    assert {n: GGML_TYPE_NAMES.get(t.ggml_type) for n, t in written.items()} == recipe  # tensor for tensor
    # `inspect FILE --quant Q` and `fit FILE --quant Q` weigh the file as llama-quantize writes it (they were refused)
    tensors = sum(t.n_bytes for t in written.values())
    weighed = lb.inspect(str(qwen), quant=quant, n_ctx=4096).inspection.weights_bytes
    assert weighed == tensors and abs(out.stat().st_size - weighed) < 0.02 * out.stat().st_size  # + the vocabulary
    fit = lb.fit(str(qwen), quant=quant, n_ctx=4096, vram="4GiB", type_k="f16", type_v="f16", n_gpu_layers=[99]).fit
    row = fit.rows[0]
    assert row.parts.weights + row.host.weights == tensors
    assert f"-{quant}.gguf" in llama_server_command(fit, row)


def test_a_file_in_every_common_quant_is_one_table(qwen, capsys):
    """`fit FILE --quant all`: the file weighed in each of llama-quantize's common file types by llama.cpp's own
    recipe asked of it (nothing written), each fitted, the sizes in the recipe's order."""
    argv = ["fit", str(qwen), "--quant", "all", "--vram", "16GiB", "-c", "4096", "-ctk", "f16", "-ctv", "f16"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "6 quants fitted, each as llama.cpp's recipe for the file type would write this file" in out
    sizes = [float(line.split()[1]) for line in out.splitlines() if line.startswith(("Q2_K ", "Q4_K_M ", "Q8_0 "))]
    assert len(sizes) == 3 and sizes == sorted(sizes)
