"""`fit -hf OWNER/REPO --quant all` (or a comma list): every quant of a Hugging Face repository fitted from its header.

The repository is listed once (huggingface_hub, HF_ENDPOINT and HF_TOKEN honoured); each quant's file is the one
llama.cpp's `-hf OWNER/REPO:QUANT` loads (world.hf_repo.best_model_file), a split set counted as one model (all its
parts' headers, its total size). The headers are read side by side (a few at a time, each within the remote
deadlines), then each quant is fitted as `fit` fits a file, with the same settings; a quant whose header cannot be
read says why in its own line and the others still answer.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...core.errors import LlamabenchError, UsageError
from ...model.quants import LLAMA_FTYPES, ftype_of
from ...world import catalog, hf_repo, remote
from ...world.remote import RemoteError
from ..source import ModelSource, resolve

READ_AT_ONCE = 4  # headers read side by side


@dataclass(frozen=True)
class QuantFile:
    """One quant of the repository: its tag, the file -hf OWNER/REPO:TAG loads, every part of it, and its size."""

    tag: str
    file: str
    parts: tuple[str, ...]
    size_bytes: int  # the listing's, summed over the parts (0: the hub did not say; the header read says then)


@dataclass(frozen=True)
class RepoQuants:
    repo: str  # OWNER/REPO
    revision: str | None
    quants: tuple[QuantFile, ...]

    def url(self, q: QuantFile) -> str:
        return f"hf://{self.repo}/{q.file}" + (f"@{self.revision}" if self.revision else "")


# what `fit CATALOG_ID --quant all` weighs beside the published files: llama-quantize's common file types, each as
# llama.cpp's own recipe types the model's tensors (asked without writing)
RECIPE_QUANTS = ("Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")


def wants_sweep(model: str, quant: str | None) -> bool:
    """Several quants asked: a repository (hf://OWNER/REPO, no tag) with --quant, every quant asked fitted from its
    header; or a catalog id with --quant all or a comma list, each weighed as its published file or the recipe."""
    if quant is None:
        return False
    if hf_repo.names_a_repo(model) and ":" not in model[len("hf://"):].partition("@")[0]:
        return True
    several = str(quant).strip().lower() == "all" or "," in str(quant)
    return several and catalog.find_entry(model) is not None


def catalog_quants(model: str, quant: str) -> tuple[str, ...]:
    """The quants --quant asks of a catalog model: all (its published files, then llama-quantize's common file
    types), or a comma list, each a published quant or a file type (UsageError naming what is neither)."""
    entry = catalog.find_entry(model)
    published = [q.name for q in entry.published_quants]
    asked = [t.strip() for t in str(quant).split(",") if t.strip()]
    if not asked:
        raise UsageError(f"--quant {quant!r}: no quant named", hint="--quant all, or a comma list: Q4_K_M,Q8_0")
    if [t.lower() for t in asked] == ["all"]:
        return tuple(dict.fromkeys([*published, *RECIPE_QUANTS]))
    by_upper = {q.upper(): q for q in published}
    unknown = [t for t in asked if t.upper() not in by_upper and ftype_of(t) is None]
    if unknown:
        raise UsageError(f"--quant {', '.join(unknown)}: neither a published quant of {model} nor a llama-quantize "
                         "file type", hint="published: " + (", ".join(published) or "none") + "; file types: "
                         + ", ".join(LLAMA_FTYPES))
    return tuple(dict.fromkeys(by_upper.get(t.upper(), t.upper()) for t in asked))


def list_quants(model: str, quant: str) -> RepoQuants:
    """The quants `--quant` asks for (all, or a comma list of tags, any case) of the repository MODEL names."""
    spec, at, revision = model[len("hf://"):].partition("@")
    repo, _ = hf_repo.split_repo_tag(spec)
    listing = hf_repo.repo_listing(repo, revision or None, f"hf://{spec}")
    files = list(listing)
    found = hf_repo.repo_quants(files)
    if not found:
        listed = ", ".join(f for f in files if f.endswith(".gguf"))[:300] or "none"
        raise UsageError(f"hf://{spec}: no GGUF model file named by its quant (its .gguf files: {listed})")
    asked = [t.strip() for t in quant.split(",") if t.strip()]
    if [t.lower() for t in asked] == ["all"]:
        tags = list(found)
    else:
        by_upper = {t.upper(): t for t in found}
        missing = [t for t in asked if t.upper() not in by_upper and hf_repo.best_model_file(files, t) is None]
        if missing:
            raise UsageError(f"--quant {', '.join(missing)}: hf://{spec} holds no such quant",
                             hint="its quants: " + ", ".join(found))
        tags = [by_upper.get(t.upper(), t.upper()) for t in asked]
        for t in tags:
            found.setdefault(t, hf_repo.best_model_file(files, t))
    quants = []
    for tag in dict.fromkeys(tags):
        parts = hf_repo.split_parts(files, found[tag])
        quants.append(QuantFile(tag, found[tag], tuple(parts), sum(listing.get(p, 0) for p in parts)))
    return RepoQuants(repo, revision if at else None, tuple(quants))


@dataclass(frozen=True)
class ReadQuant:
    """A quant's header read: the model (None where it could not be read, `error` says why)."""

    quant: QuantFile
    source: ModelSource | None
    error: str | None = None


def read_headers(found: RepoQuants) -> tuple[list[ReadQuant], int]:
    """Every quant's header (all its parts), READ_AT_ONCE at a time; and the bytes read."""
    before = remote.bytes_read()

    def read(q: QuantFile) -> ReadQuant:
        try:
            source = resolve(found.url(q))
        except (RemoteError, LlamabenchError) as exc:
            return ReadQuant(q, None, str(exc))
        spec = f"{found.repo}:{q.tag}"  # what llama.cpp's -hf is told: it loads this very file (its own pick)
        return ReadQuant(q, ModelSource(source.metadata, None, source.path, source.label, url=source.url,
                                        hf_spec=spec))

    with ThreadPoolExecutor(max_workers=READ_AT_ONCE) as pool:
        read_all = list(pool.map(read, found.quants))
    return read_all, remote.bytes_read() - before


@dataclass(frozen=True)
class QuantLine:
    """One quant's answer at one budget and context: the row recommended (or the closest), said in a line."""

    budget: str
    n_ctx: int
    kv: str  # type_k/type_v of the row
    placement: str
    fits: bool
    short_by: int  # bytes the closest row misses by (0 where it fits)
    max_n_ctx: int
    command: str  # the llama-server line (with -hf OWNER/REPO:QUANT); "" where nothing fits
