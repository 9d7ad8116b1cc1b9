"""GGUFs for the op-offload judges, made by llama.cpp's own llama-quantize and kept in the models cache.

- `requantized(src)`: a real GGUF requantized to Q4_0 with its output and embedding matrices in Q4_0 too, so that no
  tensor passes Mesa lavapipe's maxStorageBufferRange (128 MiB): the Vulkan device then takes every tensor a real
  card takes (a discrete card's range is 4 GiB), and what it allocates is the backend's rule alone.
- `small_moe()`: a qwen3moe of 4 layers whose 16 routed experts per layer (9 MiB a matrix at Q4_0) outweigh its
  activations, its tensors llama.cpp's own list (twin.generic), zero data, quantized by llama-quantize: with the
  experts in system RAM, a batch's expert matmuls copy them to the card (op offload), which the compute buffer shows.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from llamabench.jobs.twin.generic import write_from_metadata
from llamabench.llama.user_model import GgufValue

QUANTIZE_TIMEOUT_S = 600
MOE_KEYS = {  # qwen3moe (src/models/qwen3moe.cpp): 4 layers, GQA 8/2 x 128, 16 experts of 1024, 4 used
    "block_count": ("u32", 4), "context_length": ("u32", 32768), "embedding_length": ("u32", 1024),
    "feed_forward_length": ("u32", 3072), "attention.head_count": ("u32", 8), "attention.head_count_kv": ("u32", 2),
    "attention.key_length": ("u32", 128), "attention.value_length": ("u32", 128),
    "attention.layer_norm_rms_epsilon": ("f32", 1e-6), "rope.freq_base": ("f32", 1e6), "expert_count": ("u32", 16),
    "expert_used_count": ("u32", 4), "expert_feed_forward_length": ("u32", 1024),
}


def models_dir() -> Path:
    return Path(os.environ.get("LLAMABENCH_MODELS_DIR") or Path.home() / ".cache" / "llamabench" / "models")


def _quantize(tools: Path, src: Path, dest: Path, *flags: str, quant: str = "Q4_0") -> Path:
    """llama-quantize SRC DEST QUANT (with `flags`), once: an existing DEST is the same command's output."""
    if dest.is_file():
        return dest
    partial = dest.with_suffix(".partial")
    argv = [str(tools / "llama-quantize"), *flags, str(src), str(partial), quant]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=QUANTIZE_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"llama-quantize failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    partial.replace(dest)
    return dest


def requantized(src: Path, tools: Path) -> Path:
    """`src` at Q4_0, its output and embedding matrices too (llama-quantize --allow-requantize)."""
    tag = hashlib.sha256(f"{src.name}|{src.stat().st_size}|q4_0".encode()).hexdigest()[:8]
    return _quantize(tools, src, models_dir() / f"{src.stem}-q4_0-{tag}.gguf", "--allow-requantize",
                     "--output-tensor-type", "q4_0", "--token-embedding-type", "q4_0")


def quantized(src: Path, tools: Path, quant: str) -> Path:
    """`src` requantized to `quant` by llama-quantize with its own recipe (no type overridden), kept in the cache."""
    tag = hashlib.sha256(f"{src.name}|{src.stat().st_size}|{quant}".encode()).hexdigest()[:8]
    return _quantize(tools, src, models_dir() / f"{src.stem}-as-{quant}-{tag}.gguf", "--allow-requantize",
                     quant=quant)


def small_moe(tools: Path) -> Path:
    """The small qwen3moe above at Q4_0."""
    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    keys = {"general.architecture": GgufValue("str", "qwen3moe"), "general.name": GgufValue("str", "offload moe")}
    keys |= {f"qwen3moe.{k}": GgufValue(t, v) for k, (t, v) in MOE_KEYS.items()}
    tag = hashlib.sha256(repr(sorted(MOE_KEYS.items())).encode()).hexdigest()[:8]
    dest = folder / f"offload-moe-q4_0-{tag}.gguf"
    if dest.is_file():
        return dest
    f32 = folder / f"offload-moe-f32-{tag}.gguf"
    write_from_metadata(keys, f32)
    try:
        return _quantize(tools, f32, dest)
    finally:
        f32.unlink(missing_ok=True)
