"""What a family's tensor builder sees: the twin's final metadata and its layer layout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ...model.layout import ModelGeometry
from .writer import N_VOCAB, TensorSpec


@dataclass(frozen=True)
class TwinContext:
    architecture: str
    keys: Mapping[str, object]  # the twin's GGUF keys (full names)
    geometry: ModelGeometry
    n_vocab_override: int | None = None  # shape twins carry the real vocabulary size

    def get(self, suffix: str, default=None):
        return self.keys.get(f"{self.architecture}.{suffix}", default)

    def per_layer(self, suffix: str, il: int, default: int = 0) -> int:
        value = self.get(suffix, default)
        return int(value[il]) if isinstance(value, (tuple, list)) else int(value)

    @property
    def n_layer(self) -> int:
        return self.geometry.n_layer

    @property
    def n_embd(self) -> int:
        return self.geometry.n_embd

    @property
    def n_vocab(self) -> int:
        return self.n_vocab_override or N_VOCAB

    @property
    def n_head(self) -> int:
        return self.geometry.n_head

    def n_head_kv(self, il: int) -> int:
        return self.per_layer("attention.head_count_kv", il, self.n_head)

    @property
    def head_k(self) -> int:
        return int(self.get("attention.key_length", self.n_embd // max(self.n_head, 1)))

    @property
    def head_v(self) -> int:
        return int(self.get("attention.value_length", self.n_embd // max(self.n_head, 1)))

    def n_ff(self, il: int) -> int:
        return self.per_layer("feed_forward_length", il)

    @property
    def n_expert(self) -> int:
        return int(self.get("expert_count", 0))

    @property
    def n_ff_exp(self) -> int:
        return int(self.get("expert_feed_forward_length", 0))

    @property
    def n_ff_shexp(self) -> int:
        return int(self.get("expert_shared_feed_forward_length", 0))

    def layer_kind(self, il: int) -> str:
        return str(self.geometry.layers[il].kind)

    # building blocks --------------------------------------------------------------
    @staticmethod
    def norm(name: str, n: int) -> TensorSpec:
        return TensorSpec(name, (n,), "f32", "ones")

    @staticmethod
    def mat(name: str, *shape: int, dtype: str = "f16", fill: str = "normal") -> TensorSpec:
        return TensorSpec(name, tuple(shape), dtype, fill)

    @staticmethod
    def vec(name: str, n: int, fill: str = "normal") -> TensorSpec:
        return TensorSpec(name, (n,), "f32", fill)

    def embeddings(self, *, output: bool = True, output_norm: str = "output_norm.weight") -> list[TensorSpec]:
        E, V = self.n_embd, self.n_vocab
        specs = [self.mat("token_embd.weight", E, V), self.norm(output_norm, E)]
        if output:
            specs.append(self.mat("output.weight", E, V))
        return specs

    def moe(self, il: int, *, shared: bool = False, gate_inp_shexp: bool = False, bias: bool = False,
            n_ff_exp: int | None = None, n_ff_shexp: int | None = None) -> list[TensorSpec]:
        """Routed experts (widths n_ff_exp, default expert_feed_forward_length), and a shared expert."""
        E, X, F = self.n_embd, self.n_expert, n_ff_exp or self.n_ff_exp
        p = f"blk.{il}."
        specs = [
            self.mat(p + "ffn_gate_inp.weight", E, X, dtype="f32"),
            self.mat(p + "ffn_gate_exps.weight", E, F, X),
            self.mat(p + "ffn_up_exps.weight", E, F, X),
            self.mat(p + "ffn_down_exps.weight", F, E, X),
        ]
        if bias:
            specs += [
                self.vec(p + "ffn_gate_inp.bias", X),
                self.mat(p + "ffn_gate_exps.bias", F, X, dtype="f32"),
                self.mat(p + "ffn_up_exps.bias", F, X, dtype="f32"),
                self.mat(p + "ffn_down_exps.bias", E, X, dtype="f32"),
            ]
        if shared:
            S = n_ff_shexp or self.n_ff_shexp
            specs += [
                self.mat(p + "ffn_gate_shexp.weight", E, S),
                self.mat(p + "ffn_up_shexp.weight", E, S),
                self.mat(p + "ffn_down_shexp.weight", S, E),
            ]
        if gate_inp_shexp:
            specs.append(self.vec(p + "ffn_gate_inp_shexp.weight", E))
        return specs

    def dense_ffn(self, il: int, n_ff: int | None = None) -> list[TensorSpec]:
        E, F = self.n_embd, n_ff if n_ff is not None else self.n_ff(il)
        p = f"blk.{il}."
        return [
            self.mat(p + "ffn_gate.weight", E, F),
            self.mat(p + "ffn_up.weight", E, F),
            self.mat(p + "ffn_down.weight", F, E),
        ]

    def attention(self, il: int, *, q_width: int | None = None, qk_norm: bool = False) -> list[TensorSpec]:
        E, H = self.n_embd, self.n_head
        kv = self.n_head_kv(il)
        p = f"blk.{il}."
        specs = [
            self.mat(p + "attn_q.weight", E, q_width if q_width is not None else H * self.head_k),
            self.mat(p + "attn_k.weight", E, kv * self.head_k),
            self.mat(p + "attn_v.weight", E, kv * self.head_v),
            self.mat(p + "attn_output.weight", H * self.head_v, E),
        ]
        if qk_norm:
            specs += [self.norm(p + "attn_q_norm.weight", self.head_k),
                      self.norm(p + "attn_k_norm.weight", self.head_k)]
        return specs
