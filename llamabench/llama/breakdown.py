"""llama.cpp's own memory breakdown of a context, buffer type by buffer type, in bytes.

`llama_get_memory_breakdown` (src/llama-ext.h) is what llama-fit-params and llama-server print as
their memory breakdown: per buffer type (Vulkan0, Vulkan_Host, CPU, RPC0[...]) the model's weights,
the context's KV cache and recurrent state, and the compute buffers. Under no_alloc (a dry run) the
weights are what each buffer type would hold after llama.cpp chose a buffer type for every tensor
(llama_model::load_tensors: select_weight_buft and buft_supported ask the device whether it takes the
tensor's type and op; llama_model_loader::done_getting_tensors logs the first one it refused), so
this is the only way to learn, without allocating, which weights a backend really takes.

It returns a C++ std::map, which ctypes cannot read: `breakdown.cpp` turns it into plain rows. It is
compiled on first use against the installed libllama (a C++ compiler is there wherever
llama-cpp-python was built from source) and cached by the library's identity; where it cannot be
built, `read` answers None and `unavailable()` says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..core.errors import EngineError
from ..memory.allocations import BufferBytes
from ..memory.backends import BackendRules
from ..world.paths import shim_dir
from ..world.private import private_folder, trusted_file, write_private
from ..world.versions import LLAMA_CPP_PYTHON_VERSION
from .process import die_with_parent

SOURCE = Path(__file__).with_name("breakdown.cpp")
LIBRARY_NAME = "libllamabench_breakdown.so"
FAILED_MARK = "failed"  # beside a shim that did not compile: its reason, so that no process tries again
BUILT_FOR = LLAMA_CPP_PYTHON_VERSION  # breakdown.cpp declares llama-ext.h / llama-model.h of this one's llama.cpp
MAX_BUFFER_TYPES = 64
COMPILE_TIMEOUT_S = 120


class _Row(ctypes.Structure):  # struct llamabench_breakdown_row (breakdown.cpp)
    _fields_ = [("name", ctypes.c_char * 128), ("model", ctypes.c_uint64), ("context", ctypes.c_uint64),
                ("compute", ctypes.c_uint64)]


class _TensorRow(ctypes.Structure):  # struct llamabench_tensor_row (breakdown.cpp)
    _fields_ = [("name", ctypes.c_char * 128), ("buft", ctypes.c_char * 128), ("is_host", ctypes.c_int)]


class _BackendRules(ctypes.Structure):  # struct llamabench_backend_rules (breakdown.cpp)
    _fields_ = [("offload", ctypes.c_int), ("min_batch", ctypes.c_int64), ("max_tensor_bytes", ctypes.c_uint64),
                ("cuda_alloc_size", ctypes.c_int), ("vulkan_order", ctypes.c_int)]


_shim = None
_why_not: str | None = None


def _libllama() -> Path:
    """The libllama llama-cpp-python loaded (LLAMA_CPP_LIB_PATH may move it); RuntimeError for another version."""
    import llama_cpp

    if llama_cpp.__version__ != BUILT_FOR:
        raise RuntimeError(f"the memory-breakdown shim declares the llama.cpp of llama-cpp-python {BUILT_FOR}; this "
                           f"is {llama_cpp.__version__}")
    loaded = getattr(getattr(llama_cpp.llama_cpp, "_lib", None), "_name", None)
    return Path(loaded) if loaded else Path(llama_cpp.__file__).parent / "lib" / "libllama.so"


def _ggml_headers(libllama: Path) -> Path | None:
    """The folder of the ggml.h llama-cpp-python installed beside its library (site-packages/include), or None."""
    for folder in (libllama.parent.parent.parent / "include", libllama.parent.parent / "include"):
        if (folder / "ggml.h").is_file() and (folder / "ggml-backend.h").is_file():
            return folder
    return None


def _key(libllama: Path, source: Path = SOURCE) -> str:
    """The shim is built for one libllama: its path, size and time, the ggml.h it is compiled with, and the shim's
    own source."""
    st = libllama.stat()
    headers = _ggml_headers(libllama)
    ident = (f"{libllama.resolve()}|{st.st_size}|{st.st_mtime_ns}|{headers}|".encode() + source.read_bytes())
    return hashlib.sha256(ident).hexdigest()[:16]


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build(source: Path = SOURCE, library: str = LIBRARY_NAME, *, optimize: str = "-O1",
          what: str = "the memory-breakdown shim") -> Path:
    """A shim for the installed libllama (this one, or another `source`, as `library`), compiled once into the cache;
    OSError / RuntimeError if it cannot be."""
    libllama = _libllama()
    if not libllama.is_file():
        raise RuntimeError(f"llama-cpp-python has no {libllama}")
    target = shim_dir() / _key(libllama, source) / library
    failed = target.with_name(FAILED_MARK)
    private_folder(target.parent)  # 0700, the user's own: code is loaded from here (UntrustedCache otherwise)
    if trusted_file(target):  # a regular file of the user's, written by no one else: never a planted link
        return target
    if trusted_file(failed):
        raise RuntimeError(failed.read_text(errors="replace")[:300])
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError(f"no C++ compiler (c++, g++, clang++ or $CXX) to build {what}")
    fd, name = tempfile.mkstemp(prefix=f".{library}.", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    lib = libllama.parent
    headers = _ggml_headers(libllama)  # ggml.h: the backend rules of an emulated card are compiled with it
    argv = [compiler, "-std=c++17", optimize, "-shared", "-fPIC", "-pthread", str(source), "-o", str(partial),
            f"-L{lib}", f"-l:{libllama.name}", "-lggml-base", f"-Wl,-rpath,{lib}"]
    if headers is not None:
        argv[1:1] = [f"-I{headers}", "-DLLAMABENCH_GGML_H"]
    try:
        parent = os.getpid()  # the compiler dies with the tool, even by SIGKILL (it lives seconds after at most)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                              preexec_fn=lambda: die_with_parent(parent))
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
            reason = f"{what} did not compile: {said}"
            write_private(failed, reason)
            raise RuntimeError(reason)
        os.chmod(partial, 0o700)  # the linker's mode follows the umask: 000 would leave it writable by all
        os.replace(partial, target)  # atomic: another process building it at once gets a whole file
    finally:
        partial.unlink(missing_ok=True)
    return target


def _load():
    global _shim, _why_not
    if _shim is None and _why_not is None:
        try:
            lib = ctypes.CDLL(str(build()))
            lib.llamabench_memory_breakdown.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Row), ctypes.c_int]
            lib.llamabench_memory_breakdown.restype = ctypes.c_int
            lib.llamabench_tensor_buffers.argtypes = [ctypes.c_void_p, ctypes.POINTER(_TensorRow), ctypes.c_int]
            lib.llamabench_tensor_buffers.restype = ctypes.c_int
            if hasattr(lib, "llamabench_emulate_backend"):  # compiled with ggml.h
                lib.llamabench_emulate_backend.argtypes = [ctypes.c_void_p, ctypes.POINTER(_BackendRules)]
                lib.llamabench_emulate_backend.restype = ctypes.c_int
            _shim = lib
        except Exception as exc:  # noqa: BLE001 - any failure here means: no breakdown, said once, never fatal
            _why_not = str(exc) or type(exc).__name__
    return _shim


def unavailable() -> str | None:
    """Why the breakdown cannot be read here, or None where it can."""
    _load()
    return _why_not


def read(ctx) -> dict[str, BufferBytes] | None:
    """The breakdown of a live llama_context (a ctypes pointer), by buffer-type name; None where unavailable."""
    shim = _load()
    if shim is None or not ctx:
        return None
    rows = (_Row * MAX_BUFFER_TYPES)()
    n = shim.llamabench_memory_breakdown(ctx, rows, MAX_BUFFER_TYPES)
    if n < 0 or n > MAX_BUFFER_TYPES:
        return None
    out: dict[str, BufferBytes] = {}
    for row in rows[:n]:
        name = row.name.decode("utf-8", errors="replace")
        seen = out.get(name, BufferBytes())
        out[name] = BufferBytes(seen.model + row.model, seen.context + row.context, seen.compute + row.compute)
    return out


def merged(first: dict[str, BufferBytes], second: dict[str, BufferBytes] | None, *,
           contexts_only: bool) -> dict[str, BufferBytes]:
    """Two contexts' breakdowns in one; `contexts_only`: the second runs on the same model (llama-server's MTP
    context), so its weights are not counted again."""
    if second is None:
        return first
    out = dict(first)
    for name, b in second.items():
        seen = out.get(name, BufferBytes())
        out[name] = BufferBytes(seen.model + (0 if contexts_only else b.model), seen.context + b.context,
                                seen.compute + b.compute)
    return out


def host_tensors(model) -> tuple[str, ...] | None:
    """Names of the weight tensors a loaded llama_model (a ctypes pointer) keeps in host buffer types (system RAM:
    CPU, a GPU backend's pinned host type): those of the host layers and any the devices refused. None where
    unavailable."""
    shim = _load()
    if shim is None or not model:
        return None
    cap = 4096
    while True:
        rows = (_TensorRow * cap)()
        n = shim.llamabench_tensor_buffers(model, rows, cap)
        if n < 0:
            return None
        if n <= cap:
            break
        cap = n
    names = (row.name.decode("utf-8", errors="replace") for row in rows[:n] if row.is_host == 1)
    return tuple(dict.fromkeys(names))


def emulate_backend(device: int, rules: "BackendRules | None") -> None:
    """Give an RPC device (a ggml_backend_dev_t) the target backend's rules (memory.backends), or with None its own
    back: op offload, the largest tensor an op takes, CUDA's flash attention room. EngineError where the shim
    cannot (no compiler, no ggml.h): a fit for a GPU backend is then not made on a card that answers as a CPU."""
    shim = _load()
    if shim is None or not hasattr(shim, "llamabench_emulate_backend"):
        raise EngineError("this machine cannot give the emulated card a GPU backend's rules (op offload, allocation "
                          "sizes): " + (_why_not or "the shim was built without ggml.h")
                          + "; --backend cpu sizes the emulated card as it is")
    raw = None if rules is None else _BackendRules(rules.offload, rules.min_batch, rules.max_tensor_bytes,
                                                   int(rules.cuda_alloc_size), int(rules.vulkan_order))
    if shim.llamabench_emulate_backend(device, None if raw is None else ctypes.byref(raw)) != 0:
        raise EngineError("the emulated card has no buffer type to give a backend's rules to")
