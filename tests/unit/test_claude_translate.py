"""Claude Code stream-json lines as log events (``adapters.claude_code._translate``): pure, on
the line shapes captured from claude 2.1.332 (cli-protocols.md §2.3)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.claude_code._translate import Replies, api_retry, top_level, unprompted
from condensate.events import AssistantMessage, Event, ModelUsage, ToolResult

AT = datetime(2026, 11, 30, 11, 31, 50, tzinfo=UTC)
SESSION = "307a180a-6c1e-4be5-9d51-0f3c1d3f0b7e"
USAGE = {
    "input_tokens": 3,
    "cache_creation_input_tokens": 12523,
    "cache_read_input_tokens": 0,
    "output_tokens": 1,
}
AGENT_CALL = "toolu_01agentcall0000000000"
"""The head's ``Agent`` call whose subagent the ``parent_tool_use_id`` lines belong to."""


def now() -> datetime:
    return AT


def assistant(
    block: dict[str, Any],
    *,
    message_id: str = "msg_5df01",
    parent: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """An ``assistant`` line: one content block, the call's usage snapshot at message_start."""
    return {
        "type": "assistant",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-5-5",
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(usage or USAGE),
            "context_management": None,
        },
        "parent_tool_use_id": parent,
        "session_id": SESSION,
        "uuid": f"uuid-{message_id}-{block['type']}",
        "timestamp": "2026-11-30T11:31:50.0Z",
        "request_id": "req_011",
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def tool_result(
    call_id: str, content: Any, *, is_error: bool = False, parent: str | None = None
) -> dict[str, Any]:
    """A ``user`` line with one ``tool_result``, as the CLI prints it after running the tool."""
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {
                    "tool_use_id": call_id,
                    "type": "tool_result",
                    "content": content,
                    "is_error": is_error,
                }
            ],
        },
        "parent_tool_use_id": parent,
        "session_id": SESSION,
        "uuid": "a1dd074c-0000",
        "timestamp": "2026-11-30T11:31:51.0Z",
        "tool_use_result": {"stdout": "hi", "stderr": "", "interrupted": False},
    }


def feed(replies: Replies, *lines: dict[str, Any]) -> list[Event]:
    """Every event the lines give, the last reply flushed as a turn's ``result`` does."""
    events: list[Event] = []
    for line in lines:
        if line["type"] == "assistant":
            events += replies.assistant_line(line, now)
        else:
            events += replies.user_line(line, now)
    return events + (replies.flush(now) or [])


def call_and_result(
    call_id: str, name: str, arguments: dict[str, Any], output: Any, *, is_error: bool = False
) -> list[Event]:
    """The events of a top-level reply with one call, then that call's result."""
    return feed(
        Replies(),
        assistant(tool_use(call_id, name, arguments)),
        tool_result(call_id, output, is_error=is_error),
    )


def results(events: list[Event]) -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult)]


def test_a_line_without_a_parent_call_is_top_level() -> None:
    """A line whose ``parent_tool_use_id`` is null is the head's own."""
    assert top_level(assistant(text("hi")))


def test_a_line_with_a_parent_call_is_a_subagents() -> None:
    """A line whose ``parent_tool_use_id`` names a call belongs to that call's subagent."""
    assert not top_level(assistant(text("hi"), parent=AGENT_CALL))


def test_a_subagents_assistant_lines_give_no_events() -> None:
    """A subagent's reply lines, its tool call included, log no reply and no usage."""
    events = feed(
        Replies(),
        assistant(text("Looking."), message_id="msg_sub1", parent=AGENT_CALL),
        assistant(
            tool_use("toolu_sub1", "Bash", {"command": "ls"}),
            message_id="msg_sub1",
            parent=AGENT_CALL,
        ),
    )
    assert events == []


def test_a_subagents_tool_result_gives_no_event() -> None:
    """A subagent's tool result is not logged, even when its call id matches a logged call."""
    replies = Replies()
    feed(replies, assistant(tool_use("toolu_1", "Bash", {"command": "ls"})))
    assert replies.user_line(tool_result("toolu_1", "a.txt", parent=AGENT_CALL), now) == []
    assert "toolu_1" in replies.open_calls


