"""The layout holds its lines: no import runs in a circle (type-only imports included), and
the core never imports the engines (``adapters``) but through the composition root that
starts the daemon."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("condensate", "adapters")
COMPOSITION_ROOTS = {"condensate.app"}
"""Where the daemon is put together: the one place in ``condensate`` that names the engines."""


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


def test_the_core_never_imports_the_engines() -> None:
    edges = graph()
    crossing = {
        name: sorted(d for d in deps if d.split(".")[0] == "adapters")
        for name, deps in edges.items()
        if name.split(".")[0] == "condensate" and name not in COMPOSITION_ROOTS
    }
    assert {name: deps for name, deps in crossing.items() if deps} == {}


def test_the_check_sees_a_circle_and_a_crossing() -> None:
    """The checks can fail: a circle of two modules is found, and so is the core naming an
    engine (the composition root aside)."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    edges = graph()
    assert "adapters" in {d.split(".")[0] for d in edges["condensate.app"]}
    assert any(d.startswith("condensate") for d in edges["adapters.native"])
