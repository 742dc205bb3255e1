"""The fake model server over real loopback HTTP: the Anthropic, Responses and Chat Completions
wire shapes, window refusals, scripted replies, the control API, the request
log, the ``python -m`` entry point and the threaded runner."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator
from http.client import HTTPConnection
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import (
    REAL_WINDOWS,
    Broken,
    Call,
    Cut,
    Fail,
    FakeModelServer,
    Html,
    Overflow,
    Raw,
    Reply,
    Slow,
    Stall,
    Text,
    ToolCalls,
    Unframed,
    Usage,
    reply_from_json,
    reply_to_json,
)
from tests.integration.fake_api import events, post, usage_sum, user

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-5.5"
SYSTEM = [{"type": "text", "text": "You are a careful coding agent. " * 20}]
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]
RESPONSES_CONTEXT = {
    "error": {
        "message": "Your input exceeds the context window of this model. "
        "Please adjust your input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=200_000) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def anthropic_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": CLAUDE,
        "max_tokens": 1024,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages,
        **extra,
    }


async def test_anthropic_refuses_over_the_window_with_the_real_body(http):
    """Past the window Anthropic answers 400 ``prompt is too long: N tokens > M maximum``."""
    async with FakeModelServer(window=100) as fake:
        status, body, response = await post(
            http, f"{fake.url}/v1/messages?beta=true", anthropic_body([user("x " * 300)])
        )
    counted = fake.requests[0].input_tokens
    assert status == 400
    assert body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {counted} tokens > 100 maximum",
        },
        "request_id": response.headers["request-id"],
    }
    assert re.fullmatch(r"req_\w+", body["request_id"])
    assert fake.requests[0].reply == "window"


async def test_responses_refuses_over_the_window_with_a_400(http):
    """Past the window the Responses API answers 400 ``context_length_exceeded``."""
    async with FakeModelServer(windows={GPT: 50}) as fake:
        body = {"model": GPT, "input": "word " * 200, "stream": True}
        status, error, _ = await post(http, f"{fake.url}/v1/responses", body)
    assert status == 400
    assert error == RESPONSES_CONTEXT


async def test_responses_can_refuse_inside_a_stream(http):
    """With ``responses_overflow="stream"`` a refusal is a 200 stream ending in response.failed."""
    async with FakeModelServer(window=50, responses_overflow="stream") as fake:
        body = {"model": GPT, "input": "word " * 200, "stream": True}
        status, text, _ = await post(http, f"{fake.url}/v1/responses", body)
    stream = events(text)
    assert status == 200
    assert [name for name, _ in stream] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
    failed = stream[-1][1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {
        "code": "context_length_exceeded",
        "message": RESPONSES_CONTEXT["error"]["message"],
    }
    assert [data["sequence_number"] for _, data in stream] == [0, 1, 2]


async def test_chat_refuses_over_the_window_with_the_classic_message(http):
    """Past the window Chat Completions answers 400 with the classic maximum-context message."""
    async with FakeModelServer(window=60) as fake:
        body = {"model": GPT, "messages": [{"role": "user", "content": "word " * 200}]}
        status, error, _ = await post(http, f"{fake.url}/v1/chat/completions", body)
    counted = fake.requests[0].input_tokens
    assert status == 400
    assert error == {
        "error": {
            "message": f"This model's maximum context length is 60 tokens. However, your "
            f"messages resulted in {counted} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


async def test_overflow_reply_forces_a_refusal_on_a_small_prompt(fake, http):
    """A queued ``Overflow`` refuses however small the prompt, on each API."""
    fake.queue(Overflow(), Overflow(mode="stream"), Overflow(tokens=999_999))
    _, anthropic, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("hi")]))
    status, text, _ = await post(
        http, f"{fake.url}/v1/responses", {"model": GPT, "input": "hi", "stream": True}
    )
    _, chat, _ = await post(
        http,
        f"{fake.url}/v1/chat/completions",
        {"model": GPT, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert anthropic["error"]["message"] == "prompt is too long: 200001 tokens > 200000 maximum"
    assert status == 200
    assert events(text)[-1][0] == "response.failed"
    assert "resulted in 999999 tokens" in chat["error"]["message"]
    assert [r.reply for r in fake.requests] == ["overflow"] * 3


async def test_a_window_refusal_leaves_the_queue_alone(fake, http):
    """A prompt refused for its size does not use up the queued reply."""
    fake.configure(window=50)
    fake.queue(Text("kept"))
    await post(http, f"{fake.url}/v1/messages", anthropic_body([user("long " * 100)]))
    fake.configure(window=None)
    _, reply, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("short")]))
    assert reply["content"][0]["text"] == "kept"


async def test_anthropic_default_reply_is_deterministic(fake, http):
    """Without a queued reply the fake answers ``FAKE reply #n: I read N chars.``."""
    status, reply, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("hi")]))
    assert status == 200
    assert re.fullmatch(r"FAKE reply #1: I read \d+ chars\.", reply["content"][0]["text"])
    assert reply["stop_reason"] == "end_turn"
    assert reply["type"] == "message"
    assert fake.requests[0].reply == "default:text"


