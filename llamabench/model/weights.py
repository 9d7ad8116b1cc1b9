"""Where the weights are: tensor infos grouped per layer and per class. Pure.

Classes follow what people move between the card and system RAM: routed experts (llama.cpp's
--n-cpu-moe), everything of a layer (-ngl), the token embeddings (always in system RAM in
llama.cpp: the input layer lives on the CPU) and the output head (on the card once -ngl exceeds
the layer count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .metadata import TensorInfo

# classes: attention, recurrent, routed_experts, shared_experts, dense_ffn, norms_other, embeddings, output
_LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")
_RECURRENT = ("ssm_", "shortconv", "attn_gate", "time_mix", "conv1d")


def first_card_layer(n_layer: int, n_gpu_layers: int) -> int:
    """i_gpu_start in llama_model::load_tensors: layers from here on, and the output layer (index n_layer),
    are on the card; -ngl counts the output layer as one."""
    return max(n_layer + 1 - n_gpu_layers, 0)


def classify(name: str, recurrent_layer: bool = False) -> tuple[int | None, str]:
    m = _LAYER.match(name)
    if not m:
        if name.startswith("token_embd.") and "norm" not in name:
            return None, "embeddings"
        return None, "output"
    il, rest = int(m[1]), m[2]
    if "_exps" in rest:  # what --n-cpu-moe moves: ffn_(gate|up|down|gate_up)_exps
        return il, "routed_experts"
    if "shexp" in rest:
        return il, "shared_experts"
    if rest.startswith(_RECURRENT) or (recurrent_layer and rest.startswith(("attn_qkv", "attn_gate"))):
        return il, "recurrent"
    if rest.startswith("attn_") and "norm" not in rest:
        return il, "attention"
    if rest.startswith("ffn_") and "norm" not in rest:
        return il, "dense_ffn"
    return il, "norms_other"


@dataclass(frozen=True)
class WeightsBreakdown:
    per_layer: dict[int, dict[str, int]]
    global_bytes: dict[str, int]
    n_layer: int  # llama.cpp's n_layer_all (NextN layers included)
    basis: str  # where the bytes come from, in words
    # tied embeddings: no output.weight, so llama.cpp loads token_embd a second time as the output
    # matrix on the output layer's device (TENSOR_DUPLICATED in llama_model::load_tensors)
    tied_output_bytes: int = 0
    # (layer or None, class, file offset, bytes, split part) per tensor, in file order: for the host's mapped span
    tensor_spans: tuple[tuple[int | None, str, int, int, int], ...] = ()
    tensor_names: tuple[str, ...] = ()  # every tensor's name, in file order (those of tensor_spans, where known)
    tensor_classes: tuple[tuple[int | None, str], ...] = ()  # (layer or None, class) of each of tensor_names
    tensor_bytes: tuple[int, ...] = ()  # the bytes of each of tensor_names (a published size: its share)

    @property
    def total_bytes(self) -> int:
        return sum(self.global_bytes.values()) + sum(sum(c.values()) for c in self.per_layer.values())

    @property
    def loaded_bytes(self) -> int:
        """Every weight llama.cpp loads: the file's tensors, and token_embd a second time where it is the output
        matrix too (tied embeddings)."""
        return self.total_bytes + self.tied_output_bytes

    @property
    def output_layer_bytes(self) -> int:
        """The output layer's weights (output matrix and norm; the tied token_embd copy where there is one)."""
        return self.global_bytes.get("output", 0) + self.tied_output_bytes

    def class_bytes(self, cls: str) -> int:
        return self.global_bytes.get(cls, 0) + sum(c.get(cls, 0) for c in self.per_layer.values())

    def on_card(self, *, n_gpu_layers: int, n_cpu_moe: int = 0) -> int:
        """Bytes llama.cpp puts on the GPU for -ngl n_gpu_layers and --n-cpu-moe n_cpu_moe."""
        total = sum(n for il, classes in self.per_layer.items() for cls, n in classes.items()
                    if self._on_card(il, cls, n_gpu_layers, n_cpu_moe))
        total += sum(n for cls, n in self.global_bytes.items() if self._on_card(None, cls, n_gpu_layers, n_cpu_moe))
        if self._on_card(None, "output", n_gpu_layers, n_cpu_moe):  # the output layer (index n_layer) is on the card
            total += self.tied_output_bytes
        return total

    def _on_card(self, il: int | None, cls: str, n_gpu_layers: int, n_cpu_moe: int) -> bool:
        """llama_model::load_tensors: layers from i_gpu_start on, and the output layer, go to the card; input
        embeddings stay on the host; --n-cpu-moe keeps the routed experts of the first layers on the host."""
        start = first_card_layer(self.n_layer, n_gpu_layers)
        if il is None:
            return cls == "output" and n_gpu_layers > 0 and start <= self.n_layer
        return il >= start and not (cls == "routed_experts" and il < n_cpu_moe)

    def host_read_per_token(self, *, n_gpu_layers: int, n_cpu_moe: int = 0, expert_share: float = 1.0) -> int:
        """Weight bytes one decoded token reads from system RAM with this placement: the host layers' tensors and
        the routed experts kept there, `expert_share` (used / count) of those; the output matrix where it stays
        on the host. The input embeddings are one row a token: left out."""
        total = 0
        for il, classes in self.per_layer.items():
            for cls, n in classes.items():
                if not self._on_card(il, cls, n_gpu_layers, n_cpu_moe):
                    total += round(n * expert_share) if cls == "routed_experts" else n
        if not self._on_card(None, "output", n_gpu_layers, n_cpu_moe):
            total += self.output_layer_bytes
        return total

    def on_devices(self, devices: tuple[int | None, ...], n_devices: int, *, n_cpu_moe: int = 0) -> tuple[int, ...]:
        """Bytes llama.cpp puts on each device, given each layer's device (`layer_split.layer_devices`, the
        output layer last): a layer's tensors with its layer, the output matrix and norms with the output layer
        (token_embd a second time where the embeddings are tied), routed experts of layers < n_cpu_moe and
        the input embeddings on the host."""
        out = [0] * n_devices
        for il, classes in self.per_layer.items():
            device = devices[il] if il < len(devices) else None
            if device is None:
                continue
            out[device] += sum(n for cls, n in classes.items() if not (cls == "routed_experts" and il < n_cpu_moe))
        output_device = devices[self.n_layer] if self.n_layer < len(devices) else None
        if output_device is not None:
            out[output_device] += self.output_layer_bytes
        return tuple(out)

    def layer_bytes(self, il: int, *, n_cpu_moe: int = 0) -> int:
        """Bytes that go to layer il's device (il == n_layer: the output layer's)."""
        if il == self.n_layer:
            return self.output_layer_bytes
        return sum(n for cls, n in self.per_layer.get(il, {}).items()
                   if not (cls == "routed_experts" and il < n_cpu_moe))

    def host_mapped(self, *, n_gpu_layers: int, n_cpu_moe: int = 0) -> int | None:
        """What llama.cpp reports as the host's model buffers when it maps the file (mmap): per file of a split
        set, the span from the first to the end of the last tensor kept in system RAM, card tensors in
        between included (llama_model_loader::get_mapping_range). None where the offsets are not known."""
        if not self.tensor_spans or not any(span[2] for span in self.tensor_spans):
            return None
        return self._span(not self._on_card(il, cls, n_gpu_layers, n_cpu_moe) for il, cls, *_ in self.tensor_spans)

    def mapped_span(self, host_tensors: frozenset[str]) -> int | None:
        """The host's mapped span (as host_mapped) for the tensors llama.cpp itself kept in system RAM, by name
        (a dry run's placement: host layers, and any tensor a device refused). None where offsets are unknown."""
        if len(self.tensor_names) != len(self.tensor_spans) or not any(span[2] for span in self.tensor_spans):
            return None
        return self._span(name in host_tensors for name in self.tensor_names)

    def card_mapped(self, *, n_gpu_layers: int, n_cpu_moe: int = 0) -> int | None:
        """Metal's model buffer where it maps the file (buffer_from_host_ptr): per file of a split set, the span
        from the first to the end of the last tensor on the card, the tensors in between included
        (llama_model_loader::get_mapping_range); a tied output maps token_embd's bytes on the output layer's
        device. None where the offsets are not known."""
        if len(self.tensor_names) != len(self.tensor_spans) or not any(span[2] for span in self.tensor_spans):
            return None
        return self._span(self._card_flags(n_gpu_layers, n_cpu_moe))

    def mapped_union(self, *, n_gpu_layers: int, n_cpu_moe: int = 0) -> int | None:
        """The file's pages the card's span and the host's span map together, each page once (what they hold of
        the RAM). None where the offsets are not known."""
        if len(self.tensor_names) != len(self.tensor_spans) or not any(span[2] for span in self.tensor_spans):
            return None
        host = [not self._on_card(il, cls, n_gpu_layers, n_cpu_moe) for il, cls, *_ in self.tensor_spans]
        return self._union(self._card_flags(n_gpu_layers, n_cpu_moe), host)

    def _union(self, card_flags, host_flags) -> int:
        card, host = self._intervals(card_flags), self._intervals(host_flags)
        total = 0
        for part in set(card) | set(host):
            spans = sorted(x for x in (card.get(part), host.get(part)) if x)
            if len(spans) == 2 and spans[1][0] <= spans[0][1]:  # overlapping: one interval
                spans = [(spans[0][0], max(spans[0][1], spans[1][1]))]
            total += sum(b - a for a, b in spans)
        return total

    def _card_flags(self, n_gpu_layers: int, n_cpu_moe: int) -> list[bool]:
        tied = self.tied_output_bytes and self._on_card(None, "output", n_gpu_layers, n_cpu_moe)
        return [self._on_card(il, cls, n_gpu_layers, n_cpu_moe) or bool(tied and name == "token_embd.weight")
                for (il, cls, *_), name in zip(self.tensor_spans, self.tensor_names)]

    def _intervals(self, flags) -> dict[int, tuple[int, int]]:
        spans: dict[int, tuple[int, int]] = {}
        for kept, (_, _, off, n, part) in zip(flags, self.tensor_spans):
            if kept:
                first, last = spans.get(part, (off, off + n))
                spans[part] = (min(first, off), max(last, off + n))
        return spans

    def _span(self, on_host) -> int:
        """Per file of a split set, first to end of last of the tensors kept on the host (`on_host`: one flag per
        tensor of tensor_spans), the tensors in between included: llama_model_loader::get_mapping_range."""
        return sum(last - first for first, last in self._intervals(on_host).values())

    def has_experts(self) -> bool:
        return self.class_bytes("routed_experts") > 0

    # tensor by tensor: where llama.cpp's tensor buffer overrides (-ot) place some tensors away from their layer

    def tensor_devices(self, layer_device: Callable[[int], int | None], *, n_cpu_moe: int = 0,
                       place: Callable[[str, int | None], int | None] | None = None) -> list[int | None]:
        """Each tensor's device (None: system RAM), in tensor_names order, and the tied output copy of token_embd
        last where there is one: the first -ot pattern the name matches places it (llama-model-loader.cpp:1235);
        else --n-cpu-moe's patterns (the routed experts of blocks < n_cpu_moe to the CPU); else its layer's device
        (the input embeddings in RAM, the output tensors with the output layer: `layer_device(n_layer)`). `place`:
        the overrides' choice, given a name and the place it would have without them (settings.tensor_overrides)."""
        place = place or (lambda _name, default: default)
        output = layer_device(self.n_layer)
        out = []
        for name, (il, cls) in zip(self.tensor_names, self.tensor_classes):
            if il is None:
                default = output if cls == "output" else None
            else:
                default = None if cls == "routed_experts" and il < n_cpu_moe else layer_device(il)
            out.append(place(name, default))
        if self.tied_output_bytes:  # TENSOR_DUPLICATED: token_embd again, created for the output layer
            out.append(place("token_embd.weight", output))
        return out

    def place_sizes(self) -> list[int]:
        """tensor_bytes, and the tied output copy's last (tensor_devices' order)."""
        return list(self.tensor_bytes) + ([self.tied_output_bytes] if self.tied_output_bytes else [])

    def placed_on_devices(self, places: list[int | None], n_devices: int) -> tuple[int, ...]:
        """Bytes on each device, given each tensor's (tensor_devices)."""
        out = [0] * n_devices
        for where, n in zip(places, self.place_sizes()):
            if where is not None and where < n_devices:
                out[where] += n
        return tuple(out)

    def placed_on_host(self, places: list[int | None], *, mapped: bool) -> int:
        """The host's weights, given each tensor's place: with the file mapped, per file of a split set the span from
        the first to the end of the last tensor kept in RAM (llama_model_loader::get_mapping_range; where the
        offsets are known); else the bytes of those tensors, each in the buffer it is read into."""
        flags = [where is None for where in places]
        if mapped and len(self.tensor_spans) == len(self.tensor_names) and any(span[2] for span in self.tensor_spans):
            tied = self.tied_output_bytes and flags[-1]
            return self._span(flags[:len(self.tensor_spans)]) if not tied else \
                self._span([f or name == "token_embd.weight" for f, name in zip(flags, self.tensor_names)])
        return sum(n for kept, n in zip(flags, self.place_sizes()) if kept)

    def placed_card_span(self, places: list[int | None]) -> int | None:
        """Metal's mapped span of the tensors on the card (card_mapped), given each tensor's place."""
        if len(self.tensor_names) != len(self.tensor_spans) or not any(span[2] for span in self.tensor_spans):
            return None
        flags = [where is not None for where in places[:len(self.tensor_spans)]]
        if self.tied_output_bytes and places[-1] is not None:
            flags = [f or name == "token_embd.weight" for f, name in zip(flags, self.tensor_names)]
        return self._span(flags)

    def placed_union(self, places: list[int | None]) -> int | None:
        """mapped_union, given each tensor's place."""
        if len(self.tensor_names) != len(self.tensor_spans) or not any(span[2] for span in self.tensor_spans):
            return None
        n = len(self.tensor_spans)
        tied_on_card = bool(self.tied_output_bytes) and places[-1] is not None
        card = [where is not None or (tied_on_card and name == "token_embd.weight")
                for where, name in zip(places[:n], self.tensor_names)]
        return self._union(card, [where is None for where in places[:n]])

    def placed_host_read(self, places: list[int | None], *, expert_share: float = 1.0) -> dict[int | None, int]:
        """Weight bytes one decoded token reads from system RAM, per layer (None: the output layer's and the global
        tensors), given each tensor's place: the routed experts kept there `expert_share` of them; the input
        embeddings (one row a token) left out."""
        out: dict[int | None, int] = {}
        classes = list(self.tensor_classes) + ([(None, "output")] if self.tied_output_bytes else [])
        for where, (il, cls), n in zip(places, classes, self.place_sizes()):
            if where is not None or cls == "embeddings":
                continue
            out[il] = out.get(il, 0) + (round(n * expert_share) if cls == "routed_experts" else n)
        return out


