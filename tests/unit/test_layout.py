"""The layout holds its lines (``condensate/__init__.py`` draws the map): importing any module
of the pure core alone loads no I/O library; the core imports only itself, ``events`` and
``errors``; the event log never imports the runtime; only the composition root (``app``)
imports the HTTP edge and the engines; no import runs in a circle (type-only imports
included); the top level stays small and every layer's ``__init__`` says what it is; and no
module of ``condensate`` names an engine: what it knows of one, the engine's package
declares."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from condensate.engine.registry import installed

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("condensate", "adapters")
TEST_SUPPORT = "condensate.testing"
"""Fakes and builders for tests (a thread builder's default engine): not the core."""
CORE = "condensate.core"
PURE = ("condensate.events", "condensate.errors")
"""Beside the core, the two modules it may import."""
IO_LIBRARIES = ("aiohttp", "anyio", "sqlite3", "psycopg", "structlog")
COMPOSITION_ROOT = "condensate.app"
EDGE = "condensate.http"
TOP_LEVEL_MODULES = 12


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules ``name`` imports, anywhere in it (TYPE_CHECKING too); its own
    parent packages, which Python has always run first, are no edge."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    edges: set[str] = set()
    for imported_name in names:
        module = imported_name
        while module and module not in known:
            module = module.rpartition(".")[0]
        if module and module != name and not name.startswith(module + "."):
            edges.add(module)
    return edges


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other round (Tarjan's strongly connected
    components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_runs_in_a_circle() -> None:
    assert cycles(graph()) == []


def crossings(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each core module's imports of the engines."""
    found = {
        name: sorted(d for d in deps if d.split(".")[0] == "adapters")
        for name, deps in edges.items()
        if name.split(".")[0] == "condensate"
    }
    return {name: deps for name, deps in found.items() if deps}


def engine_names_in(source: str, engines: set[str]) -> list[tuple[int, str]]:
    """Where ``source`` spells an engine's name as a string (docstrings aside): a rule, a
    default or a comparison about one engine, which belongs in its package."""
    tree = ast.parse(source)
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in engines
        and id(node) not in docstrings
    ]


def test_the_core_never_imports_the_engines() -> None:
    assert crossings(graph()) == {}


def test_the_core_names_no_engine() -> None:
    """No module of the core (test support aside) spells an installed engine's name."""
    engines = set(installed())
    assert {"api", "claude", "codex"} <= engines
    named = {
        name: found
        for name, path in modules().items()
        if name.split(".")[0] == "condensate" and not name.startswith(TEST_SUPPORT)
        if (found := engine_names_in(path.read_text(encoding="utf-8"), engines))
    }
    assert named == {}


def test_the_checks_see_a_circle_a_crossing_and_a_name() -> None:
    """The checks can fail: a circle of two modules is found, a core module importing an
    engine is, and so is a rule that names an engine (its docstring may)."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert crossings({"condensate.x": {"adapters.y", "condensate.z"}}) == {
        "condensate.x": ["adapters.y"]
    }
    source = 'def f(e):\n    """For "codex" only."""\n    return e == "codex"\n'
    assert engine_names_in(source, {"codex"}) == [(3, "codex")]
    edges = graph()
    assert any(d.startswith("condensate") for d in edges["adapters.native.engine"])


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def probe(module: str) -> subprocess.Popen[str]:
    """A fresh interpreter that imports ``module`` and prints the I/O libraries then loaded."""
    code = f"import sys, {module}; print(' '.join(m for m in {IO_LIBRARIES!r} if m in sys.modules))"
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )


def loaded_alone(module: str) -> list[str]:
    return probe(module).communicate()[0].split()


def core_modules() -> list[str]:
    return sorted(name for name in modules() if within(name, CORE))


def test_importing_a_core_module_alone_loads_no_io_library() -> None:
    """Each module of the core, and ``events`` and ``errors``, imported alone in a fresh
    interpreter, loads none of aiohttp, anyio, sqlite3, psycopg, structlog."""
    names = [*core_modules(), *PURE]
    assert len(names) > 20
    probes = {name: probe(name) for name in names}  # at once: each takes a second alone
    loaded = {name: child.communicate()[0].split() for name, child in probes.items()}
    assert all(child.returncode == 0 for child in probes.values())
    assert {name: libs for name, libs in loaded.items() if libs} == {}


def outside_the_core(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each core module's imports of anything but the core, ``events`` and ``errors``."""
    found = {
        name: sorted(d for d in deps if not within(d, CORE) and d not in PURE)
        for name, deps in edges.items()
        if within(name, CORE)
    }
    return {name: deps for name, deps in found.items() if deps}


def test_the_core_imports_only_itself_events_and_errors() -> None:
    assert outside_the_core(graph()) == {}


def log_into_runtime(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    found = {
        name: sorted(d for d in deps if within(d, "condensate.runtime"))
        for name, deps in edges.items()
        if within(name, "condensate.eventlog")
    }
    return {name: deps for name, deps in found.items() if deps}


def test_the_event_log_never_imports_the_runtime() -> None:
    assert log_into_runtime(graph()) == {}


def past_the_root(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Modules of ``condensate`` other than the composition root (and the edge itself, and
    test support) that import the HTTP edge or an engine."""
    found = {
        name: sorted(d for d in deps if within(d, EDGE) or within(d, "adapters"))
        for name, deps in edges.items()
        if within(name, "condensate")
        and name != COMPOSITION_ROOT
        and not within(name, EDGE)
        and not within(name, TEST_SUPPORT)
    }
    return {name: deps for name, deps in found.items() if deps}


def test_only_the_composition_root_imports_the_http_edge_and_the_engines() -> None:
    assert past_the_root(graph()) == {}


def test_the_top_level_holds_at_most_twelve_modules() -> None:
    top = sorted(p.name for p in (ROOT / "condensate").glob("*.py"))
    assert len(top) <= TOP_LEVEL_MODULES, top


def test_every_layer_says_what_it_is() -> None:
    """Each package of ``condensate`` and ``adapters`` opens with a docstring of its own."""
    packages = sorted(
        path.parent.relative_to(ROOT)
        for package in PACKAGES
        for path in (ROOT / package).rglob("__init__.py")
    )
    bare = [
        str(package)
        for package in packages
        if not ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
        or "TODO" in (ROOT / package / "__init__.py").read_text()
    ]
    assert len(packages) > 10
    assert bare == []


def test_the_layer_checks_see_a_crossing() -> None:
    """The checks can fail: a core module importing the runtime is found, the event log
    importing the runtime is, a module other than the root importing the HTTP edge is, and
    an I/O library loaded by an import is."""
    assert outside_the_core({"condensate.core.x": {"condensate.runtime", "condensate.events"}}) == {
        "condensate.core.x": ["condensate.runtime"]
    }
    assert log_into_runtime({"condensate.eventlog.x": {"condensate.runtime.thread"}}) == {
        "condensate.eventlog.x": ["condensate.runtime.thread"]
    }
    assert past_the_root(
        {
            "condensate.gateway.proxy": {"condensate.http.edge"},
            "condensate.app": {"condensate.http.server", "adapters.native"},
        }
    ) == {"condensate.gateway.proxy": ["condensate.http.edge"]}
    assert "aiohttp" in loaded_alone("condensate.http.edge")