async def test_anthropic_stream_has_the_accepted_event_sequence(fake, http):
    """A streamed thinking + text + tool-use reply follows the sequence Claude Code accepted."""
    fake.queue(ToolCalls([Call("Bash", {"command": "echo hi"})], text="Running.", thinking="Plan."))
    body = anthropic_body([user("go")], stream=True, thinking={"type": "enabled"})
    status, text, response = await post(http, f"{fake.url}/v1/messages?beta=true", body)
    stream = events(text)
    names = [name for name, _ in stream]
    block = ["content_block_start", "content_block_delta", "content_block_stop"]
    assert status == 200
    assert response.content_type == "text/event-stream"
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        *block,
        *block,
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in stream)
    start = stream[0][1]["message"]
    assert start["content"] == []
    assert start["stop_reason"] is None
    assert start["usage"]["output_tokens"] == 1
    assert set(start["usage"]) == {
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_creation",
        "output_tokens",
    }
    assert stream[2][1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert stream[3][1]["delta"] == {"type": "thinking_delta", "thinking": "Plan."}
    assert stream[4][1]["delta"]["type"] == "signature_delta"
    assert stream[7][1]["delta"] == {"type": "text_delta", "text": "Running."}
    tool = stream[9][1]["content_block"]
    assert tool["type"] == "tool_use"
    assert tool["name"] == "Bash"
    assert tool["input"] == {}
    assert json.loads(stream[10][1]["delta"]["partial_json"]) == {"command": "echo hi"}
    delta = stream[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] > 1


async def test_anthropic_json_reply_carries_thinking_and_tool_use(fake, http):
    """A non-streaming reply has thinking (with signature), text and tool_use blocks."""
    fake.queue(ToolCalls([Call("Bash", {"command": "ls"}, id="toolu_mine")], thinking="Hmm."))
    _, reply, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("go")]))
    thinking, tool = reply["content"]
    assert thinking["type"] == "thinking"
    assert thinking["thinking"] == "Hmm."
    assert thinking["signature"]
    assert tool == {
        "type": "tool_use",
        "id": "toolu_mine",
        "name": "Bash",
        "input": {"command": "ls"},
    }
    assert reply["stop_reason"] == "tool_use"


async def test_slow_stream_arrives_in_pieces(fake, http):
    """A ``Slow`` reply streams its text as several deltas spread over time."""
    fake.queue(Slow(Text("abcdefghij" * 3), chunk_delay=0.05, chunks=5))
    arrivals: list[float] = []
    body = anthropic_body([user("go")], stream=True)
    async with http.post(f"{fake.url}/v1/messages", json=body) as response:
        async for line in response.content:
            if b'"text_delta"' in line:
                arrivals.append(time.monotonic())
    assert len(arrivals) == 5
    assert arrivals[-1] - arrivals[0] >= 0.15


async def test_a_client_hanging_up_mid_stream_leaves_the_server_serving(fake, http):
    """A client that drops a slow stream halfway does not disturb later requests."""
    fake.queue(Slow(Text("abcdefghij" * 10), chunk_delay=0.05, chunks=10))
    body = anthropic_body([user("go")], stream=True)
    async with http.post(f"{fake.url}/v1/messages", json=body) as response:
        async for line in response.content:
            if b'"text_delta"' in line:
                break
        response.close()
    status, reply, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("hi")]))
    assert status == 200
    assert reply["content"][0]["text"].startswith("FAKE reply #2")


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (401, "authentication_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (529, "overloaded_error"),
    ],
)
async def test_anthropic_fail_uses_the_real_error_shape(fake, http, status, error_type):
    """A ``Fail`` answers the status with Anthropic's error body, request id and retry-after."""
    fake.queue(Fail(status, retry_after=7))
    code, body, response = await post(
        http, f"{fake.url}/v1/messages", anthropic_body([user("hi")], stream=True)
    )
    assert code == status
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert body["request_id"] == response.headers["request-id"]
    assert response.headers["retry-after"] == "7"
    assert fake.requests[0].status == status


