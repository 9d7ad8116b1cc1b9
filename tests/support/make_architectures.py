"""Write tests/support/data/architectures.json: tiny metadata for every llama.cpp architecture.

    .venv/bin/python -m tests.support.make_architectures FIXTURE_DIR [ARCH ...]

FIXTURE_DIR holds one metadata-only GGUF per architecture as llama.cpp's own tests/test-llama-archs.cpp writes
it (`get_gguf_ctx`: 2 layers in most cases, n_embd 256, 2 heads, and its per-architecture cases: MLA
widths, hybrid per-layer head counts, SWA patterns, DSA indexers...), e.g. `test-llama-archs -o DIR`.
Each architecture's keys are then changed to exercise its rules, one change at a time, each kept only where
llama.cpp still builds the twin, creates a context at every setting of tests.support.every_arch and decodes:

- attention.sliding_window 1000 (every architecture): below n_ctx 4096, above n_ctx 512
- attention.head_count_kv per layer, not uniform, where it was one number
- one NextN (MTP) layer more, for the architectures whose llama.cpp code loads NextN tensors

An architecture llama.cpp cannot build or dry-run from its fixture stays in the table with its reason
("llama_cpp_fails"). The common keys are written once ("{arch}" stands for the architecture's name).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gguf

from llamabench.llama.user_model import GgufValue
from llamabench.world import gguf_file
from tests.support import every_arch

SOURCE = ("llama.cpp's own fixture metadata, tests/test-llama-archs.cpp get_gguf_ctx (llama.cpp vendored in "
          "llama-cpp-python 0.3.36), one metadata-only GGUF per architecture; then attention.sliding_window 1000, "
          "a per-layer head_count_kv and a NextN layer where llama.cpp accepts them (each architecture's "
          "'exercises'); written by tests/support/make_architectures.py. Keys: [GGUF type, value]; '{arch}' "
          "stands for the architecture; a null drops a common key.")
# src/models/*.cpp that create NextN tensors (grep nextn): where a NextN layer is relevant
NEXTN_ARCHS = ("bailingmoe2", "bailingmoe3", "cohere2moe", "deepseek2", "deepseek32", "dots3note", "exaone-moe",
               "exaone4", "gemma4", "glm-dsa", "glm4moe", "glm4", "glm5-next", "hy_v3", "mimo2", "nemotron_h",
               "nemotron_h_moe", "gpt-oss", "qwen35", "qwen35moe", "qwen3next", "step35")
_TYPES = {gguf.GGUFValueType.UINT8: "u8", gguf.GGUFValueType.INT8: "i8", gguf.GGUFValueType.UINT16: "u16",
          gguf.GGUFValueType.INT16: "i16", gguf.GGUFValueType.UINT32: "u32", gguf.GGUFValueType.INT32: "i32",
          gguf.GGUFValueType.UINT64: "u64", gguf.GGUFValueType.INT64: "i64", gguf.GGUFValueType.FLOAT32: "f32",
          gguf.GGUFValueType.FLOAT64: "f64", gguf.GGUFValueType.BOOL: "bool", gguf.GGUFValueType.STRING: "str"}


def read_fixture(path: Path) -> dict[str, GgufValue]:
    """A fixture's keys, typed; its tokenizer left out (the twin writer adds its own vocabulary)."""
    reader = gguf.GGUFReader(path)
    out = {}
    for key, f in reader.fields.items():
        if key.startswith(("GGUF.", "tokenizer.")):
            continue  # the twin writer adds its own vocabulary
        value = f.contents()
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            out[key] = GgufValue(_TYPES[f.types[-1]], tuple(value))
        else:
            out[key] = GgufValue(_TYPES[f.types[0]], value)
    return out


def _kv_array(keys: dict, arch: str) -> dict | None:
    """head_count_kv per layer, alternating the fixture's value with another divisor of head_count."""
    kv, heads, layers = (keys.get(f"{arch}.{s}") for s in ("attention.head_count_kv", "attention.head_count",
                                                            "block_count"))
    if kv is None or heads is None or kv.is_array or heads.is_array or not kv.value:
        return None
    other = kv.value // 2 if kv.value > 1 else 2
    if heads.value % other:
        return None
    values = tuple(kv.value if il % 2 == 0 else other for il in range(layers.value))
    return {f"{arch}.attention.head_count_kv": GgufValue("i32", values)}


def _nextn(keys: dict, arch: str) -> dict | None:
    """One NextN layer more: block_count + 1, every per-layer array one entry longer (its last repeated)."""
    if arch not in NEXTN_ARCHS or f"{arch}.nextn_predict_layers" in keys:
        return None
    n = keys[f"{arch}.block_count"].value
    out = {f"{arch}.block_count": GgufValue("u32", n + 1), f"{arch}.nextn_predict_layers": GgufValue("u32", 1)}
    for key, v in keys.items():
        if v.is_array and len(v) == n and key.startswith(arch + ".") and "rope" not in key:
            out[key] = GgufValue(v.type, v.value + v.value[-1:])
    return out


