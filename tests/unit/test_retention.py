"""Retention checks: what a policy must not lose, judged on the final view and the log."""

from __future__ import annotations

from condensate.core.messages import Message, Text, ToolOutput, ToolUse
from condensate.core.retention import CallRecord, check, files_of, pair_problems
from condensate.events import ToolResult, Window, WindowTrigger
from condensate.testing.threads import ThreadBuilder

TRIGGER = WindowTrigger(used=0, line=0, ceiling=0, window=0, freed=0, reason="test")


def _window(b: ThreadBuilder, kind: str, **fields: object) -> None:
    b.add(Window(at=b.tick(), window_kind=kind, cut=b.seq, trigger=TRIGGER, **fields))


def _thread() -> ThreadBuilder:
    b = ThreadBuilder()
    b.user("the brief")
    b.turn("keep the CSV header as it is")
    b.call("read", "src/app.py", 1_000, output="def main(): ...")
    b.call("shell", "pytest -q", 800, error=True, output="E   AssertionError: 1 == 2")
    return b


def test_everything_in_view_passes() -> None:
    """A view that still holds every message, failure and file passes every check."""
    b = _thread()
    result = check(b.log, b.view, set(), [CallRecord(5_000, 48_000)])
    assert result.passed, result.to_json()
    assert result.to_json()["human"]["routes"]["in_view"] == 2


def test_a_drop_loses_human_messages_and_errors() -> None:
    """A drop without a summary loses the steer and the failure; the brief survives."""
    b = _thread()
    b.turn("next steer")
    _window(b, "drop", keep_from=b.seq, forced=True, author="system")
    result = check(b.log, b.view, set(), [])
    data = result.to_json()
    assert not result.passed
    assert data["human"]["failed"] == 1
    assert "keep the CSV header" in data["human"]["examples"][0]
    assert data["errors"]["failed"] == 1
    assert data["files"]["failed"] == 1


def test_summary_input_counts_as_kept() -> None:
    """What was in a summary's input passes, even when the summary text omits it."""
    b = _thread()
    replaced = {s.seq for s in b.log[1:]}
    b.turn("next steer")
    _window(b, "summary", keep_from=b.seq, summary="Files: src/app.py", author="curator")
    data = check(b.log, b.view, replaced, []).to_json()
    assert data["passed"], data
    assert data["human"]["routes"]["in_summary_input"] == 1
    assert data["errors"]["routes"]["in_summary_input"] == 1


def test_a_collapsed_failure_loses_its_error_text() -> None:
    """A failed result a cheap tier turned into a receipt keeps the fact, not the text."""
    b = _thread()
    failed = b.log[-1].seq
    _window(b, "collapse", cleared=(failed,))
    data = check(b.log, b.view, set(), []).to_json()
    assert data["errors"]["failed"] == 1
    assert data["files"]["passed"]  # the read is still in the view


def test_a_receipt_names_its_file() -> None:
    """A cleared read's receipt still names the file."""
    b = _thread()
    read = b.log[-3].seq
    _window(b, "microcompact", cleared=(read,))
    data = check(b.log, b.view, set(), []).to_json()
    assert data["files"]["passed"]


def test_pairs_and_ceiling_are_judged_per_call() -> None:
    """An orphan result, an unanswered call and a refused prompt each fail their check."""
    orphan = [Message("user", (ToolOutput("x", "out"),))]
    unanswered = [Message("user", (Text("hi"),)), Message("assistant", (ToolUse("y", "read", {}),))]
    assert pair_problems(orphan) == ["message 0: tool_result x has no call"]
    assert pair_problems(unanswered) == ["message 1: tool_use y has no result"]
    b = _thread()
    calls = [
        CallRecord(1_000, 48_000, pair_problems=tuple(pair_problems(orphan))),
        CallRecord(61_000, 60_000, refused=True),
    ]
    data = check(b.log, b.view, set(), calls).to_json()
    assert data["pairs"]["failed"] == 1
    assert data["ceiling"]["failed"] == 1


def test_patch_files_are_named() -> None:
    """An apply_patch result touches the files its patch names."""
    b = ThreadBuilder()
    _, stored = b.call("apply_patch", "*** Update File: a.py\n*** Add File: b.py", 50)
    assert isinstance(stored.event, ToolResult)
    assert files_of(stored.event) == ["a.py", "b.py"]
