"""Where the native loop's requests mark the provider's prompt cache, and what a one-off call
leaves unmarked. Anthropic caches only prefixes ending at a ``cache_control`` breakpoint, at most
4 a request, and finds an earlier one only up to 20 blocks back
(platform.claude.com/docs/en/build-with-claude/prompt-caching); OpenAI caches automatically,
keyed by ``prompt_cache_key`` (developers.openai.com/api/docs/guides/prompt-caching)."""

from __future__ import annotations

from typing import Any

from condensate.core.messages import Message, Request, Text, ToolOutput, ToolUse
from condensate.core.prompt import shared_through
from condensate.providers import anthropic
from condensate.providers.openai import ChatClient, ResponsesClient


def _steps(count: int, calls: int = 1) -> tuple[Message, ...]:
    """A brief, then ``count`` steps of ``calls`` parallel calls and their results."""
    messages = [Message.user("brief")]
    for step in range(count):
        ids = [f"c{step}x{i}" for i in range(calls)]
        messages.append(Message("assistant", tuple(ToolUse(i, "read", {}) for i in ids)))
        messages.append(Message("user", tuple(ToolOutput(i, "text " * 50) for i in ids)))
    return tuple(messages)


def _marked(body: dict[str, Any]) -> list[str]:
    """Where the body's breakpoints are: ``system`` or ``messages.i.content.j``."""
    found = [
        "system"
        for block in body.get("system") or []
        if isinstance(block, dict) and "cache_control" in block
    ]
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            if "cache_control" in block:
                found.append(f"messages.{i}.content.{j}")
    return found


def test_a_native_request_marks_its_system_its_end_and_the_last_requests_end():
    """Three breakpoints: the system prompt (with the tools before it), the end of this
    request, and the end of the request before it (the user message before the last reply),
    which is found again exactly however many blocks the reply added."""
    request = Request("claude-opus-5-5", _steps(3, calls=15), system="S")
    body = anthropic.request_body(request)
    last, before = len(body["messages"]) - 1, len(body["messages"]) - 3
    assert _marked(body) == [
        "system",
        f"messages.{before}.content.14",
        f"messages.{last}.content.14",
    ]


def test_a_notice_comes_after_the_last_breakpoint():
    """A request-scoped notice is the last block, unmarked: the prefix the next request finds
    cached ends before it."""
    body = anthropic.request_body(
        Request("claude-opus-5-5", _steps(1), system="S", notice="[Condensate] URGENT")
    )
    *blocks, note = body["messages"][-1]["content"]
    assert note == {"type": "text", "text": "[Condensate] URGENT"}
    assert "cache_control" in blocks[-1]


def test_a_one_off_call_marks_nothing():
    """A curator's or an emergency summary's call is not cached: a write costs 1.25 times
    the input and nothing would read it back."""
    body = anthropic.request_body(
        Request(
            "claude-haiku-5-5", (Message.user("the conversation so far"),), system="S", cached=False
        )
    )
    assert _marked(body) == []
    assert body["system"] == "S"


def test_an_openai_request_names_its_cache_key_and_ends_with_its_notice():
    """The Responses request carries the thread's ``prompt_cache_key``; a notice is the last
    input item, as is a Chat request's."""
    request = Request(
        "gpt-5.6-sol",
        (Message.user("brief"), Message("assistant", (Text("ok"),))),
        notice="NOTE",
        cache_key="t-1",
    )
    body = ResponsesClient.request_body(request)
    assert body["prompt_cache_key"] == "t-1"
    assert body["input"][-1]["content"] == [{"type": "input_text", "text": "NOTE"}]
    assert ChatClient.request_body(request)["messages"][-1] == {"role": "user", "content": "NOTE"}


def test_after_a_change_in_its_middle_the_request_marks_where_the_last_one_still_holds():
    """A window replaced an old result: the request marks the last message it shares with the
    one before it, so that the provider reads the cache up to there instead of only the system
    prompt (its lookback from this request's end reaches 20 blocks)."""
    before = list(_steps(30))
    now = list(before)
    now[20] = Message("user", (ToolOutput("c9x0", "[receipt]"),))
    through = shared_through(before, now)
    assert through == 19
    body = anthropic.request_body(
        Request("claude-opus-5-5", tuple(now), system="S", cached_through=through)
    )
    assert _marked(body) == [
        "system",
        "messages.19.content.0",
        f"messages.{len(now) - 1}.content.0",
    ]


def test_a_request_that_only_grew_marks_the_last_ones_end():
    """The view only grew: the shared part ends at the last request's last message."""
    before = list(_steps(3))
    now = list(_steps(4))
    assert shared_through(before, now) == len(before) - 1
    assert shared_through([], now) is None
