"""llama.cpp's dry-run figures kept on disk between fits: a second `fit` of the same file on the same kind of devices
asks llama.cpp nothing it has answered before.

A dry run's compute buffers depend on the file, the build of llama.cpp, the devices and the context's and
placement's parameters, and on nothing else (no clock, no free memory): the key holds each. Only what the emulated
card or the CPU alone answered is kept (a remote host or a GPU may change under the same name); a context llama.cpp
refused is kept with its reason. The cache is the user's own (world.private): a file another user could have
written is not read."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ...core.errors import UntrustedCache
from ...memory.backends import emulates
from ...settings.params import Params
from ...world.paths import cache_dir
from ...world.private import trusted_file, write_private
from ...world.versions import LLAMA_CPP_PYTHON_VERSION
from ..seeds.store import seed_entries
from .search import ComputeSplit

VERSION = 3  # of this cache's layout: a change starts anew
TWIN_FOLDERS = ("shape-twins", "twins")  # cache folders whose file names carry their content's digest


def devices_kind(*, emulated: bool, cpu_alone: bool = False, backend: str | None = None) -> str:
    """The kind of devices a dry run's answers hold for: an emulated card (answering as a GPU backend does, where
    one is named: memory.backends), the CPU alone, or the build's own default devices."""
    kind = "cpu-alone" if cpu_alone else "emulated" if emulated else "build-default"
    if emulated and emulates(backend and backend.split(",")[0]):  # a rules key: NAME[,limit=value...]
        kind += f"|backend={backend}"
    return kind


def file_identity(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"


def twin_name(path: str) -> str | None:
    """A twin the tool writes, by its file name (its label and the digest of what decides its bytes), the same on
    every machine; None for any other file."""
    p = Path(path)
    if p.parent.name not in TWIN_FOLDERS or p.parent.parent != cache_dir():
        return None
    return f"{p.parent.name}/{p.name}"


MAX_BYTES = 2**50  # a PiB: no buffer of any device is larger; a cache entry past it (or below 0) is not trusted


def _size(value) -> bool:
    """A byte count a dry run could have answered: an int (not a bool), 0 to a PiB."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_BYTES


def _pair(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_size(v) for v in value)


class DryRunCache:
    """Dry runs of one file on one kind of devices: settings -> ComputeSplit, or the reason llama.cpp refused."""

    def __init__(self, model_path: str, devices: str):
        key = f"{VERSION}|{LLAMA_CPP_PYTHON_VERSION}|{file_identity(model_path)}|{devices}"
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()  # a path need not be UTF-8
        self.path = cache_dir() / "dry-runs" / (digest[:32] + ".json")
        self.entries: dict[str, list] = {}
        self.dirty = False
        try:
            if trusted_file(self.path):
                stored = json.loads(self.path.read_text())
                if isinstance(stored, dict) and stored.get("key") == key and isinstance(stored.get("entries"), dict):
                    self.entries = stored["entries"]
        except (OSError, ValueError, UntrustedCache):
            self.entries = {}  # none, damaged, or not the user's own: dry runs answer again
        self.key = key
        name = twin_name(model_path)  # a twin's dry runs may be shipped (jobs/seeds): the built-in default's
        self.seed = seed_entries(name, devices) if name and devices.startswith("emulated") else {}

    @staticmethod
    def _name(settings: Params) -> str:
        return json.dumps(settings.to_dict(), sort_keys=True)

    def get(self, settings: Params) -> ComputeSplit | str | None:
        """The stored figures, the stored refusal (a str), or None."""
        entry = self.entries.get(self._name(settings)) or self.seed.get(self._name(settings))
        if not isinstance(entry, list) or len(entry) != 2:
            return None
        kind, value = entry
        if kind == "refused" and isinstance(value, str):
            return value
        if kind == "split" and isinstance(value, list) and len(value) == 5 and all(
                _size(v) for v in value[:2]) and isinstance(value[2], list) and all(_size(c) for c in value[2]) \
                and isinstance(value[3], list) and all(_pair(c) for c in value[3]) and _pair(value[4]):
            return ComputeSplit(card=value[0], host=value[1], cards=tuple(value[2]),
                                caches=tuple(tuple(c) for c in value[3]), host_caches=tuple(value[4]))
        return None

    def put(self, settings: Params, result: ComputeSplit | str) -> None:
        self.entries[self._name(settings)] = (["refused", result] if isinstance(result, str)
                                              else ["split", [result.card, result.host, list(result.cards),
                                                              [list(c) for c in result.caches],
                                                              list(result.host_caches)]])
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            write_private(Path(self.path), json.dumps({"key": self.key, "entries": self.entries}))
        except (OSError, UntrustedCache):
            pass  # no cache this time: the answers stand
        self.dirty = False
