"""The one guard of every file llamabench writes: twins, results files, report files, cached headers.

Never write over an input of the run (the model, a projector, a results file a report reads), never
through a symbolic link, never onto something that is not a regular file (a FIFO, a device node), never
append to a file that holds no llamabench records (unless it is empty), and write whole files under a
temporary name then rename, so a full disk or a kill leaves the old file or nothing, not half a file.
Each refusal or failure is one `OutputError` line naming the path.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from ..core.errors import LlamabenchError

RECORD_SCHEMA_PREFIX = "llamabench/"  # as results.records.SCHEMA_PREFIX (a lower layer: not imported from there)
SCAN_LINES = 64  # lines read to find a llamabench record before appending to a file
SCAN_BYTES = 1 << 20
TORN_RECORD = re.compile(rb'^\{"schema":\s?"llamabench/[a-z]+-rec')

_inputs: dict[tuple[int, int], str] = {}  # (device, inode) of each input read in this process: its path


class OutputError(LlamabenchError):
    """A file that must not or cannot be written."""


def note_input(path: str | os.PathLike) -> None:
    """Remember a file this run reads (a model, a projector, results for a report): it is never written."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        _inputs.setdefault((st.st_dev, st.st_ino), str(path))


def _same_file(path: str, st: os.stat_result) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_output(path: str | os.PathLike, what: str = "output") -> Path:
    """`path` may be (over)written: not a link, not a special file, not an input; its folder can be made."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # absent, or under a file (check_folder says which)
        st = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot be checked as the {what} ({_reason(exc)})") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(f"{path}: a symbolic link; llamabench does not write through links (give the real "
                              f"path as the {what})")
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{path}: a folder, not a file to write the {what} to")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{path}: not a regular file (a FIFO, socket or device); not writing the {what} there")
        source = _inputs.get((st.st_dev, st.st_ino))
        if source is not None and _same_file(source, st):  # not an inode reused after the input was deleted
            raise OutputError(f"{path}: is an input of this run ({source}); writing the {what} there would destroy "
                              "it (give another path)")
        if not os.access(path, os.W_OK):
            raise OutputError(f"{path}: not writable")
        return path
    check_folder(path.parent, f"the folder of the {what} {path}")
    return path


def check_folder(folder: str | os.PathLike, what: str = "output folder") -> Path:
    """`folder` is a folder, or can be made one: its nearest existing ancestor is a writable folder."""
    folder = Path(folder)
    for existing in (folder, *folder.parents):
        try:
            st = os.stat(existing)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise OutputError(f"{folder}: cannot be checked as {what} ({_reason(exc)})") from None
        if not stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{folder}: {existing} is a file, not a folder ({what})")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise OutputError(f"{folder}: the folder {existing} is not writable ({what})")
        return folder
    return folder


def make_folder(folder: str | os.PathLike, what: str = "output folder") -> Path:
    folder = check_folder(folder, what)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot be made ({what}: {_reason(exc)})") from None
    return folder


def holds_records(path: Path) -> bool:
    """True when one of the first lines of `path` is a llamabench record (a torn or foreign line may precede it),
    or the start of one torn by a killed run (llamabench writes the schema first)."""
    with open(path, "rb") as f:
        for n in range(SCAN_LINES):
            raw = f.readline(SCAN_BYTES)  # bounded: a file with no newline is not read whole
            if not raw or f.tell() > SCAN_BYTES:
                return False
            if TORN_RECORD.match(raw):
                return True
            try:
                value = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict) and str(value.get("schema", "")).startswith(RECORD_SCHEMA_PREFIX):
                return True
    return False


def check_results_file(path: str | os.PathLike) -> Path:
    """A results file records may be appended to: a new one, an empty one, or one that holds llamabench records."""
    path = check_output(path, "results file")
    try:
        if path.exists() and path.stat().st_size > 0 and not holds_records(path):
            raise OutputError(f"{path}: holds no llamabench records; not appending to it (give a new or an empty "
                              "results file)")
    except OSError as exc:
        raise OutputError(f"{path}: cannot be read ({_reason(exc)})") from None
    return path


def write_atomically(path: str | os.PathLike, data: bytes | str, what: str = "output") -> Path:
    """Write a whole file under a temporary name beside it, then rename it into place."""
    def write(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)  # never through a planted link
        with os.fdopen(fd, "wb") as f:
            f.write(utf8(data) if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())

    return write_with(path, write, what)


def utf8(text: str) -> bytes:
    """A text file's bytes: UTF-8 always; a lone surrogate (a non-UTF-8 byte of a path that reached the text)
    written as its \\udcNN escape instead of failing the write."""
    return text.encode("utf-8", "backslashreplace")


def write_with(path: str | os.PathLike, write, what: str = "output") -> Path:
    """`write(tmp)` writes a temporary file beside `path` (a plot's savefig, say), then it is renamed over `path`:
    the file is whole or as it was (a full disk, a kill, an error of the writer). An OSError is one line."""
    path = check_output(path, what)
    make_folder(path.parent, f"the folder of the {what}")
    tmp = temporary_beside(path)
    _remove(tmp)  # a stale one of a dead process with this pid (a link there is removed, not followed)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"{path}: cannot write the {what} ({_reason(exc)})") from None
    except BaseException:
        _remove(tmp)
        raise
    return path


def temporary_beside(path: Path) -> Path:
    """A temporary name beside `path`, for writers that rename their finished file into place themselves."""
    return path.with_name(f".{path.name[:200]}.{os.getpid()}.tmp")


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
