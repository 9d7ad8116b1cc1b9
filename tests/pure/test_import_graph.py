"""The package's import graph: no cycle between modules or packages (deferred imports included), no import of a
higher layer from a lower one, no deferred import of our own code, and `import llamabench` loads no llama_cpp,
matplotlib or huggingface_hub. Read from the source with ast: nothing is imported to find the edges."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "llamabench"

# The layers are the folders of llamabench/, lowest first; a module may import its own layer or lower ones only.
LAYERS = (
    ("core", ("core",)),  # errors, units, typed JSON, statistics, safe text, ggml's cache types: used everywhere
    ("model", ("model",)),  # what a model is: GGUF keys, metadata, architectures, layout, weights
    ("settings", ("settings",)),  # llama.cpp's parameters: the one schema, Params, budgets, sweeps
    ("memory", ("memory",)),  # what it costs: footprint, runtimes, layer split, parts, speed
    ("world", ("world",)),  # the outside world: GGUF files, HTTP headers, catalog, machine, paths, outputs
    ("llama.cpp", ("llama",)),  # the one boundary to llama.cpp
    ("runtimes", ("runtimes",)),  # the programs that create a context: one module each, the line each prints
    ("records", ("records",)),  # result records, one module per kind, and their JSON Lines files
    ("jobs", ("jobs",)),  # one package per job: inspect, verify, fit, bench, roofline, quality, twin; source
    ("printers", ("render", "reporting")),  # text, tables, reports and plots from records
    ("api", ("api",)),  # the library's face
    ("commands", ("commands", "cli", "__init__", "__main__")),
)
PURE = ("core", "model", "settings", "memory")  # no file, clock, process or llama.cpp
LAYER_OF = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}
# outside libraries a function may import late: heavy or optional, kept off `import llamabench`
# (requests: 70 ms at every start of the command and of every llama.cpp child, for remote headers alone;
# pydoc_data: the 465 KB default text of `quality`)
DEFERRED_OK = ("llama_cpp", "matplotlib", "huggingface_hub", "pynvml", "requests", "pydoc_data")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def imports(name: str) -> list[tuple[str, bool, int]]:
    """(imported module, deferred?, line) for every import statement of one module, ours resolved to modules."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` imports never run: edges for the graph, not late imports
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            top |= {id(child) for child in node.body}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names]
        else:
            continue
        for target in targets:
            out.append((target, id(node) not in top, node.lineno))
    return out