def test_subagent_lines_inside_a_reply_do_not_split_it() -> None:
    """A subagent's line between two lines of one top-level reply neither flushes nor joins it."""
    replies = Replies()
    events = feed(
        replies,
        assistant(text("Delegating.")),
        assistant(text("sub text"), message_id="msg_sub1", parent=AGENT_CALL),
        assistant(tool_use(AGENT_CALL, "Agent", {"prompt": "look"})),
    )
    replies_logged = [e for e in events if isinstance(e, AssistantMessage)]
    assert [(r.text, [c.name for c in r.tool_calls]) for r in replies_logged] == [
        ("Delegating.", ["Agent"])
    ]


def test_a_subagents_usage_is_not_counted_against_the_head() -> None:
    """Only the head's calls give ``model.usage``; the subagent's, in between, give none."""
    events = feed(
        Replies(),
        assistant(tool_use(AGENT_CALL, "Agent", {"prompt": "look"}), message_id="msg_head1"),
        assistant(
            text("found it"),
            message_id="msg_sub1",
            parent=AGENT_CALL,
            usage={**USAGE, "input_tokens": 90_000},
        ),
        tool_result(AGENT_CALL, [text("found it")]),
        assistant(text("Done."), message_id="msg_head2"),
    )
    usage = [e for e in events if isinstance(e, ModelUsage)]
    assert [u.message_id for u in usage] == ["msg_head1", "msg_head2"]


def test_the_agent_calls_own_result_is_top_level() -> None:
    """The result of the head's ``Agent`` call is the head's, and is logged."""
    events = call_and_result(AGENT_CALL, "Agent", {"prompt": "look"}, [text("found it")])
    assert [(r.tool, r.output) for r in results(events)] == [("Agent", "found it")]


def test_a_top_level_reply_gives_usage_then_the_message() -> None:
    """A top-level reply gives its ``model.usage`` and then its ``message.assistant``."""
    events = feed(Replies(), assistant(text("Running the command.")))
    assert [type(e) for e in events] == [ModelUsage, AssistantMessage]


def test_usage_is_read_from_the_message_start_snapshot() -> None:
    """The usage event carries the line's input, cache and output tokens and its model."""
    usage = feed(Replies(), assistant(text("hi")))[0]
    assert isinstance(usage, ModelUsage)
    assert (usage.input, usage.cache_write, usage.cache_read, usage.output) == (3, 12523, 0, 1)
    assert (usage.model, usage.message_id) == ("claude-opus-5-5", "msg_5df01")


