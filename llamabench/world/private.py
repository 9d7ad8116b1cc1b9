"""The cache trusts only what the user owns: folders made 0700 whatever the umask, files read or loaded only when
they are regular files (not links, FIFOs or devices) owned by the user and writable by no one else, and written
under a fresh name (O_EXCL | O_NOFOLLOW) then renamed over, so that a planted link is replaced, never followed.

What the memory-breakdown shim (a library the tool loads), the twins and the bandwidth measurement are cached
through. A cache another user could have written is refused in one line, naming the path and what is wrong."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..core.errors import UntrustedCache
from ..core.safe_text import escaped

PRIVATE_MODE = 0o700


def _problem(st: os.stat_result, *, folder: bool) -> str | None:
    """What makes this entry untrusted, in words; None where it is the user's own."""
    kind = stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not kind:
        return "is not a folder" if folder else "is not a regular file"
    if st.st_uid != os.geteuid():
        return f"belongs to uid {st.st_uid}, not to this user ({os.geteuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def private_folder(path: Path) -> Path:
    """The folder, made where missing (each new level 0700, whatever the umask), and checked: the user's own, no
    link, writable by no one else. UntrustedCache otherwise."""
    path = Path(path)
    missing = []
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, PRIVATE_MODE)
        except FileExistsError:
            pass  # another process made it at once: checked below like any other
        else:
            os.chmod(level, PRIVATE_MODE)  # the umask (000 too) does not widen it
    st = os.lstat(path)
    problem = _problem(st, folder=True)
    if problem:
        raise UntrustedCache(f"cache folder {escaped(str(path))} {problem}: not used",
                             hint="use a folder of your own (LLAMABENCH_CACHE_DIR), or fix its owner and mode (0700)")
    return path


def trusted_file(path: Path) -> bool:
    """Whether a cached file may be read or loaded: False where it is missing; UntrustedCache where it is there but
    not the user's own regular file (a link, a FIFO, another user's, writable by others)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    problem = _problem(st, folder=False)
    if problem:
        raise UntrustedCache(f"cached file {escaped(str(path))} {problem}: not used",
                             hint="delete it; llamabench makes it again")
    return True


def write_private(path: Path, data: bytes | str, *, size: int | None = None) -> None:
    """Write a cache file whole: a fresh name in its (private) folder, then renamed over the old one. `size` makes
    it that long, the rest a hole (a remote GGUF's sparse copy: its header, then no tensor data)."""
    folder = private_folder(Path(path).parent)
    tmp = folder / f".{Path(path).name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
            if size is not None:
                out.truncate(size)
        os.replace(tmp, path)  # replaces a link planted at `path`; never writes through it
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
