"""Plain data read from a GGUF file or a catalog entry: metadata keys and tensor infos.

Nothing here touches a file; `gguf_file` and `catalog` build these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..core.errors import BadModelFile
from ..core.safe_text import shown_path

MetadataValue = int | float | bool | str | tuple
MESSAGE_CHARS = 80  # metadata values quoted in a message are cut to this


def cut(value, limit: int = MESSAGE_CHARS) -> str:
    """A metadata value for a one-line message: repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text):,} chars)"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order: ne0 first
    ggml_type: int
    n_bytes: int
    offset: int = 0  # where the tensor's data starts in the file (0 where unknown)
    part: int = 0  # the file of a split set that holds it (0: the first, or the only one)


@dataclass(frozen=True)
class ModelMetadata:
    """The GGUF metadata of one model, from a file or from the catalog."""

    source: str  # a path or "catalog:<id>"
    architecture: str
    keys: Mapping[str, MetadataValue]  # full GGUF key names, arrays as tuples
    tensors: tuple[TensorInfo, ...] = ()
    file_bytes: int = 0
    name: str = ""
    value_types: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # GGUFValueType(s) per key, files only
    array_lengths: Mapping[str, int] = field(default_factory=dict)  # entries of every array key (skimmed ones too)
    # a catalog model whose converted file has no output.weight (tie_word_embeddings): llama.cpp reuses token_embd,
    # and a twin leaves the optional output.weight out as the file does
    tied_embeddings: bool = False

    def arch_key(self, suffix: str, default=None):
        """The value of `{architecture}.{suffix}`, or `default` when absent."""
        return self.keys.get(f"{self.architecture}.{suffix}", default)

    def arch_count(self, suffix: str) -> int:
        """A count key (`{architecture}.{suffix}`; an array's first entry), 0 when absent; one line when not a count."""
        value = self.arch_key(suffix, 0)
        if isinstance(value, tuple):
            value = value[0] if value else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadModelFile(f"{self.source}: key {self.architecture}.{suffix} should be a count, got {cut(value)}")
        return value

    @property
    def weights_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def display_name(self) -> str:
        """general.name (escaped when read), else the path, escaped: it is printed and written into reports."""
        return self.name or str(self.keys.get("general.name", "")) or shown_path(self.source)


# ggml types a twin file can store (jobs/twin/writer.py): its own and those of published files (tensor_types)
TWIN_TENSOR_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k",
                     "q6_k", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "iq1_m",
                     "tq1_0", "tq2_0", "mxfp4")


@dataclass(frozen=True)
class PublishedQuant:
    name: str
    bytes: int
    source: str
    hf: str | None = None  # OWNER/REPO/FILE.gguf on Hugging Face, for `fit --remote`
    # the published file's tensor types: (tensor-name pattern, ggml type) rows, the first match of a matrix wins;
    # a shape twin stores them, so dry runs copy and size these very tensors (op offload), and the weights are theirs
    tensor_types: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    name: str
    metadata: ModelMetadata
    sources: Mapping[str, str]  # metadata suffix -> where the value comes from
    published_kv_bytes_per_token: int | None = None
    published_kv_source: str | None = None
    published_quants: tuple[PublishedQuant, ...] = field(default_factory=tuple)
    notes: str = ""
    mmproj: str | None = None  # OWNER/REPO/FILE.gguf of the published vision projector, where there is one


@dataclass(frozen=True)
class ModelRef:
    """Who a record is about, and which file llama.cpp loaded, if any."""

    label: str  # source.ModelSource.label: what results, --resume and reports key on
    name: str
    architecture: str
    path: str | None  # the file llama.cpp loaded (or the GGUF that was read)
    is_twin: bool  # llama.cpp ran a geometry twin, not the model itself
    desc: str | None = None  # llama_model_desc, where a context was created
    size_bytes: int | None = None  # llama_model_size
    n_params: int | None = None