def test_one_reply_over_several_lines_is_one_message_with_one_usage() -> None:
    """The lines of one message id (one per content block) give one usage and one reply."""
    events = feed(
        Replies(),
        assistant(text("Running the command.")),
        assistant(tool_use("toolu_5df6", "Bash", {"command": "echo hi"})),
    )
    assert [type(e) for e in events] == [ModelUsage, AssistantMessage]
    reply = events[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "Running the command."
    assert [c.id for c in reply.tool_calls] == ["toolu_5df6"]


def test_usage_is_logged_once_per_message_id() -> None:
    """A message id seen again after a flush logs its reply but not its usage again."""
    replies = Replies()
    first = feed(replies, assistant(text("part one")))
    again = feed(replies, assistant(text("part two")))
    assert [type(e) for e in first] == [ModelUsage, AssistantMessage]
    assert [type(e) for e in again] == [AssistantMessage]


def test_a_new_message_id_flushes_the_previous_reply() -> None:
    """The first line of the next call gives the previous reply's events."""
    replies = Replies()
    assert replies.assistant_line(assistant(text("one"), message_id="msg_a"), now) == []
    events = replies.assistant_line(assistant(text("two"), message_id="msg_b"), now)
    assert [(type(e), getattr(e, "message_id", None)) for e in events] == [
        (ModelUsage, "msg_a"),
        (AssistantMessage, "msg_a"),
    ]


def test_a_tool_result_follows_its_reply() -> None:
    """A tool result line flushes its call's reply first, so the result comes after it."""
    events = call_and_result("toolu_1", "Bash", {"command": "echo hi"}, "hi")
    assert [type(e) for e in events] == [ModelUsage, AssistantMessage, ToolResult]


def test_a_bash_result_is_named_by_its_command() -> None:
    """A ``Bash`` result's argument is the command it ran, and its output the tool's text."""
    (result,) = results(call_and_result("toolu_1", "Bash", {"command": "echo hi"}, "hi"))
    assert (result.call_id, result.tool, result.argument, result.output) == (
        "toolu_1",
        "Bash",
        "echo hi",
        "hi",
    )


def test_a_file_result_is_named_by_its_path() -> None:
    """A ``Read`` result's argument is the file path it read."""
    (result,) = results(
        call_and_result("toolu_2", "Read", {"file_path": "/work/a.py"}, "1\tprint()")
    )
    assert result.argument == "/work/a.py"


def test_a_search_result_is_named_by_its_pattern() -> None:
    """A ``Grep`` result's argument is the pattern it searched for."""
    (result,) = results(call_and_result("toolu_3", "Grep", {"pattern": "TODO"}, "a.py:3"))
    assert result.argument == "TODO"


def test_an_error_result_keeps_its_error_flag() -> None:
    """A result the CLI marks ``is_error`` is logged as an error."""
    (result,) = results(
        call_and_result("toolu_4", "Bash", {"command": "false"}, "Exit code 1", is_error=True)
    )
    assert result.is_error


def test_a_successful_result_is_not_an_error() -> None:
    """A result with ``is_error: false`` is logged as a success."""
    (result,) = results(call_and_result("toolu_5", "Bash", {"command": "true"}, ""))
    assert not result.is_error


def test_a_result_of_an_unlogged_call_is_dropped() -> None:
    """A tool result whose call was never logged (a resumed session's) gives no result."""
    assert results(feed(Replies(), tool_result("toolu_unknown", "x"))) == []


def test_a_human_message_line_gives_nothing() -> None:
    """A top-level user line with plain text content (no tool result) gives no event."""
    line = {
        "type": "user",
        "message": {"role": "user", "content": [text("[Request interrupted by user]")]},
        "parent_tool_use_id": None,
        "session_id": SESSION,
    }
    assert Replies().user_line(line, now) == []


def test_a_synthetic_reply_is_not_logged() -> None:
    """An API error shown as a ``<synthetic>`` reply gives no usage and no message."""
    line = assistant(text("API Error: 500"))
    line["message"]["model"] = "<synthetic>"
    assert feed(Replies(), line) == []


def result_line(**extra: Any) -> dict[str, Any]:
    """A ``result`` line as claude 2.1.332 prints it at the end of a turn (trimmed)."""
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": 1,
        "result": "HEAD after-notification",
        "stop_reason": "end_turn",
        "terminal_reason": "completed",
        "api_error_status": None,
        "session_id": SESSION,
        "queued_turn_count": 0,
        "result_index": 1,
        **extra,
    }


def test_the_result_of_a_sent_user_line_is_prompted() -> None:
    """A result without ``origin`` ends the turn a user line started."""
    assert not unprompted(result_line())


def test_a_result_of_human_origin_is_prompted() -> None:
    """A result whose origin is ``human`` ends the turn a user line started."""
    assert not unprompted(result_line(origin={"kind": "human"}))


def test_the_result_of_a_task_notification_turn_is_unprompted() -> None:
    """The result of the turn the CLI runs when a background agent finishes is not ours."""
    origin = {"kind": "task-notification", "producer": "session-task", "runId": "0mx3bn3by-45"}
    assert unprompted(result_line(origin=origin))


def test_an_api_retry_line_names_attempt_status_and_delay():
    """claude 2.1.332's api_retry line becomes a detail naming the attempt, the status, the
    error and the delay, and gives the status."""
    line = {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 2,
        "max_retries": 10,
        "retry_delay_ms": 1128,
        "error_status": 401,
        "error": "authentication_failed",
    }
    detail, status = api_retry(line)
    assert status == 401
    assert "attempt 2 of 10" in detail
    assert "401 authentication_failed" in detail
    assert "1.1 s" in detail


def test_an_api_retry_of_a_connection_error_has_no_status():
    """A retry without an HTTP status (the connection failed) gives None."""
    _, status = api_retry({"type": "system", "subtype": "api_retry", "attempt": 1})
    assert status is None