def _k_widths_follow(keys: dict, arch: str, twin: Path) -> bool:
    """Whether every layer's attn_k is as wide as its own head_count_kv says (some architectures size the weights
    by layer 0's count while the cache follows each layer's: no real file could carry such a model)."""
    kv = keys[f"{arch}.attention.head_count_kv"]
    if not kv.is_array:
        return True
    heads = keys[f"{arch}.attention.head_count"].value
    head_k = keys.get(f"{arch}.attention.key_length")
    head_k = head_k.value if head_k else keys[f"{arch}.embedding_length"].value // heads
    widths = {t.name: t.shape[1] for t in gguf_file.read_metadata(twin).tensors if len(t.shape) > 1}
    return all(widths.get(f"blk.{il}.attn_k.weight", n * head_k) == n * head_k for il, n in enumerate(kv.value))


VARIANTS = (("per-layer head_count_kv", _kv_array), ("a NextN layer", _nextn))


# keys some fixtures lack, each tried where the fixture fails, kept where it then works: the token-type count
# the fixture's own vocabulary carried (the BERT family), a bool SWA pattern (layer 0 sliding-window, layer 1 full)
REPAIRS = (lambda arch: {"tokenizer.ggml.token_type_count": GgufValue("u32", 2)},
           lambda arch: {f"{arch}.attention.sliding_window_pattern": GgufValue("bool", (True, False))})


def build_row(arch: str, fixture: dict, folder: Path) -> tuple[dict, list[str], str | None]:
    """The architecture's keys, the changes kept, and llama.cpp's reason where even the base fails."""
    keys = dict(fixture)
    keys[f"{arch}.attention.sliding_window"] = GgufValue("u32", every_arch.WINDOW)
    base = every_arch.run(arch, folder, keys)
    for repair in REPAIRS:
        if base.error:
            trial = every_arch.run(arch, folder, keys | repair(arch))
            if trial.error is None:
                keys, base = keys | repair(arch), trial
    if base.error:
        return keys, [], _plain(base.error)
    kept = [f"attention.sliding_window {every_arch.WINDOW}"]
    for label, change in VARIANTS:
        extra = change(keys, arch)
        if not extra:
            continue
        trial = keys | extra
        tried = every_arch.run(arch, folder, trial, decode=True)  # and llama.cpp can run it: a real decode
        if tried.error is None and tried.decoded == "ok" and _k_widths_follow(trial, arch, Path(tried.twin)):
            keys, kept = trial, kept + [label]
    return keys, kept, None


def _plain(message: str) -> str:
    """A reason without this machine's paths."""
    message = re.sub(r"\S*/llama\.cpp/(?=(src|ggml)/)", "", message)
    return re.sub(r"/\S*/([^/\s]+\.gguf)", r"\1", message)


def _raw(v: GgufValue, arch: str):
    if v.is_array:
        return [v.type, list(v.value)]
    return [v.type, v.value.replace(arch, "{arch}") if v.type == "str" and v.value == arch else v.value]


def table(rows: dict[str, tuple[dict, list[str], str | None]]) -> dict:
    generic = {arch: {k.replace(f"{arch}.", "{arch}.", 1): _raw(v, arch) for k, v in keys.items()
                      if k != "general.architecture"} for arch, (keys, _, _) in rows.items()}
    counts = Counter((k, json.dumps(v)) for keys in generic.values() for k, v in keys.items())
    common: dict = {}
    for (key, value), n in counts.most_common():
        if key not in common and n >= len(rows) // 2:
            common[key] = json.loads(value)
    out = {}
    for arch, (_, kept, fails) in sorted(rows.items()):
        own = {k: v for k, v in generic[arch].items() if common.get(k) != v}
        own |= {k: None for k in common if k not in generic[arch]}
        row: dict = {"keys": dict(sorted(own.items()))}
        if kept:
            row["exercises"] = kept
        if fails:
            row["llama_cpp_fails"] = fails
        out[arch] = row
    return {"source": SOURCE, "common": common, "architectures": out}


def dump(data: dict) -> str:
    """The table as JSON, one common key and one architecture a line."""
    lines = ["{", f' "source": {json.dumps(data["source"])},', ' "common": {']
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in data["common"].items()]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" },", ' "architectures": {']
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in data["architectures"].items()]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" }", "}", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    wanted = set(argv[1:])
    paths = sorted(p for p in folder.glob("*.gguf") if (not wanted or p.stem in wanted) and not p.stem[-2:] == "-0")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        def one(path: Path):
            fixture = read_fixture(path)
            arch = fixture["general.architecture"].value
            work = Path(tmp) / arch
            work.mkdir()
            row = build_row(arch, fixture, work)
            print(f"{arch}: {row[1]} {row[2] or ''}", file=sys.stderr)
            return arch, row

        rows = dict(pool.map(one, paths))
    if wanted and every_arch.TABLE.exists():  # the other architectures' rows as they were
        old = every_arch.table()["architectures"]
        for arch in set(old) - set(rows):
            rows[arch] = (every_arch.metadata(arch), old[arch].get("exercises", []), old[arch].get("llama_cpp_fails"))
    every_arch.TABLE.write_text(dump(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
