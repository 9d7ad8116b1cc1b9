"""`fit -hf OWNER/REPO --quant all` (or a comma list): every quant of a Hugging Face repository fitted from its header.

The repository is listed once, as llama.cpp's -hf lists it (world.hf_repo: its first page; HF_ENDPOINT and HF_TOKEN
honoured); each quant's file is the one llama.cpp's `-hf OWNER/REPO:QUANT` loads (world.hf_pick.best_model_file), a
split set counted as one model (all its parts' headers, its total size). The headers are read side by side (a few at a
time, each within the remote deadlines) and each quant is fitted as its header arrives, as `fit` fits a file, with the
same settings; a quant whose header cannot be read says why in its own line and the others still answer.

A sweep weighs MAX_QUANTS quants at most and ends by SWEEP_SECONDS: past either it stops in one line that says how to
narrow it (--quant Q4_K_M,Q5_K_M). What --quant asks is read before anything is asked of the hub.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from ...core.errors import DeadlinePassed, LlamabenchError, UsageError
from ...model.quants import LLAMA_FTYPES, ftype_of
from ...world import catalog, hf_pick, hf_repo, remote
from ...world.remote import RemoteError
from ..source import ModelSource, looks_like_path, resolve

READ_AT_ONCE = 4  # headers read side by side
MAX_QUANTS = 64  # quants one sweep weighs (a repository's own hold some 30): more asks to be narrowed
SWEEP_SECONDS = 600.0  # one sweep's deadline, listing, header reads and fits together
NARROW = "name the quants to weigh: --quant Q4_K_M,Q5_K_M"


def asked_quants(quant: str) -> list[str]:
    """The quants --quant names (["all"], or a comma list), checked before the hub or the catalog is asked: a
    UsageError for none named, or more than MAX_QUANTS."""
    asked = [t.strip() for t in str(quant).split(",") if t.strip()]
    if not asked:
        raise UsageError(f"--quant {quant!r}: no quant named", hint="--quant all, or a comma list: Q4_K_M,Q5_K_M")
    if [t.lower() for t in asked] == ["all"]:
        return ["all"]
    check_count(len(asked), "--quant")
    return asked


def check_count(n: int, what: str) -> None:
    """A UsageError where a sweep would weigh more than MAX_QUANTS quants."""
    if n > MAX_QUANTS:
        raise UsageError(f"{what} names {n:,} quants: a sweep weighs {MAX_QUANTS} at most", hint=NARROW)


@dataclass
class SweepWatch:
    """One sweep's deadline (SWEEP_SECONDS from its start) and its progress: one line per quant as it is weighed,
    told to `report` (the CLI prints each on its own line on stderr)."""

    shown: str  # what is swept: hf://OWNER/REPO or a catalog id
    report: Callable[[str], None] | None = None
    total: int = 0
    done: int = 0
    start: float = field(default_factory=time.monotonic)

    def check(self) -> None:
        """DeadlinePassed once the sweep has run SWEEP_SECONDS."""
        elapsed = time.monotonic() - self.start
        if elapsed > SWEEP_SECONDS:
            raise DeadlinePassed(f"{self.shown}: the sweep passed its {SWEEP_SECONDS:g} s deadline after "
                                 f"{self.done} of {self.total} quants", hint=NARROW)

    def weighed(self, what: str, outcome: str) -> None:
        """One quant weighed: `what` (its tag, file, size) and `outcome` said in its own line."""
        self.done += 1
        if self.report is not None:
            self.report(f"llamabench: [{self.done}/{self.total}] {what}: {outcome} "
                        f"({time.monotonic() - self.start:.1f} s)")


@dataclass(frozen=True)
class QuantFile:
    """One quant of the repository: its tag, the file -hf OWNER/REPO:TAG loads, every part of it, and its size."""

    tag: str
    file: str
    parts: tuple[str, ...]
    size_bytes: int  # the listing's, summed over the parts (0: not said); only where the header cannot be read
    unlisted: str | None = None  # why llama.cpp's -hf would not load it whole: parts its listing lacks


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
    return several and (catalog.find_entry(model) is not None or is_local_file(model))


def is_local_file(model: str) -> bool:
    """MODEL names a GGUF file here (not a URL, not a catalog id): a sweep asks llama.cpp's recipe of it."""
    return not remote.is_remote(model) and looks_like_path(model)


