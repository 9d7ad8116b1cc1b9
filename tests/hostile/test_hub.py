"""-hf OWNER/REPO[:QUANT] sizes the file llama.cpp's -hf loads, by llama.cpp's own rules (common/hf-cache.cpp and
common/download.cpp, as vendored by llama-cpp-python 0.3.36): the same listing (one page; an entry whose oid is not 40
or 64 hex digits, or whose path leaves the snapshot, skipped), the same matching (a split suffix of ASCII digits, "of"
in any case; the tag a regular expression, tried in listing order). Where llama.cpp would load something else, or
stop, one line and no command."""

from __future__ import annotations

import json
import shutil

import pytest

import llamabench as lb
from llamabench.cli import main
from llamabench.world.hf_repo import expand
from tests.support.fake_hub import REPO, asked_of, entry, fake_hub, one_error, small_twin
from tests.support.twin_split import write_split

ARABIC_2 = "\u0660\u0660\u0660\u0660\u0662"  # ٠٠٠٠٢: digits to Python's \d, not to llama.cpp's [0-9]
COMMIT = "c" * 40
MISSING = "1 of its 2 parts (00002-of-00002) are not in the listing"  # the part llama.cpp would not download, named

PICKS = [
    # an oid that is not 40 or 64 hex digits: llama.cpp skips the entry ("skip invalid oid", hf-cache.cpp:326)
    ([[entry("A-Q4_K_M.gguf", oid="0"), entry("B-Q4_K_M.gguf")]], "Q4_K_M", "B-Q4_K_M.gguf"),
    # an LFS file's oid is its object's (hf-cache.cpp:318): a bad one there skips it, whatever the entry's own
    ([[entry("A-Q4_K_M.gguf", lfs={"oid": "sha256:x", "size": 1}), entry("B-Q4_K_M.gguf")]], "Q4_K_M",
     "B-Q4_K_M.gguf"),
    # and a good one there keeps it, whatever the entry's own
    ([[entry("A-Q4_K_M.gguf", oid="?", lfs={"oid": "a" * 64}), entry("B-Q4_K_M.gguf")]], "Q4_K_M", "A-Q4_K_M.gguf"),
    # paths out of the snapshot folder, climbing or absolute: skipped ("skip invalid path", hf-cache.cpp:313)
    ([[entry("../A-Q4_K_M.gguf"), entry("/A-Q4_K_M.gguf"), entry("x/../../A-Q4_K_M.gguf"), entry("B-Q4_K_M.gguf")]],
     "Q4_K_M", "B-Q4_K_M.gguf"),
    # a split suffix is ASCII digits (download.cpp:483): with others the file is whole, and the first match
    ([[entry(f"A-Q4_K_M-{ARABIC_2}-of-{ARABIC_2}.gguf"), entry("B-Q4_K_M.gguf")]], "Q4_K_M",
     f"A-Q4_K_M-{ARABIC_2}-of-{ARABIC_2}.gguf"),
    # "of" in any case (std::regex::icase): -00002-OF-00002 is a second part, never loaded as the model
    ([[entry("A-Q4_K_M-00002-OF-00002.gguf"), entry("B-Q4_K_M.gguf")]], "Q4_K_M", "B-Q4_K_M.gguf"),
    # a split suffix needs a prefix before it (`^(.+)-`): with none the file is whole, and the first model file
    ([[entry("-00002-of-00002.gguf"), entry("B.gguf")]], "", "-00002-of-00002.gguf"),
    # the tag is a regular expression (download.cpp:666): '.' is any character, and the first file it finds wins
    ([[entry("A-Q4_K_M.gguf"), entry("B-Q4.K.M.gguf")]], "Q4.K.M", "A-Q4_K_M.gguf"),
    # a group and an alternation read as llama.cpp reads them
    ([[entry("A-Q4_K_S.gguf"), entry("B-Q4_K_M.gguf")]], "q4_k_(m|l)", "B-Q4_K_M.gguf"),
    # one page (hf-cache.cpp:293): the Q4_K_M on page 2 is unseen, so no tag loads page 1's Q8_0
    ([[entry("README.md"), entry("A-Q8_0.gguf")], [entry("B-Q4_K_M.gguf")]], "", "A-Q8_0.gguf"),
]


