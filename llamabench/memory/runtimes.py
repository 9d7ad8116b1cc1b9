"""The program that creates the context, and the context it creates there: llama-server or Llama().

The same `-c 32768 -ngl 99` allocates differently in llama-server (4 slots on one unified KV stream,
a few outputs reserved) than in llama-cpp-python's `Llama()` (one sequence, outputs for a whole
batch); llama-server also keeps a prompt cache and context checkpoints in system RAM that grow
while it runs. Pure: the user's `Params` and the runtime's options in, the `Params` that program
passes to `llama_init_from_model` and the host RAM it keeps beside out.

References (the llama.cpp vendored in llama-cpp-python 0.3.36):
- llama-server: `tools/server/server.cpp` main (`n_parallel` -1, "auto", becomes 4 slots with
  `kv_unified = true`); `tools/server/server-context.cpp` `server_output_limits` and `load_model`
  (`n_outputs_max` = slots x (1 + draft tokens), capped by n_batch; `n_outputs_max_per_seq` =
  1 + draft tokens); `common/common.h` (`n_batch` 2048, `n_ubatch` 512, `swa_full` false,
  `cache_ram_mib` 8192, `n_ctx_checkpoints` 32);
  `common/common.cpp` `common_context_params_to_llama` (`n_seq_max = n_parallel`).
- Checkpoints: `server-context.cpp` (`do_checkpoint` for models whose memory cannot be rolled back
  (recurrent) or that use SWA without `swa_full`; one at the last user message and near each
  prompt's end, whatever `--checkpoint-min-step` says; `create_checkpoint` thins close ones only
  once the list is full, so a slot reaches `n_ctx_checkpoints`); each is
  `llama_state_seq_get_size_ext(PARTIAL_ONLY)`: the sequence's recurrent state and its SWA cells
  that are not masked, at most n_swa (`llama_memory_hybrid::state_write`,
  `llama_kv_cache_iswa::state_write`, `llama_kv_cache::state_write`). Prompt cache: `server-task.cpp`
  `server_prompt_cache` (`limit_size` = `--cache-ram` MiB, checkpoints counted inside it).
- llama-cpp-python: `llama_cpp/llama.py` `Llama.__init__` (`n_batch=512` then `min(n_ctx, n_batch)`,
  `n_ubatch=512`, `n_seq_max` left at `llama_context_default_params`' 1, `n_outputs_max` 0 = n_batch;
  `swa_full` left at the C default, which is true: the printed call passes `swa_full=False`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.units import MIB
from ..model.geometry import ModelGeometry
from ..settings.params import SCHEMA, Params
from ..settings.values import Runtime, parse_runtime  # noqa: F401 - parse_runtime: the runtime's one parser
from . import speculative
from .footprint import Footprint, recurrent_rows

SERVER_AUTO_SLOTS = 4  # tools/server/server.cpp: n_parallel -1 ("auto") -> 4 slots, kv_unified
PYTHON_N_BATCH, PYTHON_N_UBATCH = 512, 512  # Llama(n_batch=512, n_ubatch=512)
CACHE_RAM_MIB = SCHEMA["cache_ram"].default  # common/common.h: 8192, declared once in the schema
CTX_CHECKPOINTS = SCHEMA["ctx_checkpoints"].default  # common/common.h: 32


@dataclass(frozen=True)
class RuntimeConfig:
    """One runtime and the options of it that change what it allocates."""

    runtime: Runtime = Runtime.LLAMA_SERVER
    n_parallel: int | None = None  # -np; None: the runtime's default (llama-server: auto = 4 unified slots)
    kv_unified: bool | None = None  # -kvu; None: the runtime's default
    cache_ram_mib: int = CACHE_RAM_MIB  # -1: no limit, 0: off
    ctx_checkpoints: int = CTX_CHECKPOINTS

    def __post_init__(self):
        if self.runtime is Runtime.LLAMA_CPP_PYTHON and ((self.n_parallel or 1) > 1 or self.kv_unified):
            raise UsageError("Llama() creates one sequence: -np and --kv-unified are llama-server's",
                             hint="drop them, or use --runtime llama-server")
        if self.n_parallel is not None and self.n_parallel < 1:
            raise UsageError(f"-np must be at least 1, got {self.n_parallel}")

    @property
    def is_server(self) -> bool:
        return self.runtime is Runtime.LLAMA_SERVER

    @property
    def slots(self) -> int:
        if not self.is_server:
            return 1
        return SERVER_AUTO_SLOTS if self.n_parallel is None else self.n_parallel

    @property
    def unified(self) -> bool:
        if not self.is_server:
            return False
        if self.n_parallel is None:
            return True  # auto: unified, whatever -kvu says
        return bool(self.kv_unified)

    def context(self, base: Params) -> Params:
        """The context parameters this runtime creates for the user's n_ctx, cache types, flash attention and
        placement. `base.n_ubatch` is kept where it differs from llama.cpp's 512 (the user's -ub)."""
        if self.is_server:  # -b: llama.cpp's and common's default are both 2048; outputs and rollback by --spec-type
            context = base.replace(n_seq=self.slots, kv_unified=self.unified, swa_full=False)
            return speculative.target_context(context, slots=self.slots)
        if base.spec_type != speculative.NONE:
            raise UsageError(f"--spec-type {base.spec_type} is llama-server's: Llama() decodes without a draft",
                             hint="use --runtime llama-server, or leave out --spec-type")
        n_batch = min(base.n_ctx, PYTHON_N_BATCH) if base.n_ctx else PYTHON_N_BATCH
        return base.replace(n_seq=1, kv_unified=False, swa_full=False, n_batch=n_batch,
                            n_ubatch=min(n_batch, base.n_ubatch), n_outputs_max=0, n_outputs_max_per_seq=1,
                            n_rs_seq=0)

    def server_flags(self, geometry: ModelGeometry) -> tuple[str, ...]:
        """The flags the printed llama-server line spells out: the slots always (the auto default surprises),
        the prompt cache always, checkpoints where this model makes them."""
        if not self.is_server:
            return ()
        flags = ["-np", str(self.slots)] + (["-kvu"] if self.unified else [])
        flags += ["--cache-ram", str(self.cache_ram_mib)]
        if makes_checkpoints(geometry):
            flags += ["--ctx-checkpoints", str(self.ctx_checkpoints)]
        return tuple(flags)

    def describe(self, geometry: ModelGeometry | None = None) -> str:
        if not self.is_server:
            return ("llama-cpp-python Llama(): 1 sequence, n_batch 512, outputs for a whole batch, swa_full=False; "
                    "no prompt cache, no checkpoints")
        slots = (f"{self.slots} slot{'s' if self.slots > 1 else ''}"
                 + (" on one unified KV stream" if self.unified else " (a KV stream each)" if self.slots > 1 else ""))
        auto = " (its default -np auto)" if self.n_parallel is None else ""
        cache = ("prompt cache off" if self.cache_ram_mib == 0 else "prompt cache of no size limit (n_ctx tokens)"
                 if self.cache_ram_mib < 0
                 else f"prompt cache up to {self.cache_ram_mib} MiB")
        checkpoints = ("" if geometry is not None and not makes_checkpoints(geometry)
                       else f", up to {self.ctx_checkpoints} context checkpoints per slot")
        return f"llama-server: {slots}{auto}, {self.slots} outputs reserved per batch, {cache}{checkpoints}"


def makes_checkpoints(geometry: ModelGeometry) -> bool:
    """llama-server checkpoints memory it cannot roll back: recurrent state, and SWA caches (swa_full off)."""
    return bool(geometry.recurrent_layers) or geometry.has_swa


@dataclass(frozen=True)
class ServerRam:
    """What llama-server keeps in system RAM beside the context, growing while it runs (upper bounds)."""

    prompt_cache: int  # the --cache-ram limit in bytes; with -1 the KV of n_ctx tokens (a floor, see below)
    prompt_cache_unlimited: bool  # --cache-ram -1: only its token limit, n_ctx, holds it; states may hold more
    checkpoint_bytes: int  # one checkpoint: a sequence's recurrent state and SWA cells
    checkpoints_per_slot: int
    checkpoints: int  # slots x checkpoints per slot x checkpoint_bytes

    @property
    def total(self) -> int:
        return self.prompt_cache + self.checkpoints


NO_SERVER_RAM = ServerRam(0, False, 0, 0, 0)


def checkpoint_bytes(geometry: ModelGeometry, fp: Footprint) -> int:
    """One sequence's checkpoint (PARTIAL_ONLY state): its recurrent rows and its SWA cells that are not
    masked, n_swa at most (and at most the SWA cache of its stream). Data only: the state's headers, a
    few bytes per cell and layer, are left out. With rollback planes (n_rs_seq) it writes the current plane
    alone (src/llama-memory-recurrent.cpp:775-800, rs_idx)."""
    rows = recurrent_rows(geometry, fp.params)  # a checkpoint holds one plane of one sequence (state_write)
    recurrent = fp.recurrent_state_bytes // rows if fp.n_recurrent_layers else 0
    swa = 0
    if geometry.has_swa and not fp.params.swa_full:
        cells = min(fp.shape.swa_cells, geometry.n_swa)
        swa = cells * fp.swa_kv_bytes_per_cell
    return recurrent + swa


def server_ram(geometry: ModelGeometry, fp: Footprint, config: RuntimeConfig) -> ServerRam:
    """The prompt cache limit and the checkpoint bound of the footprint of a context from `config.context`:
    slots x --ctx-checkpoints x one checkpoint. The spacing rule does not lower it: a chat of many turns
    adds checkpoints at each last user message and prompt end, and close ones are thinned only once a
    slot's list is full."""
    if not config.is_server:
        return NO_SERVER_RAM
    unlimited = config.cache_ram_mib < 0
    # -1: no size limit, but server_prompt_cache keeps prompts of n_ctx tokens in all (server-task.cpp
    # update): at least their KV; each prompt's recurrent state and checkpoints come on top
    cache = (fp.kv_bytes_per_token * fp.params.n_ctx if unlimited
             else config.cache_ram_mib * MIB)
    if not makes_checkpoints(geometry) or config.ctx_checkpoints == 0:
        return ServerRam(cache, unlimited, 0, 0, 0)
    one = checkpoint_bytes(geometry, fp)
    per_slot = config.ctx_checkpoints
    return ServerRam(cache, unlimited, one, per_slot, config.slots * per_slot * one)
