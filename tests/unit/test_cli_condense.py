"""A CLI agent's ``condense`` settled when its CLI logs the result (``adapters._condense``):
the same rule as the native loop's, applied to what the CLI logs."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters._condense import settled
from condensate.core import reset
from condensate.core.projector import Projection
from condensate.engine import ThreadSpec
from condensate.events import (
    AssistantMessage,
    ResetCommitted,
    ResetPolicy,
    ResetRequested,
    ToolCall,
    ToolResult,
)

AT = datetime(2026, 12, 1, tzinfo=UTC)
NAME = "mcp__condensate__condense"
CALL = ToolCall(id="c1", name=NAME, arguments={"message_to_future_self": "see NOTES.md"})
SHELL = ToolCall(id="c0", name="Bash", arguments={"command": "ls"})


def spec(*, resets: bool = True) -> ThreadSpec:
    policy = ResetPolicy() if resets else None
    return ThreadSpec(engine="claude", model="anthropic:m", cwd="/w", brief="b", reset=policy)


def result(*, is_error: bool = False) -> ToolResult:
    return ToolResult(at=AT, call_id="c1", tool=NAME, output="from the MCP", is_error=is_error)


def test_a_lone_condense_result_becomes_the_reset_batch() -> None:
    """The CLI's result is replaced by the request, the recovery result and the commit, with
    the boundary given."""
    reply = AssistantMessage(at=AT, text="", tool_calls=(CALL,))
    out = settled([reply, result()], Projection(), spec(), 7, AT)
    assert out[0] == reply
    assert [type(e) for e in out[1:]] == [ResetRequested, ToolResult, ResetCommitted]
    assert out[1] == ResetRequested(at=AT, call_id="c1", message="see NOTES.md", boundary=7)
    assert isinstance(out[2], ToolResult)
    assert out[2].output == reset.recovery("see NOTES.md")
    assert out[2].tool == NAME


def test_condense_beside_another_call_is_an_error_result() -> None:
    """The call's response is found in the batch: condense beside Bash resets nothing."""
    reply = AssistantMessage(at=AT, text="", tool_calls=(SHELL, CALL))
    (_, refused) = settled([reply, result()], Projection(), spec(), 7, AT)
    assert isinstance(refused, ToolResult)
    assert refused.is_error
    assert "only tool call" in refused.output


def test_a_refused_result_or_a_windowed_thread_is_left_as_logged() -> None:
    """A result the MCP server refused stays; on a thread that does not reset, nothing is
    settled."""
    reply = AssistantMessage(at=AT, text="", tool_calls=(CALL,))
    assert settled([reply, result(is_error=True)], Projection(), spec(), 7, AT)[1:] == [
        result(is_error=True)
    ]
    assert settled([reply, result()], Projection(), spec(resets=False), 7, AT)[1:] == [result()]
