"""The answer of one fit run, as data: every evaluated row, the budgets and contexts asked for."""

from __future__ import annotations

from dataclasses import dataclass, field

from .search import FitRow, recommend


@dataclass
class FitResult:
    model_name: str
    architecture: str
    basis: dict[str, str]  # part -> where its bytes come from, in words
    rows: list[FitRow]
    budgets: list[tuple[str, int]]  # (label, bytes)
    contexts: list[int]
    n_layer_all: int
    model_hint: str  # the file name the advice lines use
    n_ctx_train: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    server_args: list[str] = field(default_factory=list)  # more llama-server flags the answer needs (--mmproj ...)

    def rows_for(self, label: str, n_ctx: int) -> list[FitRow]:
        return [r for r in self.rows if r.budget_label == label and r.settings.n_ctx == n_ctx]

    def recommended(self, label: str, n_ctx: int) -> FitRow | None:
        return recommend(self.rows_for(label, n_ctx))

    def to_dict(self) -> dict:
        from ..render.fit import llama_cpp_command, python_call

        recs = []
        for label, _ in self.budgets:
            for n_ctx in self.contexts:
                best = self.recommended(label, n_ctx)
                recs.append({"budget": label, "n_ctx": n_ctx, "fits": best is not None,
                             "row": best.to_dict() if best else None,
                             "llama_cpp": llama_cpp_command(self, best) if best else None,
                             "python": python_call(self, best) if best else None})
        return {"model": self.model_name, "architecture": self.architecture, "basis": self.basis,
                "budgets": [list(b) for b in self.budgets], "contexts": self.contexts, "n_layer_all": self.n_layer_all,
                "model_hint": self.model_hint, "n_ctx_train": self.n_ctx_train,
                "rows": [r.to_dict() for r in self.rows], "recommendations": recs, "seconds": round(self.seconds, 3),
                "notes": self.notes, "server_args": self.server_args}

    @classmethod
    def from_dict(cls, data: dict) -> "FitResult":
        return cls(data["model"], data["architecture"], dict(data["basis"]), [FitRow.from_dict(r) for r in data["rows"]],
                   [(str(label), int(n)) for label, n in data["budgets"]], [int(c) for c in data["contexts"]],
                   int(data["n_layer_all"]), str(data["model_hint"]), int(data.get("n_ctx_train") or 0),
                   float(data.get("seconds") or 0.0), list(data.get("notes") or []), list(data.get("server_args") or []))
