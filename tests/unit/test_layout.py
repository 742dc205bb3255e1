"""The layout holds its lines: no import runs in a circle (type-only imports included), the
core never imports the engines (``adapters``; it finds them through their entry points), and
the core names no engine: what it knows of one, the engine's package declares."""

from __future__ import annotations

import ast
from pathlib import Path

from condensate.engine.registry import installed

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("condensate", "adapters")
TEST_SUPPORT = "condensate.testing"
"""Fakes and builders for tests (a thread builder's default engine): not the core."""


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