def internal_edges() -> dict[str, set[str]]:
    return {name: {t for t, _, _ in imports(name) if t in MODULES and t != name} for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def unit(module: str) -> str:
    """A module's folder below llamabench (llamabench.memory.footprint -> memory), or its own name at the top."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def package(module: str) -> str:
    """A module's package: its folder, or a job's own package (llamabench.jobs.fit.search -> jobs.fit)."""
    parts = module.split(".")
    if len(parts) > 3 and parts[1] == "jobs":
        return ".".join(parts[1:3])
    return unit(module)


def test_every_module_has_a_layer():
    assert {unit(m) for m in MODULES} <= set(LAYER_OF), sorted({unit(m) for m in MODULES} - set(LAYER_OF))


def test_the_layers_are_folders():
    """Below the package only the façade and the entry points are modules; everything else is in a layer's folder."""
    top = {p.name for p in ROOT.glob("*.py")}
    assert top <= {"__init__.py", "__main__.py", "api.py", "cli.py"}, sorted(top)
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {n for _, names in LAYERS for n in names if (ROOT / n).is_dir()}, sorted(folders)


def test_pure_layers_do_no_io():
    """The pure layers import nothing that touches a file, a clock, a process, the network or llama.cpp."""
    io = {"subprocess", "socket", "time", "os", "shutil", "tempfile", "llama_cpp", "requests", "psutil", "urllib",
          "http", "ctypes", "threading", "signal", "fcntl", "matplotlib"}
    found = [f"{name}: {target}" for name in MODULES if unit(name) in PURE
             for target, _, _ in imports(name) if target.split(".")[0] in io]
    assert found == []


def test_no_cycle_between_modules():
    assert cycles(internal_edges()) == []


def test_no_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for a, targets in internal_edges().items():
        graph.setdefault(package(a), set()).update(package(b) for b in targets if package(b) != package(a))
    assert cycles(graph) == []


def test_no_import_of_a_higher_layer():
    upward = [f"{a} ({LAYERS[LAYER_OF[unit(a)]][0]}) imports {b} ({LAYERS[LAYER_OF[unit(b)]][0]})"
              for a, targets in internal_edges().items() for b in targets if LAYER_OF[unit(b)] > LAYER_OF[unit(a)]]
    assert upward == []


def test_deferred_imports_only_keep_heavy_libraries_out():
    late = [f"{MODULES[name].relative_to(ROOT.parent)}:{line}: {target}" for name in MODULES
            for target, deferred, line in imports(name)
            if deferred and target.split(".")[0] not in DEFERRED_OK]
    assert late == []


def test_import_llamabench_loads_no_heavy_library():
    code = ("import sys, llamabench; import llamabench.cli; llamabench.inspect; "
            "print(sorted(m for m in ('llama_cpp', 'matplotlib', 'huggingface_hub', 'requests') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_facade_names_resolve():
    import llamabench
    import llamabench.jobs.bench.runner  # noqa: F401 - a subpackage of the same name as an API function
    import llamabench.jobs.fit.search  # noqa: F401
    import llamabench.reporting.build  # noqa: F401

    for name in llamabench.__all__:
        assert getattr(llamabench, name) is not None, name
    assert callable(llamabench.bench) and callable(llamabench.fit) and callable(llamabench.report)


def test_the_graph_reader_sees_a_cycle():
    """The checks can fail: a made-up pair of modules that import each other is a cycle."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def loaded_by_name() -> set[str]:
    """The modules the package runs by name, not by an import statement: the commands of `commands.SUMMARY` (cli.py
    imports the one that runs with importlib) and a module with a `__main__` block that another module names in full
    in a string (a child started as `python -m llamabench.llama.child`)."""
    summary = next(node.value for node in ast.parse(MODULES["llamabench.commands"].read_text()).body
                   if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["SUMMARY"])
    out = {f"llamabench.commands.{key.value}" for key in summary.keys}
    for name, path in MODULES.items():
        out |= {node.value for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and node.value in MODULES and node.value != name
                and "if __name__ == \"__main__\":" in MODULES[node.value].read_text()}
    return out


def unimported(graph: dict[str, set[str]], roots: set[str]) -> list[str]:
    """The modules of a graph that no other module imports, the roots aside."""
    imported = {b for a, targets in graph.items() for b in targets if b != a}
    return sorted(set(graph) - imported - roots)


def test_every_module_is_imported_by_the_package():
    """The package ships only what it uses: a module that only tests, benchmarks or scripts import belongs in
    tests/support. The roots: the packages' __init__ (`from . import x` in one counts as an import of x), __main__,
    the entry point of pyproject's [project.scripts], and the modules the package runs by name."""
    import tomllib

    scripts = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]["scripts"]
    entry = {target.partition(":")[0] for target in scripts.values()}
    assert entry == {"llamabench.cli"} and "commands.{name}" in MODULES["llamabench.cli"].read_text()
    roots = {name for name, path in MODULES.items() if path.name in ("__init__.py", "__main__.py")} | entry
    assert unimported(internal_edges(), roots | loaded_by_name()) == []


def test_the_graph_reader_sees_a_module_nobody_imports():
    """The check can fail: a made-up module that only imports itself is imported by no other one."""
    graph = {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": set(), "pkg.c": {"pkg.c", "pkg.a"}}
    assert unimported(graph, {"pkg"}) == ["pkg.c"]
