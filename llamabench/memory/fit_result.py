"""The answer of one fit run, as data: every evaluated row, the budgets and contexts asked for. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings.budget import Budget
from .placement import FitRow, recommend
from .runtimes import Runtime, RuntimeConfig


@dataclass(frozen=True)
class FitResult:
    model_name: str
    architecture: str
    basis: dict[str, str]  # part -> where its bytes come from, in words
    rows: tuple[FitRow, ...]
    budgets: tuple[Budget, ...]
    contexts: tuple[int, ...]
    n_layer_all: int
    model_hint: str  # the file name the advice lines use
    n_ctx_train: int = 0
    seconds: float = 0.0
    dry_runs: int = 0  # llama.cpp no_alloc dry runs the compute part needed
    notes: tuple[str, ...] = ()
    server_args: tuple[str, ...] = ()  # more llama-server flags the answer needs (-np, --cache-ram, --mmproj ...)
    # the program whose context was sized; a record without one (before runtimes) sized one Llama()-style context
    runtime: RuntimeConfig = RuntimeConfig(Runtime.LLAMA_CPP_PYTHON)
    ram: Budget | None = None  # --ram: the system RAM the host part was checked against
    machine_ram: int = 0  # the RAM of the machine the fit ran on (psutil), for a warning without --ram; 0: unknown
    draft_hint: str = ""  # -md DRAFT (and -ngld) as the printed command names it; "": no draft model
    draft_devices: str = ""  # -devd as given ("none", "CUDA1"); "": the target's devices
    backend: str = ""  # the GPU backend the emulated cards answered as (memory.backends: "cuda"...); "": none emulated
    # how llama-server is told of a remote model, as the user named it (-hf OWNER/REPO:QUANT, -mu URL); (): -m FILE
    model_words: tuple[str, ...] = ()

    @property
    def spec_types(self) -> tuple[str, ...]:
        """The --spec-type choices sized side by side, in order ("none" first)."""
        return tuple(dict.fromkeys(r.settings.spec_type for r in self.rows)) or ("none",)

    def rows_for(self, label: str, n_ctx: int, spec_type: str = "none") -> list[FitRow]:
        """The rows of one budget and context, for one --spec-type (default: without speculative decoding)."""
        return [r for r in self.rows if r.budget_label == label and r.settings.n_ctx == n_ctx
                and r.settings.spec_type == spec_type]

    def recommended(self, label: str, n_ctx: int, spec_type: str = "none") -> FitRow | None:
        return recommend(self.rows_for(label, n_ctx, spec_type))
