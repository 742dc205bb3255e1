"""Each provider client against the fake model server's scripted faults over real HTTP: what a
provider sends that cannot be read is a MalformedResponse that is retried, arguments that
cannot be read come back in ``invalid_arguments``, and stalls and slow calls are cut by the
read timeout and the call deadline."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from condensate.core.messages import Message, Request, ToolSpec
from condensate.errors import MalformedResponse, ProviderUnavailable, TransportFailed
from condensate.providers import Endpoint, ModelClient, ProviderSettings, make_client
from condensate.providers._http import CALL_SETTING, READ_SETTING, RetryPolicy, Timeouts
from condensate.testing.fake_model import (
    Broken,
    Call,
    Cut,
    FakeModelServer,
    Html,
    Raw,
    Reply,
    Slow,
    Stall,
    Text,
    ToolCalls,
    Unframed,
)

MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-5.5",
    "chat": "chat:gpt-5-mini",
}
FAST = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)
ATTEMPTS = FAST.max_retries + 1
READ = ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {}}})
PROVIDERS = pytest.mark.parametrize("provider", ["anthropic", "openai", "chat"])
STREAMING = pytest.mark.parametrize("stream", [True, False])
NOT_JSON = "{'path': 'a.txt'}"


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=50_000) as server:
        yield server


def client(
    fake: FakeModelServer,
    session: aiohttp.ClientSession,
    provider: str,
    *,
    retry: RetryPolicy = FAST,
    timeouts: Timeouts | None = None,
) -> ModelClient:
    settings = ProviderSettings(
        anthropic=Endpoint(fake.url, "sk-test"),
        openai=Endpoint(fake.url + "/v1", "sk-test"),
        chat=Endpoint(fake.url + "/v1", "sk-test"),
        retry=retry,
        timeouts=timeouts or Timeouts(call=30, read=5),
    )
    return make_client(MODELS[provider], settings, session)


def request(provider: str, *, stream: bool = True) -> Request:
    return Request(
        model=MODELS[provider].split(":", 1)[1],
        messages=(Message.user("hello"),),
        tools=(READ,),
        stream=stream,
    )


async def fails(
    fake: FakeModelServer,
    session: aiohttp.ClientSession,
    provider: str,
    reply: Reply,
    *,
    stream: bool = True,
) -> MalformedResponse:
    """Queues ``reply`` for every attempt and returns the MalformedResponse raised."""
    fake.queue(*[reply] * ATTEMPTS)
    with pytest.raises(MalformedResponse) as caught:
        await client(fake, session, provider).complete(request(provider, stream=stream))
    assert len(fake.requests) == ATTEMPTS
    assert caught.value.provider == provider
    assert caught.value.code == "malformed-response"
    return caught.value


# -- broken replies: retried, then a MalformedResponse ---------------------------------------


@PROVIDERS
async def test_a_non_json_data_line_is_malformed_after_the_retries(fake, session, provider):
    """A data line that is not JSON mid-stream is a MalformedResponse naming the provider and
    quoting the line, raised once every retry met it too."""
    error = await fails(fake, session, provider, Broken(Text("hi"), after=2, line="<b>oops"))
    assert f"The {provider} reply could not be read" in str(error)
    assert "not JSON: '<b>oops'" in str(error)


@PROVIDERS
async def test_a_broken_stream_is_retried_and_the_next_answer_returned(fake, session, provider):
    """A broken stream is retried; the next, whole answer is the completion."""
    fake.queue(Broken(Text("lost")), Text("whole"))
    reply = await client(fake, session, provider).complete(request(provider))
    assert reply.text == "whole"
    assert [r.reply for r in fake.requests] == ["broken:text", "text"]


@PROVIDERS
async def test_a_json_body_cut_in_half_is_malformed(fake, session, provider):
    """A non-streaming body cut off mid-JSON is a MalformedResponse, retried."""
    error = await fails(fake, session, provider, Broken(Text("hi")), stream=False)
    assert "not JSON (application/json" in str(error)


@PROVIDERS
@STREAMING
async def test_an_html_page_with_200_is_malformed(fake, session, provider, stream):
    """An HTML page sent with status 200 is a MalformedResponse quoting the page's start."""
    error = await fails(fake, session, provider, Html("<html>portal</html>"), stream=stream)
    assert "not JSON (text/html" in str(error)
    assert "<html>portal</html>" in str(error)


async def test_an_html_page_with_502_is_the_outage_it_says(fake, session):
    """An HTML error page keeps its status's class: a 502 is ProviderUnavailable."""
    fake.queue(*[Html("<html>bad gateway</html>", status=502)] * ATTEMPTS)
    with pytest.raises(ProviderUnavailable, match="bad gateway"):
        await client(fake, session, "anthropic").complete(request("anthropic"))


# -- streams missing their frame --------------------------------------------------------------


@PROVIDERS
async def test_a_stream_without_its_end_is_malformed(fake, session, provider):
    """A stream that ends without its closing event is a MalformedResponse, never an empty
    success."""
    error = await fails(fake, session, provider, Unframed(Text("hi"), drop="stop"))
    expected = {
        "anthropic": "ended before its message_stop event",
        "openai": "ended without response.completed",
        "chat": "ended before a finish_reason or [DONE]",
    }
    assert expected[provider] in str(error)