def breakdown(tensors: tuple[TensorInfo, ...], n_layer: int, recurrent_layers: set[int], *, basis: str,
              scale_to_bytes: int | None = None, by_bytes: bool = False) -> WeightsBreakdown:
    """Group tensor bytes; with scale_to_bytes, spread that total over tensors by element count (`by_bytes`: by
    each tensor's bytes, where the tensors carry a quant's own types)."""
    per_layer: dict[int, dict[str, int]] = {}
    global_bytes: dict[str, int] = {}
    elements = {t.name: t.n_bytes if by_bytes else int(np.prod(t.shape, dtype=np.int64)) for t in tensors}
    total_elements = sum(elements.values()) or 1
    classes = []
    for t in tensors:
        il, cls = classify(t.name)
        if il is not None and il in recurrent_layers and cls == "attention":
            cls = "recurrent" if t.name.split(".")[2].startswith(("attn_qkv", "attn_gate")) else cls
        classes.append((il, cls))
        n = t.n_bytes if scale_to_bytes is None else round(scale_to_bytes * elements[t.name] / total_elements)
        target = global_bytes if il is None else per_layer.setdefault(il, {})
        target[cls] = target.get(cls, 0) + n
    spans = tuple((il, cls, t.offset, t.n_bytes, t.part) for t, (il, cls) in zip(tensors, classes))
    names = {t.name for t in tensors}
    tied = global_bytes.get("embeddings", 0) if "output.weight" not in names and "token_embd.weight" in names else 0
    sizes = tuple(t.n_bytes if scale_to_bytes is None else round(scale_to_bytes * elements[t.name] / total_elements)
                  for t in tensors)
    return WeightsBreakdown(per_layer, global_bytes, n_layer, basis, tied_output_bytes=tied,
                            tensor_spans=spans if scale_to_bytes is None else (),
                            tensor_names=tuple(t.name for t in tensors), tensor_classes=tuple(classes),
                            tensor_bytes=sizes)