@pytest.mark.parametrize("pages, tag, chosen", PICKS)
def test_the_file_sized_is_the_one_llama_cpp_loads(tmp_path, monkeypatch, pages, tag, chosen):
    with fake_hub(tmp_path, pages, monkeypatch) as hub:
        assert expand(f"hf://{REPO}" + (f":{tag}" if tag else "")) == f"hf://{REPO}/{chosen}"
        assert len(asked_of(hub)) == 1  # one page of the listing, as llama.cpp asks it


def test_the_header_read_is_the_first_pages_pick(tmp_path, monkeypatch, capsys):
    """The whole way: `inspect -hf` reads the header of page 1's Q8_0, the file llama.cpp's -hf loads."""
    twin = small_twin(tmp_path / "twin.gguf")
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("A-Q8_0.gguf", "B-Q4_K_M.gguf"):
        shutil.copyfile(twin, root / name)
    with fake_hub(root, [[entry("A-Q8_0.gguf")], [entry("B-Q4_K_M.gguf")]], monkeypatch):
        assert main(["inspect", "-hf", REPO, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["model"]["path"].endswith("/A-Q8_0.gguf")


@pytest.mark.parametrize("tag, says", [
    ("Q4_K_M(", "not a valid regular expression"),  # llama.cpp's std::regex would throw
    ("(?i)q4_k_m", "no '(?'"),  # Python's own syntax: no ECMAScript regex
    ("Q4_K_M*+", "no quantifier after another"),  # possessive in Python 3.11, an error in ECMAScript
    ("Q4_K_[MS]", "regular expression"),  # a class: not read alike for sure
])
def test_a_tag_not_read_alike_is_one_line_before_the_hub_is_asked(tmp_path, monkeypatch, capsys, tag, says):
    with fake_hub(tmp_path, [[entry("A-Q4_K_M.gguf")]], monkeypatch) as hub:
        one_error(capsys, ["fit", "-hf", f"{REPO}:{tag}", "--ctx", "4096"], says, code=2)
        one_error(capsys, ["fit", "-hf", REPO, "--quant", f"Q8_0,{tag}"], says, code=2)
        assert asked_of(hub) == []


@pytest.mark.parametrize("pages, tag, says", [
    # llama.cpp loads what preset.ini names (download.cpp:720-725), not a GGUF picked by tag
    ([[entry("preset.ini"), entry("A-Q4_K_M.gguf")]], "Q4_K_M", "preset.ini"),
    # a path that climbs out and may come back in (the commit's folder): llama.cpp might keep it, under its own name
    ([[entry(f"../{COMMIT}/A-Q4_K_M.gguf"), entry("B-Q4_K_M.gguf")]], "Q4_K_M", "may come back"),
    # a lone surrogate: nlohmann's parser reads no listing at all, and llama.cpp loads a file of its cache instead
    ([[entry("\ud800A-Q4_K_M.gguf"), entry("B-Q4_K_M.gguf")]], "Q4_K_M", "not JSON (as llama.cpp reads it)"),
    # the quant only on page 2: llama.cpp finds none, and the line says why
    ([[entry("A-Q8_0.gguf")], [entry("B-Q4_K_M.gguf")]], "Q4_K_M", "llama.cpp's -hf reads the first page only"),
])
def test_where_llama_cpp_would_load_another_file_or_none_it_is_one_line(tmp_path, monkeypatch, capsys, pages, tag,
                                                                       says):
    with fake_hub(tmp_path, pages, monkeypatch):
        one_error(capsys, ["fit", "-hf", f"{REPO}:{tag}", "--ctx", "4096"], says)
        one_error(capsys, ["fit", "-hf", REPO, "--quant", tag], says, code=2 if "page" in says else 1)


def test_a_split_set_llama_cpp_would_not_download_whole_is_not_sized(tmp_path, monkeypatch, capsys):
    """Part 2 on the listing's second page: llama.cpp's -hf downloads the parts it lists (download.cpp:524-540), so
    part 1 alone; its command is never printed, and a sweep says why in the quant's own line."""
    twin = small_twin(tmp_path / "M-Q4_K_M.gguf")
    root = tmp_path / "repo"
    root.mkdir()
    first, second = write_split(twin, root, 2)
    with fake_hub(root, [[entry(first.name)], [entry(second.name)]], monkeypatch):
        one_error(capsys, ["inspect", "-hf", f"{REPO}:Q4_K_M"], MISSING)
        swept = lb.fit_quants(f"hf://{REPO}", quant="Q4_K_M", n_ctx=4096, vram="24GiB")
    (quant,) = swept.quants
    assert quant.record is None and MISSING in quant.error and swept.best() is None
