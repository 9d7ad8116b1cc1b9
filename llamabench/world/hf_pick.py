"""Which file of a Hugging Face repository's listing llama.cpp's `-hf OWNER/REPO[:TAG]` loads, by llama.cpp's own
rules (common/download.cpp, llama.cpp as vendored by llama-cpp-python 0.3.36), over the listing llama.cpp reads
(hf_repo.repo_listing):

- `get_gguf_split_info` (482-510): a path ending `.gguf` (that case) whose stem is `PREFIX-NNNNN-of-NNNNN` is part
  NNNNN of a split set: ASCII digits only (`[0-9]{5}`), "of" in any case (`std::regex::icase`), PREFIX one character
  at least and no line end (`.+`);
- `get_split_files` (524-540): the parts llama.cpp downloads are those the listing holds;
- `gguf_filename_is_model` (637-653): a .gguf whose name holds no mmproj, imatrix, mtp-, eagle3-, dflash- or dspark-;
- `find_best_model` (655-693): the tag compiled as a regular expression, `std::regex(tag + "[.-]", icase)`, searched
  in each path in listing order (the first that matches wins); with no tag Q4_K_M, then Q8_0, then the first model
  file; a split set's first part only;
- `common_download_get_hf_plan` (720-725): a repository holding preset.ini loads that, and no GGUF picked by tag.

std::regex is ECMAScript, on the path's bytes; Python's `re` is read on the same bytes where the two agree: a tag of
letters, digits, `_ - . * + ? | ( )`, `.` any byte but a line end, no `(?` extension, no quantifier after another.
Any other tag is refused, and an invalid one (llama.cpp would throw) too.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..core.errors import UsageError
from ..core.safe_text import escaped

DEFAULT_TAGS = ("Q4_K_M", "Q8_0")
PRESET = "preset.ini"
_SIDECARS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
_SPLIT = re.compile(r"\A([^\n\r]+)-([0-9]{5})-(of)-([0-9]{5})\.gguf\Z", re.IGNORECASE | re.ASCII)  # download.cpp:483
_TAG_ALPHABET = re.compile(r"[A-Za-z0-9_.*+?|()-]*")
_NOT_ECMASCRIPT = re.compile(r"\(\?|[*+?][*+]")  # Python's (?...) and possessive quantifiers: no std::regex
MAX_TAG = 100


class BadTag(UsageError):
    """A quant tag llama.cpp's -hf would not read as llamabench reads it (or not at all: an invalid regex)."""


@lru_cache(maxsize=256)
def tag_pattern(tag: str) -> re.Pattern[bytes]:
    """`std::regex(tag + "[.-]", std::regex::icase)` of find_best_model (download.cpp:666), as a bytes pattern.
    BadTag for a tag the two engines might read apart, or that is no regular expression."""
    hint = "write the quant as the file names it: Q4_K_M, UD-Q4_K_XL, IQ4_XS"
    if len(tag) > MAX_TAG or not _TAG_ALPHABET.fullmatch(tag) or _NOT_ECMASCRIPT.search(tag):
        raise BadTag(f"quant '{escaped(tag[:MAX_TAG])}': llama.cpp's -hf reads it as a regular expression, and "
                     "llamabench reads one alike only of letters, digits and _ - . * + ? | ( ), with no '(?' and no "
                     "quantifier after another", hint=hint)
    try:
        return re.compile(tag.replace(".", "[^\n\r]").encode() + rb"[.-]", re.IGNORECASE)
    except re.error as exc:
        raise BadTag(f"quant '{escaped(tag)}' is not a valid regular expression ({exc.msg}): llama.cpp's -hf would "
                     "stop on it", hint=hint) from None


def _bytes(path: str) -> bytes:
    return path.encode("utf-8", "surrogatepass")


def is_model_file(path: str) -> bool:
    """gguf_filename_is_model (download.cpp:637-653)."""
    name = path.rsplit("/", 1)[-1]
    return path.endswith(".gguf") and not any(s in name for s in _SIDECARS)


def _first_part(path: str) -> bool:
    """Not a later part of a split set (download.cpp:670-673: count > 1 and index != 1 skipped)."""
    m = _SPLIT.search(path)
    return m is None or int(m[4]) <= 1 or int(m[2]) == 1


def best_model_file(files: list[str], tag: str) -> str | None:
    """The file llama.cpp's -hf loads for TAG (find_best_model, download.cpp:655-693); BadTag where the tag is not
    one to read alike."""
    for t in ([tag] if tag else list(DEFAULT_TAGS)):
        pattern = tag_pattern(t)
        for f in files:
            if is_model_file(f) and pattern.search(_bytes(f)) and _first_part(f):
                return f
    if not tag:
        return next((f for f in files if is_model_file(f) and _first_part(f)), None)
    return None


_QUANT_TAG = re.compile(r"(?<![A-Za-z0-9])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|TQ\d_\d|MXFP4(?:_[A-Z0-9]+)*|BF16|F16|F32))"
                        r"(?=[.-])", re.IGNORECASE | re.ASCII)


def quant_tag(path: str) -> str | None:
    """The quant a model file's name says (Q4_K_M, UD-Q4_K_XL, IQ4_XS, BF16...; the last one named), or None."""
    found = _QUANT_TAG.findall(path.rsplit("/", 1)[-1])
    return found[-1].upper() if found else None


def split_parts(files: list[str], first: str) -> list[str]:
    """Every part of the split set whose first part is `first` (the file alone where it is not split), in order."""
    return [p for p in _part_names(first) if p in files]


def _part_names(first: str) -> list[str]:
    """The names of every part of the split set whose first part is `first` (the file alone where it is not split)."""
    m = _SPLIT.search(first)
    if m is None:
        return [first]
    stem, of, count = m[1], m[3], int(m[4])
    return [f"{stem}-{i:05d}-{of}-{count:05d}.gguf" for i in range(1, count + 1)]


def unlisted_parts(files: list[str], first: str) -> str | None:
    """Words naming the parts of `first`'s split set the listing lacks (llama.cpp downloads the parts it lists,
    get_split_files, download.cpp:524-540), or None where it lists them all."""
    if _SPLIT.search(first) is None:
        return None
    parts = _part_names(first)
    missing = ["-".join(_SPLIT.search(p).group(2, 3, 4)) for p in parts if p not in files]  # 00002-of-00002
    if not missing:
        return None
    named = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return (f"{escaped(first)}: {len(missing)} of its {len(parts)} parts ({named}) are not in the listing llama.cpp's "
            "-hf reads, and it would not download them")


def listed_tags(files: list[str]) -> list[str]:
    """The quants the model files' names say, each once, in listing order."""
    return list(dict.fromkeys(t for f in files if is_model_file(f) and _first_part(f) and (t := quant_tag(f))))


def repo_quants(files: list[str], tags: list[str] | None = None) -> dict[str, str]:
    """Each quant (those the names say, or `tags`) and the file llama.cpp's -hf OWNER/REPO:QUANT loads for it."""
    picks = {t: best_model_file(files, t) for t in (listed_tags(files) if tags is None else tags)}
    return {t: f for t, f in picks.items() if f is not None}
