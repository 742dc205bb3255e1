"""The engine contract's public surface is exactly its ``__all__`` (httpx's
``tests/test_exported_members.py``): every public name the module defines is listed, every
listed name is there, and nothing it merely imports is offered as part of the contract."""

from __future__ import annotations

import ast
import inspect

from condensate import engine


def defined_names(source: str) -> set[str]:
    """The public names a module's own top-level statements bind (imports aside)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_every_public_name_the_contract_defines_is_in_all() -> None:
    defined = defined_names(inspect.getsource(engine))
    assert "EngineAdapter" in defined
    assert defined == set(engine.__all__)


def test_every_name_in_all_is_there() -> None:
    assert all(hasattr(engine, name) for name in engine.__all__)
    assert len(engine.__all__) == len(set(engine.__all__))


def test_the_surface_check_sees_a_name_left_out() -> None:
    """The check can fail: a public function, class or constant is found, an import and a
    private name are not."""
    source = "import os\nfrom x import y\nA = 1\n_B = 2\ndef f(): ...\nclass C: ...\n"
    assert defined_names(source) == {"A", "f", "C"}
