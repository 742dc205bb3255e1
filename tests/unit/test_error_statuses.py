"""Error codes become HTTP statuses in the HTTP edge only: a refusal carries a code and a
sentence, and one table in the edge's middleware gives each code raised anywhere its status."""

from __future__ import annotations

import ast
from pathlib import Path

from condensate.http.middleware import STATUS, status_of

ROOT = Path(__file__).resolve().parents[2]


def refusal_codes() -> set[str]:
    """Every code a ``Refused(code="...")`` spells in the daemon and the engines."""
    codes: set[str] = set()
    for package in ("condensate", "adapters"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                for keyword in node.keywords if name == "Refused" else ():
                    if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                        codes.add(str(keyword.value.value))
    return codes


def test_every_refusal_code_has_its_status_in_the_edge_table() -> None:
    codes = refusal_codes()
    assert {"unknown-thread", "unsupported-tools", "thread-owned-elsewhere"} <= codes
    assert sorted(codes - set(STATUS)) == []


def test_the_table_keeps_the_documented_statuses() -> None:
    """The statuses the HTTP API documents for the commonest refusals."""
    assert status_of("unknown-thread") == 404
    assert status_of("thread-owned-elsewhere") == 409
    assert status_of("unsupported-permissions") == 422
    assert status_of("message-too-large") == 413


def test_a_code_the_table_does_not_know_is_a_bad_request() -> None:
    """An out-of-tree engine's own refusal code answers 400."""
    assert status_of("echo-refused") == 400
