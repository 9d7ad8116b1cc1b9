"""Every llama.cpp architecture, from metadata alone: the table of tiny metadata, and one child process per
architecture that builds its twin with the production code and dry-runs it at every setting.

The table is tests/support/data/architectures.json (see its "source"): per architecture, the keys of llama.cpp's
own fixture (tests/test-llama-archs.cpp) with the changes that exercise its rules. `metadata(arch)` gives one
architecture's keys, typed (llama.user_model.GgufValue).

`run(arch, folder)` starts `python -m tests.support.every_arch` with the architecture's metadata and SETTINGS;
the child lists llama.cpp's tensors for it (llama.user_model.model_tensors, in that process), writes the twin
(jobs.twin.generic.write_from_metadata), loads it with no_alloc once and creates one context per setting,
writing one JSON line per step. A crash of llama.cpp ends that child only: what it wrote before stays.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from llamabench.core import serial
from llamabench.llama.user_model import GgufValue
from llamabench.llama.worker import last_error_line, signal_name
from llamabench.memory.allocations import Allocations
from llamabench.settings.params import Params

TABLE = Path(__file__).parent / "data" / "architectures.json"
CHILD_TIMEOUT_S = 120
WINDOW = 1000  # attention.sliding_window of the table: below n_ctx 4096, above n_ctx 512


def _settings() -> tuple[Params, ...]:
    base = Params(n_ctx=4096, n_threads=1, n_ubatch=512)
    return (
        base,  # f16 K and V, flash attention, 1 sequence
        base.replace(type_k="q8_0", type_v="q8_0"),  # q8_0 V needs flash attention (on); MLA: K and V alike
        base.replace(flash_attn=False),  # V transposed: every layer's V row padded to the widest
        base.replace(flash_attn=False, n_seq=4),  # 4 sequences, a stream each
        base.replace(type_k="q8_0", type_v="q8_0", n_seq=4, kv_unified=True),  # 4 sequences in one stream
        base.replace(n_ctx=5000),  # not a multiple of 256
        base.replace(n_ctx=512),  # the SWA window (1000) above n_ctx
        base.replace(swa_full=True, n_seq=2),  # SWA layers at full size
        base.replace(n_seq=2, n_rs_seq=3),  # recurrent state rows kept for rollback, where the arch keeps them
    )


SETTINGS = _settings()
# llama-server --spec-type draft-mtp on a model with NextN layers: the MTP draft context beside the target
MTP_SETTINGS = Params(n_ctx=4096, n_threads=1, n_seq=4, kv_unified=True, n_rs_seq=3, spec_type="draft-mtp",
                      type_k_draft="q8_0", type_v_draft="f16")
# contexts llama.cpp refuses by its own rule for some architectures (src/llama-context.cpp): no cache to compare
RULE_REFUSALS = (
    "quantized V cache requires flash_attn",  # an architecture that turns flash attention off (grok)
    "does not divide n_embd_head",  # a q8_0 cache with a head size not a multiple of 32 (80: laguna, step35)
    "does not support different K",  # MLA: one cache type for K and V
)


def describe(p: Params) -> str:
    return (f"n_ctx={p.n_ctx} K={p.type_k} V={p.type_v} fa={'on' if p.flash_attn else 'off'} n_seq={p.n_seq}"
            + (" unified" if p.kv_unified else "") + (" swa_full" if p.swa_full else "")
            + (f" n_rs_seq={p.n_rs_seq}" if p.n_rs_seq else ""))


# the table -------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def table() -> dict:
    return json.loads(TABLE.read_text())


def architectures() -> list[str]:
    return sorted(table()["architectures"])


def _value(arch: str, raw) -> GgufValue:
    kind, value = raw
    if isinstance(value, list):
        return GgufValue(kind, tuple(value))
    return GgufValue(kind, value.replace("{arch}", arch) if isinstance(value, str) else value)


def metadata(arch: str) -> dict[str, GgufValue]:
    """One architecture's keys: the table's common keys, then the architecture's own (a null drops a key)."""
    data = table()
    row = data["architectures"][arch]
    raw = {**data["common"], **row.get("keys", {})}
    out = {"general.architecture": GgufValue("str", arch)}
    for key, value in raw.items():
        if value is not None:
            out[key.replace("{arch}", arch)] = _value(arch, value)
    return out


def has_mtp_layers(arch: str) -> bool:
    """Whether the table's metadata of `arch` has NextN layers its main cache leaves to an MTP context."""
    from llamabench.model.layout import geometry_from_metadata
    from llamabench.model.metadata import ModelMetadata

    keys = {k: v.value for k, v in metadata(arch).items()}
    try:
        return bool(geometry_from_metadata(ModelMetadata(source=arch, architecture=arch, keys=keys)).mtp_layers)
    except Exception:  # noqa: BLE001 - a fixture llamabench refuses has no MTP case here
        return False


# the parent side ------------------------------------------------------------------------------------------------