async def test_usage_override_inflates_the_reported_usage(fake, http):
    """``Usage`` reports the given prompt and output tokens, split so the sum still holds."""
    fake.queue(Usage(Text("ok"), prompt_tokens=150_000, output_tokens=42))
    _, reply, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("hi")]))
    assert usage_sum(reply["usage"]) == 150_000
    assert reply["usage"]["output_tokens"] == 42
    assert fake.requests[0].input_tokens < 1_000
    assert fake.requests[0].reply == "usage:text"


async def test_system_messages_inside_messages_are_accepted(fake, http):
    """A ``role: "system"`` message inside ``messages`` is accepted, as Claude Code sends it."""
    messages = [user("hi"), {"role": "system", "content": "Environment: linux."}, user("go")]
    body = anthropic_body(
        messages,
        system="A system prompt given as a plain string.",
        metadata={"user_id": "{}"},
        context_management={"edits": []},
        output_config={"effort": "medium"},
        some_future_key=True,
    )
    status, _, _ = await post(
        http, f"{fake.url}/v1/messages?beta=true", body, **{"anthropic-version": "2023-06-01"}
    )
    assert status == 200


async def test_orphan_tool_result_is_rejected_like_the_real_api(fake, http):
    """A tool_result without a tool_use in the previous message is a 400 naming its place."""
    messages = [
        user("hi"),
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "out"},
            ],
        },
    ]
    status, body, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body(messages))
    assert status == 400
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` "
        "blocks: toolu_gone. Each `tool_result` block must have a corresponding `tool_use` "
        "block in the previous message.",
    }
    assert fake.requests[0].reply == "invalid"


async def test_unanswered_tool_use_is_rejected_like_the_real_api(fake, http):
    """A tool_use whose result is missing from the next message is a 400 naming the ids."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
    messages = [user("hi"), {"role": "assistant", "content": [call]}, user("well?")]
    status, body, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body(messages))
    assert status == 400
    assert body["error"]["message"] == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message."
    )


async def test_paired_tool_calls_are_accepted(fake, http):
    """A tool_use answered by its tool_result in the next message passes validation."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "a"}],
    }
    messages = [
        user("hi"),
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    status, _, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body(messages))
    assert status == 200


async def test_responses_stream_has_the_accepted_event_sequence(fake, http):
    """A streamed Responses reply follows Codex's accepted sequence with numbered events."""
    fake.queue(Text("Hello there."), ToolCalls([Call("exec_command", {"cmd": "echo hi"})]))
    url = f"{fake.url}/v1/responses"
    _, text, _ = await post(http, url, {"model": GPT, "input": "hi", "stream": True})
    stream = events(text)
    assert [name for name, _ in stream] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["sequence_number"] for _, data in stream] == list(range(len(stream)))
    assert stream[4][1]["delta"] == "Hello there."
    done = stream[-1][1]["response"]
    assert done["status"] == "completed"
    assert done["output"][0]["content"][0] == {
        "type": "output_text",
        "text": "Hello there.",
        "annotations": [],
        "logprobs": [],
    }
    assert set(done["usage"]) == {
        "input_tokens",
        "input_tokens_details",
        "output_tokens",
        "output_tokens_details",
        "total_tokens",
    }

    _, text, _ = await post(http, url, {"model": GPT, "input": "go", "stream": True})
    stream = events(text)
    assert [name for name, _ in stream][2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    item = stream[-2][1]["item"]
    assert item["type"] == "function_call"
    assert item["name"] == "exec_command"
    assert json.loads(item["arguments"]) == {"cmd": "echo hi"}
    assert item["call_id"].startswith("call_")
    assert item["status"] == "completed"


async def test_responses_json_reply_with_reasoning_and_custom_tool(fake, http):
    """A non-streaming Responses reply has reasoning, message, function and custom tool items."""
    calls = [Call("exec_command", {"cmd": "ls"}), Call("apply_patch", "*** Begin Patch")]
    fake.queue(Usage(ToolCalls(calls, text="On it.", thinking="Think."), cached_tokens=0))
    input_items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "abc"},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
    ]
    body = {"model": GPT, "input": input_items, "include": ["reasoning.encrypted_content"]}
    status, reply, _ = await post(http, f"{fake.url}/v1/responses", body)
    assert status == 200
    kinds = [item["type"] for item in reply["output"]]
    assert kinds == ["reasoning", "message", "function_call", "custom_tool_call"]
    assert reply["output"][0]["summary"] == [{"type": "summary_text", "text": "Think."}]
    assert reply["output"][0]["encrypted_content"]
    assert reply["output"][3]["input"] == "*** Begin Patch"
    assert reply["usage"]["output_tokens_details"]["reasoning_tokens"] > 0


async def test_a_responses_function_call_can_name_its_namespace(fake, http):
    """A call scripted with a namespace is a function call in that namespace (how a model
    calls a deferred tool Codex offers by namespace); without one, no namespace is sent."""
    fake.queue(
        ToolCalls(
            [
                Call("compact_context", {"summary": "s"}, namespace="mcp__condensate"),
                Call("exec_command", {"cmd": "ls"}),
            ]
        )
    )
    status, reply, _ = await post(http, f"{fake.url}/v1/responses", {"model": GPT, "input": "hi"})
    assert status == 200
    namespaced, plain = reply["output"]
    assert (namespaced["namespace"], namespaced["name"]) == ("mcp__condensate", "compact_context")
    assert "namespace" not in plain


async def test_responses_fail_and_slow(fake, http):
    """Responses answers a ``Fail`` in OpenAI's error shape and streams a ``Slow`` in pieces."""
    fake.queue(Fail(429, retry_after=2), Slow(Text("x" * 40), chunk_delay=0.01, chunks=4))
    url = f"{fake.url}/v1/responses"
    status, error, response = await post(http, url, {"model": GPT, "input": "hi", "stream": True})
    assert status == 429
    assert error["error"]["code"] == "rate_limit_exceeded"
    assert "Please try again in 2s" in error["error"]["message"]
    assert response.headers["retry-after"] == "2"
    _, text, _ = await post(http, url, {"model": GPT, "input": "hi", "stream": True})
    deltas = [d["delta"] for n, d in events(text) if n == "response.output_text.delta"]
    assert deltas == ["x" * 10] * 4


async def test_chat_text_and_tool_calls(fake, http):
    """Chat Completions answers text and tool calls, as JSON and as chunks ending in [DONE]."""
    fake.queue(
        Text("plain"),
        Slow(ToolCalls([Call("get_weather", {"city": "Paris"})]), chunk_delay=0, chunks=3),
    )
    url = f"{fake.url}/v1/chat/completions"
    messages = [{"role": "user", "content": "hi"}]
    _, reply, _ = await post(http, url, {"model": GPT, "messages": messages})
    assert reply["object"] == "chat.completion"
    assert reply["choices"][0]["message"]["content"] == "plain"
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["total_tokens"] == (
        reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]
    )

    body = {
        "model": GPT,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    _, text, _ = await post(http, url, body)
    chunks = [data for _, data in events(text)]
    assert chunks[-1] == "[DONE]"
    usage_chunk = chunks[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["prompt_tokens"] > 0
    deltas = [c["choices"][0]["delta"] for c in chunks[:-2]]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["function"]["name"] == "get_weather"
    assert len(calls) == 4
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(arguments) == {"city": "Paris"}
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"


async def test_chat_stream_without_include_usage_has_no_usage_chunk(fake, http):
    """Without ``stream_options.include_usage`` the stream carries no usage."""
    body = {"model": GPT, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    _, text, _ = await post(http, f"{fake.url}/v1/chat/completions", body)
    chunks = [data for _, data in events(text)]
    assert chunks[-1] == "[DONE]"
    assert all("usage" not in c for c in chunks[:-1])


async def test_chat_fail_and_usage_override(fake, http):
    """Chat answers ``Fail(500)`` as a server_error and reports a ``Usage`` override."""
    fake.queue(Fail(500), Usage(Text("ok"), prompt_tokens=9_000, cached_tokens=8_000))
    url = f"{fake.url}/v1/chat/completions"
    body = {"model": GPT, "messages": [{"role": "user", "content": "hi"}]}
    status, error, _ = await post(http, url, body)
    assert status == 500
    assert error["error"]["type"] == "server_error"
    _, reply, _ = await post(http, url, body)
    assert reply["usage"]["prompt_tokens"] == 9_000
    assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] == 8_000


async def test_count_tokens_matches_the_billed_prompt(fake, http):
    """``count_tokens`` returns the same total a message request is billed."""
    body = anthropic_body([user("count me"), {"role": "system", "content": "env"}, user("go")])
    _, counted, _ = await post(http, f"{fake.url}/v1/messages/count_tokens", body)
    _, reply, _ = await post(http, f"{fake.url}/v1/messages", body)
    assert counted["input_tokens"] == usage_sum(reply["usage"]) > 0
    assert fake.requests[0].endpoint == "count_tokens"


async def test_models_listings_in_both_shapes(http):
    """``GET /v1/models`` lists in Anthropic's shape for Anthropic clients, else OpenAI's."""
    async with FakeModelServer(window=None, windows={"local-model": 32_768}) as fake:
        async with http.get(
            f"{fake.url}/v1/models", headers={"anthropic-version": "2023-06-01"}
        ) as response:
            anthropic = await response.json()
        async with http.get(f"{fake.url}/v1/models") as response:
            openai = await response.json()
    assert anthropic["has_more"] is False
    assert anthropic["data"][0]["type"] == "model"
    assert anthropic["first_id"] == anthropic["data"][0]["id"]
    assert openai["object"] == "list"
    local = next(m for m in openai["data"] if m["id"] == "local-model")
    assert local["max_model_len"] == 32_768
    assert local["object"] == "model"
    assert all("max_model_len" not in m for m in openai["data"] if m["id"] != "local-model")


async def test_a_required_key_is_enforced_in_each_api_shape(http):
    """With ``api_key`` set, a wrong key gets 401 in the API's shape and the right one passes."""
    async with FakeModelServer(api_key="sk-right") as fake:
        body = anthropic_body([user("hi")])
        status, error, _ = await post(http, f"{fake.url}/v1/messages", body, **{"x-api-key": "no"})
        assert status == 401
        assert error["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
        ok, _, _ = await post(
            http, f"{fake.url}/v1/messages", body, Authorization="Bearer sk-right"
        )
        assert ok == 200
        status, error, _ = await post(
            http,
            f"{fake.url}/v1/responses",
            {"model": GPT, "input": "hi"},
            Authorization="Bearer x",
        )
        assert status == 401
        assert error["error"]["code"] == "invalid_api_key"
        ok, _, _ = await post(
            http,
            f"{fake.url}/v1/responses",
            {"model": GPT, "input": "hi"},
            **{"x-api-key": "sk-right"},
        )
        assert ok == 200
    assert next(r.reply for r in fake.requests) == "unauthorized"


async def test_queues_prefer_the_model_own_queue(fake, http):
    """A request takes from its model's queue (matched by prefix) before the any-model queue."""
    fake.queue(Text("shared"))
    fake.queue(Text("haiku only"), model="claude-haiku")
    body = anthropic_body([user("hi")], model="claude-haiku-4-5-20251001")
    _, first, _ = await post(http, f"{fake.url}/v1/messages", body)
    _, second, _ = await post(http, f"{fake.url}/v1/messages", body)
    assert first["content"][0]["text"] == "haiku only"
    assert second["content"][0]["text"] == "shared"
    assert fake.pending() == {}


async def test_http_control_api_scripts_the_fake(fake, http):
    """``/_fake/queue``, ``/_fake/config``, ``/_fake/requests`` and ``/_fake/reset`` work."""
    replies = [
        {"type": "text", "text": "scripted"},
        {"type": "tool_calls", "calls": [{"name": "Bash", "arguments": {"command": "ls"}}]},
        {"type": "fail", "status": 429, "retry_after": 1},
        {"type": "overflow", "mode": "stream"},
    ]
    status, queued, _ = await post(
        http, f"{fake.url}/_fake/queue", {"model": None, "replies": replies}
    )
    assert status == 200
    assert queued == {"queued": 4, "pending": {"*": 4}}
    status, config, _ = await post(http, f"{fake.url}/_fake/config", {"windows": {"tiny": 10}})
    assert config["windows"] == {"tiny": 10}
    assert config["window"] == 200_000

    url = f"{fake.url}/v1/messages"
    _, text, _ = await post(http, url, anthropic_body([user("a")]))
    _, tools, _ = await post(http, url, anthropic_body([user("a")]))
    limited, _, _ = await post(http, url, anthropic_body([user("a")]))
    _, refused, _ = await post(http, url, anthropic_body([user("a")]))
    _, tiny, _ = await post(http, url, anthropic_body([user("a")], model="tiny"))
    assert text["content"][0]["text"] == "scripted"
    assert tools["content"][0]["input"] == {"command": "ls"}
    assert limited == 429
    assert refused["error"]["message"].startswith("prompt is too long")
    assert tiny["error"]["message"].endswith("tokens > 10 maximum")

    async with http.get(f"{fake.url}/_fake/requests") as response:
        log = (await response.json())["requests"]
    assert [r["reply"] for r in log] == ["text", "tool_calls", "fail", "overflow", "window"]
    assert log[0]["body"]["messages"][0]["content"][0]["text"] == "a"
    async with http.get(f"{fake.url}/_fake/requests?since=4") as response:
        assert [r["number"] for r in (await response.json())["requests"]] == [5]

    await post(http, f"{fake.url}/_fake/reset", {})
    assert fake.requests == []
    bad, error, _ = await post(http, f"{fake.url}/_fake/queue", {"replies": [{"type": "nope"}]})
    assert bad == 400
    assert "nope" in error["error"]
    bad, _, _ = await post(http, f"{fake.url}/_fake/config", {"window": -1})
    assert bad == 400


async def test_the_request_log_records_what_the_model_received(fake, http):
    """Each logged request has its API, path, headers, body, tokens, cache split and status."""
    body = anthropic_body([user("hi")])
    await post(http, f"{fake.url}/v1/messages?beta=true", body, **{"x-api-key": "sk-test"})
    await post(http, f"{fake.url}/v1/responses", {"model": GPT, "input": "hi"})
    first, second = fake.requests
    assert (first.number, first.api, first.endpoint) == (1, "anthropic", "messages")
    assert first.path == "/v1/messages?beta=true"
    assert first.method == "POST"
    assert first.headers["x-api-key"] == "sk-test"
    assert first.body == body
    assert first.model == CLAUDE
    assert first.input_tokens > 0
    assert first.cache_read == 0
    assert first.cache_write + first.usage["input_tokens"] == first.input_tokens
    assert (first.reply, first.status) == ("default:text", 200)
    assert (second.api, second.endpoint, second.model) == ("openai", "responses", GPT)


def test_replies_round_trip_through_json():
    """Every reply kind survives ``reply_to_json`` and ``reply_from_json``."""
    replies: list[Reply] = [
        Text("a", thinking="t"),
        ToolCalls([Call("Bash", {"command": "ls"}, id="x"), Call("apply_patch", "raw")], text="b"),
        ToolCalls([Call("compact_context", {"summary": "s"}, namespace="mcp__condensate")]),
        Slow(Text("c"), chunk_delay=0.1, chunks=3),
        Fail(429, "rate_limit_error", "slow down", 1.5),
        Overflow("stream", 123),
        Usage(Text("d"), prompt_tokens=5, output_tokens=6, cached_tokens=2),
    ]
    for reply in replies:
        assert reply_from_json(json.loads(json.dumps(reply_to_json(reply)))) == reply
    with pytest.raises(ValueError, match="Overflow mode"):
        reply_from_json({"type": "overflow", "mode": "500"})


def test_fault_replies_round_trip_through_json():
    """Every fault reply kind survives ``reply_to_json`` and ``reply_from_json``; a bad
    ``drop`` is refused naming the choices."""
    replies: list[Reply] = [
        ToolCalls([Call("read", raw="{'path': 'a.txt'}", id="c1")]),
        Broken(Text("a"), after=3, line="oops"),
        Stall(Text("b"), seconds=2.5, after=1),
        Unframed(Text("c"), drop="all"),
        Cut(ToolCalls([Call("read", {"path": "a.txt"})]), keep=7),
        Html("<p>hi</p>", status=502, content_type="text/html; charset=utf-8"),
        Raw(body=[1, 2], events=[{"type": "message_start"}, "not json", [3]]),
    ]
    for reply in replies:
        assert reply_from_json(json.loads(json.dumps(reply_to_json(reply)))) == reply
    assert reply_from_json({"type": "broken", "reply": {"type": "text", "text": "x"}}) == Broken(
        Text("x")
    )
    with pytest.raises(ValueError, match="drop must be"):
        reply_from_json({"type": "unframed", "reply": {"type": "text", "text": "x"}, "drop": "x"})


async def queue_json(http: aiohttp.ClientSession, fake: FakeModelServer, *replies: Any) -> None:
    """Scripts replies through the HTTP control API, as a test in another process does."""
    status, _, _ = await post(http, f"{fake.url}/_fake/queue", {"replies": list(replies)})
    assert status == 200


async def test_an_html_reply_is_sent_whatever_the_request(fake, http):
    """``html`` answers its status with its page and content type, streaming or not."""
    html = {"type": "html", "body": "<html>portal</html>"}
    await queue_json(http, fake, html, {**html, "status": 502})
    status, text, response = await post(
        http, f"{fake.url}/v1/messages", anthropic_body([user("a")], stream=True)
    )
    assert (status, text, response.content_type) == (200, "<html>portal</html>", "text/html")
    status, _, _ = await post(
        http, f"{fake.url}/v1/chat/completions", {"model": GPT, "messages": [user("a")]}
    )
    assert status == 502
    assert [r.reply for r in fake.requests] == ["html", "html"]


async def test_a_broken_reply_carries_a_line_that_is_not_json(fake, http):
    """``broken`` puts its line after ``after`` events of a stream and cuts a JSON body."""
    broken = {"type": "broken", "reply": {"type": "text", "text": "hi"}, "after": 1, "line": "<x"}
    await queue_json(http, fake, broken, broken)
    _, text, _ = await post(
        http, f"{fake.url}/v1/messages", anthropic_body([user("a")], stream=True)
    )
    lines = [line for line in text.splitlines() if line.startswith("data: ")]
    assert lines[1] == "data: <x"
    assert json.loads(lines[0][6:])["type"] == "message_start"
    assert json.loads(lines[-1][6:])["type"] == "message_stop"
    async with http.post(f"{fake.url}/v1/messages", json=anthropic_body([user("a")])) as response:
        body = await response.text()
    assert response.content_type == "application/json"
    assert body.startswith('{"id": "msg_fake')
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)


@pytest.mark.parametrize(
    ("path", "body", "missing"),
    [
        ("/v1/messages", anthropic_body([user("a")], stream=True), "message_stop"),
        ("/v1/responses", {"model": GPT, "input": "a", "stream": True}, "response.completed"),
        ("/v1/chat/completions", {"model": GPT, "messages": [user("a")], "stream": True}, "[DONE]"),
    ],
)
async def test_an_unframed_stream_lacks_its_end(fake, http, path, body, missing):
    """``unframed`` with ``drop: "stop"`` leaves the closing events out of each API's stream."""
    await queue_json(http, fake, {"type": "unframed", "reply": {"type": "text", "text": "hi"}})
    status, text, _ = await post(http, f"{fake.url}{path}", body)
    assert status == 200
    assert "hi" in text
    assert missing not in text
    assert '"finish_reason":"stop"' not in text


async def test_an_unframed_stream_can_carry_nothing(fake, http):
    """``drop: "all"`` is a 200 event stream with no events at all."""
    await queue_json(
        http, fake, {"type": "unframed", "reply": {"type": "text", "text": "hi"}, "drop": "all"}
    )
    body = {"model": GPT, "input": "a", "stream": True}
    status, text, response = await post(http, f"{fake.url}/v1/responses", body)
    assert (status, text, response.content_type) == (200, "", "text/event-stream")


async def test_cut_arguments_stop_at_max_tokens_in_each_api(fake, http):
    """``cut`` keeps ``keep`` characters of the last call's arguments and says the reply hit
    its limit: Anthropic max_tokens, Responses incomplete, Chat length."""
    cut = {
        "type": "cut",
        "keep": 9,
        "reply": {"type": "tool_calls", "calls": [{"name": "read", "arguments": {"path": "a"}}]},
    }
    await queue_json(http, fake, cut, cut, cut)
    _, text, _ = await post(
        http, f"{fake.url}/v1/messages", anthropic_body([user("a")], stream=True)
    )
    stream = events(text)
    pieces = [d["delta"]["partial_json"] for _, d in stream if d["type"] == "content_block_delta"]
    assert "".join(pieces) == '{"path": '
    assert stream[-2][1]["delta"]["stop_reason"] == "max_tokens"
    assert stream[-1][0] == "message_stop"
    _, response, _ = await post(http, f"{fake.url}/v1/responses", {"model": GPT, "input": "a"})
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][-1]["arguments"] == '{"path": '
    chat = {"model": GPT, "messages": [user("a")]}
    _, reply, _ = await post(http, f"{fake.url}/v1/chat/completions", chat)
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"path": '


async def test_raw_arguments_are_sent_as_they_are(fake, http):
    """A call's ``raw`` text is the arguments Chat and Responses send, JSON or not."""
    calls = {"type": "tool_calls", "calls": [{"name": "read", "raw": "{'path': 'a.txt'}"}]}
    await queue_json(http, fake, calls, calls)
    chat = {"model": GPT, "messages": [user("a")]}
    _, reply, _ = await post(http, f"{fake.url}/v1/chat/completions", chat)
    function = reply["choices"][0]["message"]["tool_calls"][0]["function"]
    assert function == {"name": "read", "arguments": "{'path': 'a.txt'}"}
    _, response, _ = await post(http, f"{fake.url}/v1/responses", {"model": GPT, "input": "a"})
    assert response["output"][-1]["arguments"] == "{'path': 'a.txt'}"


async def test_raw_replies_send_json_of_any_shape(fake, http):
    """``raw`` answers its ``body`` as JSON, and its ``events`` as data lines of a stream."""
    await queue_json(
        http,
        fake,
        {"type": "raw", "body": [1, 2]},
        {"type": "raw", "events": [{"type": "message_start"}, "not json"]},
    )
    _, body, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("a")]))
    assert body == [1, 2]
    _, text, _ = await post(
        http, f"{fake.url}/v1/messages", anthropic_body([user("a")], stream=True)
    )
    assert text == 'event: message_start\ndata: {"type":"message_start"}\n\ndata: not json\n\n'


async def test_a_stall_sends_headers_then_waits(fake, http):
    """``stall`` sends the headers at once and the rest only after ``seconds``."""
    stall = {"type": "stall", "reply": {"type": "text", "text": "late"}, "seconds": 0.4}
    await queue_json(http, fake, stall)
    started = time.monotonic()
    async with http.post(
        f"{fake.url}/v1/messages", json=anthropic_body([user("a")], stream=True)
    ) as response:
        headers_at = time.monotonic() - started
        text = await response.text()
    assert headers_at < 0.3
    assert time.monotonic() - started >= 0.4
    assert "late" in text


async def test_a_stalled_client_that_hangs_up_frees_the_server(fake, http):
    """A client leaving a stall ends the fake's wait at once: the server goes idle."""
    stall = {"type": "stall", "reply": {"type": "text", "text": "late"}, "seconds": 30}
    await queue_json(http, fake, stall)
    body = anthropic_body([user("a")], stream=True)
    async with http.post(f"{fake.url}/v1/messages", json=body) as response:
        response.close()
    started = time.monotonic()
    status, _, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body([user("b")]))
    assert status == 200
    assert time.monotonic() - started < 1
    await asyncio.sleep(0.3)
    assert fake.idle_seconds() > 0


def _post_sync(url: str, body: Any) -> tuple[int, Any]:
    """POSTs JSON with the standard library only, as sync code in another process would."""
    parts = urllib.parse.urlsplit(url)
    connection = HTTPConnection(parts.netloc, timeout=10)
    try:
        connection.request(
            "POST", parts.path, json.dumps(body), {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_module_entry_point_serves_and_stops_on_sigterm():
    """``python -m condensate.testing.fake_model`` prints its URL, answers, and exits on SIGTERM."""
    command = [sys.executable, "-m", "condensate.testing.fake_model", "--port", "0"]
    command += ["--window", "5000", "--idle-exit", "60"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        status, reply = _post_sync(f"{url}/v1/messages", anthropic_body([user("hi")]))
        assert status == 200
        assert reply["content"][0]["text"].startswith("FAKE reply #1")
        status, _ = _post_sync(f"{url}/v1/messages", anthropic_body([user("x " * 6000)]))
        assert status == 400
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
    assert process.returncode == 0, stderr
    assert "fake_model_stopped" in stderr


def test_module_entry_point_exits_when_idle():
    """``--idle-exit`` stops a forgotten server by itself."""
    command = [sys.executable, "-m", "condensate.testing.fake_model", "--idle-exit", "0.3"]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("http://127.0.0.1:")
    assert "fake_model_idle_exited" in result.stderr
    assert time.monotonic() - started < 20


def test_in_thread_serves_sync_code():
    """``FakeModelServer.in_thread`` serves plain sync code and stops when the block ends."""
    with FakeModelServer.in_thread(window=10_000) as fake:
        fake.queue(Text("from a thread"))
        status, reply = _post_sync(f"{fake.url}/v1/messages", anthropic_body([user("hi")]))
        url = fake.url
        assert status == 200
        assert reply["content"][0]["text"] == "from a thread"
        assert fake.requests[0].status == 200
        status, _ = _post_sync(f"{url}/_fake/reset", {})
        assert status == 200
        assert fake.requests == []
    with pytest.raises(ConnectionRefusedError):
        _post_sync(f"{url}/v1/messages", anthropic_body([user("hi")]))


async def test_the_default_listing_names_todays_models(fake, http):
    """``GET /v1/models`` lists today's models (the pinned CLIs' defaults and their neighbours)
    beside the older ones tests use."""
    async with http.get(f"{fake.url}/v1/models") as response:
        listed = {m["id"] for m in (await response.json())["data"]}
    today = {
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
        "claude-fable-5-2",
        "gpt-5.5",
        "gpt-5.6-sol",
        "gpt-6.2-sol",
    }
    assert today <= listed
    assert {"claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5-mini"} <= listed


async def test_real_windows_are_there_to_pass(http):
    """``REAL_WINDOWS`` holds the models' real windows (Claude 5.x 1,000,000 tokens; gpt-5.5
    1,050,000 at the API); passed as ``windows=``, they replace the default window for those
    models only."""
    async with FakeModelServer(window=1_000, windows=REAL_WINDOWS) as fake:
        async with http.get(f"{fake.url}/v1/models") as response:
            limits = {m["id"]: m.get("max_model_len") for m in (await response.json())["data"]}
        prompt = [user("word " * 2_000)]
        refused, _, _ = await post(http, f"{fake.url}/v1/messages", anthropic_body(prompt))
        answered, _, _ = await post(
            http, f"{fake.url}/v1/messages", anthropic_body(prompt, model="claude-opus-5-5")
        )
    assert limits["gpt-5.5"] == 1_050_000
    assert limits["claude-opus-5-5"] == 1_000_000
    assert (refused, answered) == (400, 200)
