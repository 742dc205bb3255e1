"""Codex app-server items and token updates as log events (``adapters.codex._translate``):
pure, on the item shapes captured from codex 0.171.0 (cli-protocols.md §3.3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.codex._translate import (
    Responses,
    call_of,
    compacted,
    http_status,
    is_overflow,
    retry_detail,
    usage_of,
)
from condensate.events import (
    AskAnswered,
    AskOpened,
    AssistantMessage,
    EngineNotice,
    Event,
    ModelUsage,
    ToolResult,
)

AT = datetime(2026, 11, 30, 11, 37, 19, tzinfo=UTC)


def now() -> datetime:
    return AT


def command(ident: str, cmd: str, *, done: bool = False, code: int = 0) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "commandExecution",
        "id": ident,
        "command": f"/bin/bash -lc '{cmd}'",
        "cwd": "/work",
        "status": "completed" if done else "inProgress",
        "commandActions": [{"type": "unknown", "command": cmd}],
        "aggregatedOutput": None,
        "exitCode": None,
    }
    if done:
        item.update(aggregatedOutput=f"output of {cmd}\n", exitCode=code)
    return item


def message(text: str) -> dict[str, Any]:
    return {"type": "agentMessage", "id": "msg_b5fd", "text": text}


def token_update(last_input: int, cached: int = 0, window: int = 258_400) -> dict[str, Any]:
    last = {
        "totalTokens": last_input + 49,
        "inputTokens": last_input,
        "cachedInputTokens": cached,
        "cacheWriteInputTokens": 0,
        "outputTokens": 49,
        "reasoningOutputTokens": 0,
    }
    return {
        "threadId": "t",
        "turnId": "u",
        "tokenUsage": {"last": last, "modelContextWindow": window},
    }


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def test_a_count_gives_usage_then_the_reply_then_its_results():
    """A call that ran before its response's count is logged at the count: usage first, then
    the reply with the call, then the result (the order the meter and the pairs need)."""
    responses = Responses()
    assert responses.item_completed(message("Running it."), now) == []
    responses.item_started(command("call_1", "echo hi"))
    assert responses.item_completed(command("call_1", "echo hi", done=True), now) == []
    usage = usage_of(token_update(9_604))
    assert usage is not None
    events = responses.counted(usage, "gpt-5.5", now)

    assert kinds(events) == ["model.usage", "message.assistant", "tool.result"]
    reply = events[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "Running it."
    assert [c.name for c in reply.tool_calls] == ["shell"]
    assert reply.tool_calls[0].arguments["command"] == "echo hi"  # without Codex's bash -lc
    result = events[2]
    assert isinstance(result, ToolResult)
    assert result.call_id == "call_1"
    assert result.argument == "echo hi"
    assert result.output == "output of echo hi\n"


def test_a_result_after_the_count_is_given_when_it_completes():
    """A command still running at its response's count is logged with the reply; its result
    comes when it completes, after the call."""
    responses = Responses()
    responses.item_started(command("call_2", "sleep 5"))
    usage = usage_of(token_update(9_700))
    assert usage is not None
    assert kinds(responses.counted(usage, "gpt-5.5", now)) == ["model.usage", "message.assistant"]
    assert responses.running == {"call_2"}

    events = responses.item_completed(command("call_2", "sleep 5", done=True), now)
    assert kinds(events) == ["tool.result"]
    assert responses.running == set()


def test_usage_splits_cached_input_out():
    """``inputTokens`` counts cached tokens too; the log keeps them apart, summing to it."""
    usage = usage_of(token_update(9_718, cached=9_604))
    assert usage is not None
    (counted,) = Responses().counted(usage, "gpt-5.5", now)
    assert isinstance(counted, ModelUsage)
    assert (counted.input, counted.cache_read) == (114, 9_604)
    assert counted.prompt == 9_718


def test_the_synthetic_window_full_update_counts_nothing():
    """After an overflow Codex sends a count with no input that marks the window full; it is
    not a request's count and gives no usage."""
    synthetic = token_update(0)
    synthetic["tokenUsage"]["total"] = {"totalTokens": 258_400, "inputTokens": 0}
    assert usage_of(synthetic) is None


def test_a_failed_command_is_an_error_with_its_exit_code():
    """A non-zero exit makes the result an error and names the code."""
    responses = Responses()
    responses.item_started(command("call_3", "pytest"))
    responses.item_completed(command("call_3", "pytest", done=True, code=1), now)
    usage = usage_of(token_update(10_000))
    assert usage is not None
    result = responses.counted(usage, "gpt-5.5", now)[-1]
    assert isinstance(result, ToolResult)
    assert result.is_error
    assert result.output.endswith("[exit code 1]")