@PROVIDERS
async def test_a_stream_with_no_events_is_malformed(fake, session, provider):
    """A 200 stream that carries nothing is a MalformedResponse."""
    await fails(fake, session, provider, Unframed(Text("hi"), drop="all"))


async def test_an_anthropic_stream_without_message_start_is_malformed(fake, session):
    """An Anthropic stream without message_start is a MalformedResponse."""
    error = await fails(fake, session, "anthropic", Unframed(Text("hi"), drop="start"))
    assert "no message_start event" in str(error)


@pytest.mark.parametrize("provider", ["openai", "chat"])
async def test_openai_streams_need_no_opening_event(fake, session, provider):
    """Responses and Chat Completions streams are read without their opening events: the
    closing ones carry everything."""
    fake.queue(Unframed(Text("fine"), drop="start"))
    reply = await client(fake, session, provider).complete(request(provider))
    assert reply.text == "fine"


@PROVIDERS
async def test_an_empty_object_reply_is_malformed(fake, session, provider):
    """A non-streaming reply of ``{}`` is a MalformedResponse, never an empty success."""
    await fails(fake, session, provider, Unframed(Text("hi")), stream=False)


# -- JSON of the wrong shape -------------------------------------------------------------------


@PROVIDERS
async def test_a_json_list_reply_is_malformed(fake, session, provider):
    """A JSON body that is not an object is a MalformedResponse."""
    error = await fails(fake, session, provider, Raw(body=[1, 2]), stream=False)
    assert "JSON that is not an object: '[1, 2]'" in str(error)


@pytest.mark.parametrize(
    ("provider", "body", "expected"),
    [
        ("anthropic", {"id": "m", "type": "message"}, "the message's content is not a JSON list"),
        (
            "anthropic",
            {"content": [{"type": "tool_use", "id": "t1", "input": {}}], "stop_reason": "x"},
            "a tool_use block lacks its name or id",
        ),
        ("anthropic", {"content": ["text"]}, "a content block is not a JSON object"),
        ("openai", {"status": "completed"}, "the response's output is not a JSON list"),
        (
            "openai",
            {"output": [{"type": "function_call", "call_id": "c1", "arguments": "{}"}]},
            "a tool call has no name",
        ),
        ("openai", {"output": [{"type": "message", "content": [7]}]}, "wrong shape"),
        ("chat", {"choices": []}, "the completion has no choices"),
        ("chat", {"choices": [{"message": "hi"}]}, "the choice's message is not a JSON object"),
        (
            "chat",
            {"choices": [{"message": {"tool_calls": [{"id": "c1", "function": {}}]}}]},
            "a tool call has no name",
        ),
    ],
)
async def test_a_reply_of_the_wrong_shape_is_malformed(fake, session, provider, body, expected):
    """Missing content, a tool call without a name or a mistyped field is a
    MalformedResponse saying what was wrong, never a KeyError or TypeError."""
    error = await fails(fake, session, provider, Raw(body=body), stream=False)
    assert expected in str(error)