def catalog_quants(model: str, quant: str) -> tuple[str, ...]:
    """The quants --quant asks of a catalog model: all (its published files, then llama-quantize's common file
    types), or a comma list, each a published quant or a file type (UsageError naming what is neither)."""
    entry = catalog.find_entry(model)
    published = [q.name for q in entry.published_quants] if entry is not None else []  # a file: the recipes alone
    asked = asked_quants(quant)
    if asked == ["all"]:
        every = tuple(dict.fromkeys([*published, *RECIPE_QUANTS]))
        check_count(len(every), f"{model} --quant all")
        return every
    by_upper = {q.upper(): q for q in published}
    unknown = [t for t in asked if t.upper() not in by_upper and ftype_of(t) is None]
    if unknown:
        raise UsageError(f"--quant {', '.join(unknown)}: neither a published quant of {model} nor a llama-quantize "
                         "file type" if entry is not None else f"--quant {', '.join(unknown)}: not a llama-quantize "
                         "file type", hint="published: " + (", ".join(published) or "none") + "; file types: "
                         + ", ".join(LLAMA_FTYPES))
    return tuple(dict.fromkeys(by_upper.get(t.upper(), t.upper()) for t in asked))


def list_quants(model: str, quant: str) -> RepoQuants:
    """The quants `--quant` asks for (all, or a comma list of tags, any case) of the repository MODEL names; each tag
    checked (a regular expression llama.cpp reads alike, MAX_QUANTS at most) before the hub is asked."""
    spec, at, revision = model[len("hf://"):].partition("@")
    repo, _ = hf_repo.split_repo_tag(spec)
    asked = asked_quants(quant)
    every = asked == ["all"]
    for t in [] if every else asked:
        hf_pick.tag_pattern(t.upper())
    listing = hf_repo.repo_listing(repo, revision or None, f"hf://{spec}")
    files = listing.files
    named = hf_pick.listed_tags(files)
    if every:
        check_count(len(named), f"hf://{spec} --quant all")
    found = hf_pick.repo_quants(files, named if every else None)
    if every and not found:
        listed = ", ".join(f for f in files if f.endswith(".gguf"))[:300] or "none"
        raise UsageError(f"hf://{spec}: no GGUF model file named by its quant (its .gguf files: {listed})"
                         f"{listing.unseen()}")
    if every:
        tags = list(found)
    else:
        by_upper = {t.upper(): t for t in named}
        tags = [by_upper.get(t.upper(), t.upper()) for t in asked]
        picks = {t: hf_pick.best_model_file(files, t) for t in dict.fromkeys(tags)}
        missing = [t for t, f in picks.items() if f is None]
        if missing:
            raise UsageError(f"--quant {', '.join(missing)}: hf://{spec} holds no such quant{listing.unseen()}",
                             hint="its quants: " + (", ".join(named) or "none"))
        found = picks
    quants = []
    for tag in dict.fromkeys(tags):
        parts = hf_pick.split_parts(files, found[tag])
        unlisted = hf_pick.unlisted_parts(files, found[tag])
        quants.append(QuantFile(tag, found[tag], tuple(parts), sum(listing.sizes.get(p, 0) for p in parts),
                                unlisted and unlisted + listing.unseen()))
    return RepoQuants(repo, revision if at else None, tuple(quants))


@dataclass(frozen=True)
class ReadQuant:
    """A quant's header read: the model (None where it could not be read, `error` says why)."""

    quant: QuantFile
    source: ModelSource | None
    error: str | None = None


@contextmanager
def read_headers(found: RepoQuants) -> Iterator[Iterator[ReadQuant]]:
    """Every quant's header (all its parts), in order as each arrives, READ_AT_ONCE read side by side; those not
    begun are dropped when the sweep ends early (its deadline), those begun end within their own deadline."""

    def read(q: QuantFile) -> ReadQuant:
        if q.unlisted:
            return ReadQuant(q, None, q.unlisted)
        try:
            source = resolve(found.url(q), quiet=True)  # the sweep says one line per quant, not one per header
        except (RemoteError, LlamabenchError) as exc:
            return ReadQuant(q, None, str(exc))
        spec = f"{found.repo}:{q.tag}"  # what llama.cpp's -hf is told: it loads this very file (its own pick)
        return ReadQuant(q, ModelSource(source.metadata, None, source.path, source.label, url=source.url,
                                        hf_spec=spec))

    pool = ThreadPoolExecutor(max_workers=READ_AT_ONCE)
    try:
        futures = [pool.submit(read, q) for q in found.quants]
        yield (f.result() for f in futures)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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
