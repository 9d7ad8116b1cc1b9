"""What the tests and the benchmarks share: the real small GGUFs fetched from PyPI (`real_model`), tiny metadata
(`metadata`), the fuzz harness and its hostile servers, a local HTTP file server, and recorded llama.cpp logs."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the repository's root
DATA = Path(__file__).resolve().parent / "data"  # recorded llama.cpp logs and results