def test_an_interrupted_turn_closes_every_open_call():
    """Calls logged or gathered without a result get an error result saying they may have run
    in part, so every call in the log has its result."""
    responses = Responses()
    responses.item_started(command("call_4", "make"))
    usage = usage_of(token_update(10_000))
    assert usage is not None
    responses.counted(usage, "gpt-5.5", now)
    responses.item_started(command("call_5", "make test"))

    events = responses.interrupted("the turn was interrupted", now)
    assert kinds(events) == ["message.assistant", "tool.result", "tool.result"]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert {r.call_id for r in results} == {"call_4", "call_5"}
    assert all(r.is_error and "may have run in part" in r.output for r in results)
    assert responses.interrupted("again", now) == []


def test_a_patch_names_its_files():
    """A fileChange item is an apply_patch call naming its paths, with the diff kept."""
    item = {
        "type": "fileChange",
        "id": "call_6",
        "status": "completed",
        "changes": [{"path": "src/app.py", "kind": {"type": "update"}, "diff": "-a\n+b"}],
    }
    call = call_of(item)
    assert call is not None
    assert call.name == "apply_patch"
    assert call.arguments["path"] == "src/app.py"
    assert "+b" in call.arguments["patch"]


def test_an_mcp_call_is_named_by_server_and_tool():
    """A head's call to Condensate's MCP server keeps the server and tool in its name, and its
    result is the text the server returned."""
    responses = Responses()
    item = {
        "type": "mcpToolCall",
        "id": "call_7",
        "server": "condensate",
        "tool": "context_usage",
        "status": "completed",
        "arguments": {},
        "result": {"content": [{"type": "text", "text": '{"used": 10025}'}]},
        "error": None,
    }
    responses.item_started({**item, "status": "inProgress", "result": None})
    responses.item_completed(item, now)
    usage = usage_of(token_update(10_025))
    assert usage is not None
    events = responses.counted(usage, "gpt-5.5", now)
    reply, result = events[1], events[2]
    assert isinstance(reply, AssistantMessage)
    assert reply.tool_calls[0].name == "mcp__condensate__context_usage"
    assert isinstance(result, ToolResult)
    assert result.output == '{"used": 10025}'
    assert not result.is_error


def test_only_a_context_window_error_is_an_overflow():
    """``contextWindowExceeded`` is a refusal; other turn errors are not."""
    assert is_overflow({"message": "ran out of room", "codexErrorInfo": "contextWindowExceeded"})
    assert not is_overflow({"message": "boom", "codexErrorInfo": "internalServerError"})
    assert not is_overflow(None)


def test_codex_compacting_on_its_own_is_noted_and_drops_the_open_ask():
    """A contextCompaction item gives a notice; an ask still open is dropped by the runtime."""
    ask = AskOpened(at=AT, ask_id="ask-1", deadline=AT + timedelta(minutes=3), used=1, line=1)
    events = compacted(ask, "thread-9", now)
    notice, dropped = events
    assert isinstance(notice, EngineNotice)
    assert notice.notice == "codex-compacted"
    assert notice.session_id == "thread-9"
    assert isinstance(dropped, AskAnswered)
    assert (dropped.ask_id, dropped.by, dropped.mode) == ("ask-1", "runtime", "decline")
    assert kinds(compacted(None, "thread-9", now)) == ["engine.notice"]


RETRYING_401: dict[str, Any] = {
    "error": {
        "message": "Reconnecting... 1/5",
        "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": 401}},
        "additionalDetails": "unexpected status 401 Unauthorized: Incorrect API key provided.",
    },
    "willRetry": True,
}


def test_a_retrying_error_names_its_status_and_details():
    """Codex 0.171.0's "Reconnecting" error is a retry detail naming the status and why."""
    detail = retry_detail(RETRYING_401)
    assert detail is not None
    assert "Reconnecting... 1/5" in detail
    assert "HTTP 401" in detail
    assert "Incorrect API key" in detail
    assert http_status(RETRYING_401["error"]) == 401


def test_a_final_error_is_no_retry_and_still_names_its_status():
    """The error Codex gives up with is not a retry; its status is read from
    httpConnectionFailed; an error without one has none."""
    final: dict[str, Any] = {
        "error": {
            "message": "401",
            "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 403}},
        },
        "willRetry": False,
    }
    assert retry_detail(final) is None
    assert http_status(final["error"]) == 403
    assert http_status({"codexErrorInfo": "contextWindowExceeded"}) is None
