"""Class 3 of the hostile fuzz campaign: remote reads from hostile servers (tests/support/http_server.py's modes).

`cases(tmp, stack)` starts two servers on 127.0.0.1 (the second only as a redirect target on another port)
and returns the CLI runs a user would make against them: plain URLs, URLs with `user:password@` and token
query strings, hf:// paths through HF_ENDPOINT with HF_TOKEN, and hf:// paths that try to leave their
repository. Every case's check fails on a secret in stdout, stderr or the case's cache, and on an
Authorization header that a server saw where it must not: on the other server at all, on this one under
another host name, or (a Bearer token) outside an OWNER/REPO/resolve/ path.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from llamabench.jobs.twin.build import write_twin
from llamabench.world import catalog
from tests.support.fuzz_harness import Case, Run
from tests.support.http_server import FileServer, write_big_header
from tests.support.twin_projector import write_projector
from tests.support.twin_split import write_split

GROUP = "3 remote reads"
PASSWORD = "password"
TOKEN = "secret-token-123"
SECRETS = (PASSWORD, TOKEN)
RESOLVE = re.compile(r"/[^/]+/[^/]+/resolve/[^/]+/[^?#]+")

# the hostile modes where a refusal is the only correct outcome, and those where the file is read all the same
REFUSED = ("trickle-status", "trickle-head", "trickle-body", "onebyte", "short-body", "huge-total", "star-total",
           "negative-total", "no-content-range", "wrong-start", "changing", "changing-no-if-range", "changing-size",
           "changing-date", "closed", "gzip", "norange", "loop", "secret", "slow")
READ = ("bigger", "redirect-body", "redirect-same", "redirect-other", "redirect-localhost")
TRAVERSALS = [
    "hf://own/repo/../../files/twin.gguf", "hf://own/repo/%2e%2e/%2e%2e/files/twin.gguf",
    "hf://own/repo/..%2f..%2ffiles%2ftwin.gguf", "hf://own/repo/twin.gguf@../../../files",
    "hf://own/repo/..\\..\\files\\twin.gguf", "hf://own/repo/twin.gguf?x=/../../files", "hf://../../files/twin.gguf",
]


def _serve(tmp: Path) -> Path:
    """The served folder: a small real GGUF, one with a 3 MiB header, a split set, a projector, a cut file."""
    root = tmp / "served"
    (root / "split").mkdir(parents=True)
    twin = write_twin(catalog.get_entry("qwen3-30b-a3b").metadata, tmp / "twin.gguf").path
    (root / "twin.gguf").write_bytes(twin.read_bytes())
    write_big_header(twin, root / "big-header.gguf")
    write_split(twin, root / "split", 3)
    write_projector(root / "mmproj.gguf")
    (root / "cut.gguf").write_bytes(twin.read_bytes()[:3000])
    return root


def _secret_in(folder: Path) -> str | None:
    for path in sorted(folder.rglob("*")) if folder.exists() else ():
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as f:
                tail = b""
                for block in iter(lambda: f.read(1 << 20), b""):
                    if any(s.encode() in tail + block for s in SECRETS):
                        return str(path)
                    tail = block[-64:]
    return None


def _misplaced_authorization(main: FileServer, other: FileServer) -> str | None:
    """A request that carried credentials where they must not go, or None."""
    host = main.url.removeprefix("http://")
    if other.served.authorized():
        return f"Authorization sent to another host: {other.served.authorized()[0].path}"
    for r in main.served.authorized():
        if r.host != host:
            return f"Authorization sent to {r.host} (another host name): {r.path}"
        if r.authorization.startswith("Bearer") and not RESOLVE.fullmatch(r.path):
            return f"the HF token left the repository: {r.path}"
    return None


def _check(cache: Path, main: FileServer, other: FileServer):
    def check(run: Run) -> str | None:
        for secret in SECRETS:
            if secret in run.stdout or secret in run.stderr:
                return f"{secret!r} shown"
        kept = _secret_in(cache)
        return f"a secret kept in {kept}" if kept else _misplaced_authorization(main, other)
    return check


def cases(tmp: Path, stack: contextlib.ExitStack) -> list[Case]:
    root = _serve(tmp)
    main = stack.enter_context(FileServer(root))
    other = stack.enter_context(FileServer(root))
    main.served.other_url = other.url
    host = main.url.removeprefix("http://")
    hf_env = {"HF_ENDPOINT": main.url, "HF_TOKEN": TOKEN}
    out: list[Case] = []

    def case(argv: list[str], must_fail: bool = False, **env) -> None:
        n = len(out)
        cache = tmp / f"cache-{n}"
        out.append(Case(group=GROUP, argv=argv, must_fail=must_fail, wall_s=20, check=_check(cache, main, other),
                        env={"LLAMABENCH_HTTP_TIMEOUT": "3", "LLAMABENCH_CACHE_DIR": str(cache),
                             "LLAMABENCH_REPORTS_DIR": str(tmp / f"reports-{n}"), "HF_TOKEN": TOKEN, **env}))

    # an honest server, the three ways in
    url = f"{main.url}/files/twin.gguf"
    case(["inspect", url])
    case(["inspect", url, "--json"])
    case(["fit", url, "-c", "8192"])
    case(["fit", f"{main.url}/files/split/twin-00001-of-00003.gguf", "-c", "8192"])
    case(["inspect", f"{main.url}/files/big-header.gguf", "--json"])
    # hostile servers
    for mode in REFUSED + READ:
        name = "big-header.gguf" if mode.startswith("changing") else "twin.gguf"  # changes show from the 2nd range
        case(["inspect", f"{main.url}/{mode}/{name}"], mode in REFUSED)
    case(["inspect", f"{main.url}/files/cut.gguf"], True)
    case(["inspect", f"{main.url}/files/missing.gguf"], True)
    case(["inspect", "http://127.0.0.1:9/files/twin.gguf"], True)  # nothing listens on the discard port
    # names the cache cannot use as they are
    case(["inspect", f"{main.url}/alias/{'a' * 300}~twin.gguf", "--json"])
    case(["fit", f"{main.url}/alias/{'b' * 300}~split/twin-00001-of-00003.gguf", "-c", "8192"])
    case(["inspect", f"{main.url}/alias/%0a%1b[2J..%2f..~twin.gguf?x=1"])
    # credentials in the URL: used, never shown, never kept, never sent to another host
    creds = f"http://user:{PASSWORD}@{host}"
    case(["inspect", f"{creds}/files/twin.gguf?token={TOKEN}&X-Amz-Signature={TOKEN}"])
    case(["inspect", f"{creds}/files/twin.gguf?sig={TOKEN}", "--json"])
    case(["fit", f"{creds}/files/twin.gguf", "-c", "8192"])
    case(["fit", f"{creds}/files/split/twin-00001-of-00003.gguf?token={TOKEN}", "-c", "8192"])
    case(["fit", "qwen3-30b-a3b", "-c", "4096", "--vram", "24GiB", "--mmproj", f"{creds}/files/mmproj.gguf"])
    case(["inspect", f"{creds}/files/missing.gguf?token={TOKEN}"], True)
    case(["bench", f"{creds}/files/twin.gguf?token={TOKEN}", "-c", "512"], True)
    case(["fit", f"{creds}/files/twin.gguf", "-c", "4096", "--verify"], True)
    case(["inspect", f"{creds}/redirect-other/twin.gguf"])
    case(["inspect", f"{creds}/redirect-localhost/twin.gguf"])
    # hf:// through a local endpoint, with a token
    case(["inspect", "hf://someone/some-repo/twin.gguf"], **hf_env)
    case(["inspect", "hf://someone/some-repo/twin.gguf@main", "--json"], **hf_env)
    case(["fit", "hf://someone/some-repo/split/twin-00001-of-00003.gguf", "-c", "8192"], **hf_env)
    case(["inspect", "hf://redirect-other/repo/twin.gguf"], **hf_env)
    case(["inspect", "hf://redirect-localhost/repo/twin.gguf"], **hf_env)
    case(["inspect", "hf://redirect-same/repo/twin.gguf", "--json"], **hf_env)
    case(["inspect", "hf://secret/repo/twin.gguf"], True, **hf_env)
    case(["inspect", "hf://changing/repo/big-header.gguf"], True, **hf_env)
    case(["inspect", "hf://someone/some-repo/twin.gguf"], HF_ENDPOINT=f"http://user:{PASSWORD}@{host}/",
         HF_TOKEN=TOKEN)
    for path in TRAVERSALS:
        case(["inspect", path], True, **hf_env)
    return out