@pytest.mark.parametrize(
    ("provider", "events"),
    [
        (
            "anthropic",
            [
                {"type": "message_start", "message": {"id": "m", "usage": {}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use"}},
                {"type": "message_stop"},
            ],
        ),
        ("anthropic", [{"type": "message_start", "message": "nope"}]),
        ("anthropic", [[1, 2]]),
        ("openai", [{"type": "response.completed", "response": {"output": {"a": 1}}}]),
        ("chat", [{"choices": [{"delta": "x"}]}, "[DONE]"]),
    ],
)
async def test_stream_events_of_the_wrong_shape_are_malformed(fake, session, provider, events):
    """Stream events of the wrong shape are a MalformedResponse, never a KeyError escaping."""
    await fails(fake, session, provider, Raw(events=events))


# -- arguments that cannot be read: no error, listed in invalid_arguments ---------------------


@PROVIDERS
@STREAMING
async def test_arguments_that_are_not_json_are_listed_not_raised(fake, session, provider, stream):
    """Arguments that are not JSON leave the call with ``{}`` and a sentence in
    ``invalid_arguments`` that names the tool, the reason and the text; nothing is retried."""
    fake.queue(ToolCalls([Call("read", raw=NOT_JSON, id="call_1")]))
    reply = await client(fake, session, provider).complete(request(provider, stream=stream))
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("call_1", "read", {})]
    assert dict(reply.invalid_arguments) == {
        "call_1": "The arguments of read were not valid JSON (Expecting property name "
        "enclosed in double quotes at 1): {'path': 'a.txt'}"
    }
    assert len(fake.requests) == 1


@PROVIDERS
@STREAMING
async def test_arguments_cut_off_at_max_tokens_are_listed(fake, session, provider, stream):
    """A reply that stops at its token limit inside a call's arguments returns that call
    with ``{}`` and a sentence saying it was cut off; the calls before it are whole."""
    calls = [Call("read", {"path": "b.txt"}, id="c0"), Call("read", {"path": "a.txt"}, id="c1")]
    fake.queue(Cut(ToolCalls(calls), keep=12))
    reply = await client(fake, session, provider).complete(request(provider, stream=stream))
    assert [(c.id, c.arguments) for c in reply.tool_calls] == [
        ("c0", {"path": "b.txt"}),
        ("c1", {}),
    ]
    assert dict(reply.invalid_arguments) == {
        "c1": "The arguments of read were cut off at max_tokens before they were complete: "
        '{"path": "a.'
    }
    assert reply.stop_reason == ("length" if provider == "chat" else "max_tokens")


async def test_json_arguments_that_are_not_an_object_are_listed(fake, session):
    """JSON arguments that are not an object are refused too, not wrapped in a guess."""
    fake.queue(ToolCalls([Call("read", raw="[1, 2]", id="c1")]))
    reply = await client(fake, session, "chat").complete(request("chat"))
    assert reply.tool_calls[0].arguments == {}
    assert (
        reply.invalid_arguments["c1"] == "The arguments of read were JSON but not an object: [1, 2]"
    )


async def test_a_reply_cut_in_its_text_is_a_completion(fake, session):
    """A Responses reply cut at its token limit in its text is a completion that says so."""
    fake.queue(Cut(Text("abcdefghij"), keep=4))
    reply = await client(fake, session, "openai").complete(request("openai"))
    assert (reply.text, reply.stop_reason) == ("abcd", "max_tokens")


# -- stalls and the call deadline --------------------------------------------------------------


@PROVIDERS
@STREAMING
async def test_a_stall_is_cut_at_the_read_timeout(fake, session, provider, stream):
    """A provider that sends its headers and then nothing is cut at the read timeout, retried,
    and reported as a TransportFailed naming the timeout and its setting."""
    fake.queue(*[Stall(Text("late"), seconds=10)] * ATTEMPTS)
    c = client(fake, session, provider, timeouts=Timeouts(call=30, read=0.3))
    started = time.monotonic()
    with pytest.raises(TransportFailed) as caught:
        await c.complete(request(provider, stream=stream))
    assert time.monotonic() - started < 3
    assert f"{provider} sent nothing for 0.3 s, the read timeout ({READ_SETTING})" in str(
        caught.value
    )
    assert len(fake.requests) == ATTEMPTS


@PROVIDERS
async def test_a_pause_mid_stream_is_cut_and_retried(fake, session, provider):
    """A stream that pauses after some events is cut at the read timeout; the retry answers."""
    fake.queue(Stall(Text("late"), seconds=10, after=3), Text("on time"))
    c = client(fake, session, provider, timeouts=Timeouts(call=30, read=0.3))
    reply = await c.complete(request(provider))
    assert reply.text == "on time"
    assert len(fake.requests) == 2


async def test_no_headers_within_the_read_timeout_is_a_stall_too(fake, session):
    """A server that sends no headers within the read timeout is cut there."""
    fake.queue(*[Slow(Text("x"), chunk_delay=0.4, chunks=2)] * ATTEMPTS)
    c = client(fake, session, "chat", timeouts=Timeouts(call=30, read=0.3))
    with pytest.raises(TransportFailed, match=r"sent nothing for 0\.3 s"):
        await c.complete(request("chat", stream=False))


async def test_the_call_deadline_bounds_a_trickling_stream(fake, session):
    """A stream that never pauses long enough for the read timeout is still cut at the call
    deadline, with a TransportFailed naming it and its setting; no retry follows."""
    fake.queue(Slow(Text("x" * 100), chunk_delay=0.1, chunks=100), Text("never"))
    c = client(fake, session, "anthropic", timeouts=Timeouts(call=1.0, read=0.5))
    started = time.monotonic()
    with pytest.raises(TransportFailed) as caught:
        await c.complete(request("anthropic"))
    assert time.monotonic() - started < 2
    assert f"no complete answer within 1 s, the deadline for a whole call ({CALL_SETTING})" in str(
        caught.value
    )
    assert len(fake.requests) == 1


async def test_no_retry_starts_that_would_wait_past_the_deadline(fake, session):
    """A retry whose backoff would reach the call deadline is not made: the error is raised."""
    fake.queue(Broken(Text("a")), Text("too late"))
    slow_retries = RetryPolicy(max_retries=3, base_delay=5.0, max_delay=5.0)
    c = client(fake, session, "chat", retry=slow_retries, timeouts=Timeouts(call=1.0, read=1.0))
    started = time.monotonic()
    with pytest.raises(MalformedResponse):
        await c.complete(request("chat"))
    assert time.monotonic() - started < 1
    assert len(fake.requests) == 1


async def test_a_failed_response_sent_as_json_is_its_error(fake, session):
    """A non-streaming Responses reply whose status is failed is the error it carries, not
    an empty success."""
    failed = {"status": "failed", "error": {"code": "server_error", "message": "it broke"}}
    fake.queue(*[Raw(body=failed)] * ATTEMPTS)
    with pytest.raises(ProviderUnavailable, match="it broke"):
        await client(fake, session, "openai").complete(request("openai", stream=False))