@dataclass
class ArchRun:
    """What one architecture's child did: its tensors, its twin, and one outcome per setting."""

    arch: str
    n_tensors: int | None = None
    twin: str | None = None
    twin_bytes: int = 0
    disk_bytes: int = 0
    load_error: str | None = None
    dry: dict[int, Allocations] = field(default_factory=dict)  # setting index -> what llama.cpp allocated
    refused: dict[int, str] = field(default_factory=dict)  # setting index -> llama.cpp's reason
    died: str | None = None  # how the child ended, where it did not end well
    decoded: str | None = None  # with decode: "ok", or why a real 4-token decode failed
    mtp: Allocations | None = None  # MTP_SETTINGS, where the twin has NextN layers outside the main cache
    mtp_refused: str | None = None  # why llama.cpp created no MTP context (an architecture without an MTP graph)
    seconds: float = 0.0

    @property
    def error(self) -> str | None:
        """The first thing that went wrong, one line; None where the twin was built and every setting dry-ran."""
        if self.n_tensors is None or self.twin is None or self.load_error:
            return self.load_error or self.died or "no twin"
        unexplained = {i: r for i, r in self.refused.items() if not any(words in r for words in RULE_REFUSALS)}
        if unexplained:
            i, reason = min(unexplained.items())
            return f"{describe(SETTINGS[i])}: {reason}"
        if len(self.dry) + len(self.refused) != len(SETTINGS):
            return self.died or f"{len(self.dry) + len(self.refused)} of {len(SETTINGS)} settings ran"
        return None


def _read(out: str, run: ArchRun) -> None:
    for line in out.splitlines():
        try:
            step = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = step.get("step")
        if kind == "tensors":
            run.n_tensors = step["n"]
        elif kind == "twin":
            run.twin, run.twin_bytes, run.disk_bytes = step["path"], step["bytes"], step["disk"]
        elif kind == "failed":
            run.load_error = step["reason"]
        elif kind == "dry":
            run.dry[step["i"]] = serial.from_dict(Allocations, step["allocations"])
        elif kind == "refused":
            run.refused[step["i"]] = step["reason"]
        elif kind == "decoded":
            run.decoded = step["outcome"]
        elif kind == "mtp":
            run.mtp = serial.from_dict(Allocations, step["allocations"])
        elif kind == "mtp_refused":
            run.mtp_refused = step["reason"]


def run(arch: str, folder: Path, keys: dict[str, GgufValue] | None = None,
        timeout_s: float = CHILD_TIMEOUT_S, *, decode: bool = False) -> ArchRun:
    """Build `arch`'s twin in `folder` and dry-run it at every setting, in one child process; with `decode`,
    then load it for real and decode 4 tokens (the twin's data is zero: it checks the shapes, not the numbers)."""
    keys = keys if keys is not None else metadata(arch)
    job = {"arch": arch, "folder": str(folder), "metadata": {k: serial.to_dict(v) for k, v in keys.items()},
           "decode": decode}
    env = dict(os.environ, PYTHONUNBUFFERED="1", GGML_NO_BACKTRACE="1")
    start = time.perf_counter()
    result = ArchRun(arch)
    try:
        done = subprocess.run([sys.executable, "-m", "tests.support.every_arch"], input=json.dumps(job),
                              capture_output=True, text=True, timeout=timeout_s, env=env)
        out, err, rc = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err, rc = "", None
        result.died = f"did not finish within {timeout_s:g} s"
    _read(out, result)
    if rc:
        said = last_error_line(err)
        result.died = f"llama.cpp's process {signal_name(rc)}" + (f": {said}" if said else "")
    result.seconds = time.perf_counter() - start
    return result


# the child side -------------------------------------------------------------------------------------------------

def _emit(**step) -> None:
    sys.stdout.write(json.dumps(step) + "\n")
    sys.stdout.flush()


def main() -> int:
    from llamabench.core.errors import LlamabenchError
    from llamabench.jobs.twin.generic import write_from_metadata
    from llamabench.llama.engine import DryRunModel, Session
    from llamabench.llama.user_model import model_tensors

    job = json.loads(sys.stdin.read())
    keys = {k: serial.from_dict(GgufValue, v) for k, v in job["metadata"].items()}
    path = Path(job["folder"]) / f"{job['arch']}.gguf"
    try:
        twin = write_from_metadata(keys, path, tensors_of=model_tensors)
        _emit(step="tensors", n=twin.n_tensors)
        _emit(step="twin", path=str(twin.path), bytes=twin.file_bytes, disk=twin.disk_bytes)
        model = DryRunModel(str(twin.path))
    except LlamabenchError as exc:
        _emit(step="failed", reason=str(exc))
        return 0
    with model:
        for i, settings in enumerate(SETTINGS):
            try:
                dry = model.context(settings)
            except LlamabenchError as exc:
                _emit(step="refused", i=i, reason=str(exc))
                continue
            _emit(step="dry", i=i, allocations=serial.to_dict(dry.allocations))
    _mtp_pass(twin.path)
    if job.get("decode"):
        try:
            with Session(str(twin.path), Params(n_ctx=256, n_batch=256, n_ubatch=256, n_threads=1)) as session:
                session.decode(4)
            _emit(step="decoded", outcome="ok")
        except LlamabenchError as exc:
            _emit(step="decoded", outcome=str(exc))
    return 0


def _mtp_pass(path: Path) -> None:
    """Where the twin has NextN layers outside its main cache: load them (load_mtp) and create the MTP draft
    context beside the target, as llama-server --spec-type draft-mtp does."""
    from llamabench.core.errors import LlamabenchError
    from llamabench.llama.engine import DryRunModel
    from llamabench.model.layout import geometry_from_metadata, has_layout_rule
    from llamabench.world import gguf_file

    meta = gguf_file.read_metadata(path)
    if not has_layout_rule(meta) or not geometry_from_metadata(meta).mtp_layers:
        return
    try:
        with DryRunModel(str(path), Params(spec_type="draft-mtp")) as model:
            _emit(step="mtp", allocations=serial.to_dict(model.context(MTP_SETTINGS).allocations))
    except LlamabenchError as exc:
        _emit(step="mtp_refused", reason=str(exc))


if __name__ == "__main__":
    sys.exit(main())
