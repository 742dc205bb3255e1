"""Each provider client against the fake model server over real HTTP: streaming and not, tool
round trips, usage, every error class, bounded retries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from condensate.core.messages import Message, Request, ToolOutput, ToolSpec, ToolUse
from condensate.errors import (
    AuthenticationFailed,
    ContextWindowExceeded,
    MalformedRequest,
    ProviderUnavailable,
    RateLimited,
    TransportFailed,
)
from condensate.providers import (
    Endpoint,
    ModelClient,
    ProviderSettings,
    make_client,
    parse_model,
)
from condensate.providers._http import RetryPolicy
from condensate.providers.windows import resolve_window
from condensate.testing.fake_model import (
    Call,
    Fail,
    FakeModelServer,
    Overflow,
    Slow,
    Text,
    ToolCalls,
)

MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-5.5",
    "chat": "chat:gpt-5-mini",
}
FAST = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)
READ = ToolSpec(
    "read",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=50_000) as server:
        yield server


def client(
    fake: FakeModelServer, session: aiohttp.ClientSession, provider: str, retry: RetryPolicy = FAST
) -> ModelClient:
    settings = ProviderSettings(
        anthropic=Endpoint(fake.url, "sk-test"),
        openai=Endpoint(fake.url + "/v1", "sk-test"),
        chat=Endpoint(fake.url + "/v1", "sk-test"),
        retry=retry,
    )
    return make_client(MODELS[provider], settings, session)


def request(
    text: str = "hello",
    *,
    stream: bool = True,
    provider: str = "anthropic",
    messages: tuple[Message, ...] | None = None,
) -> Request:
    name = MODELS[provider].split(":", 1)[1]
    return Request(
        model=name,
        messages=messages or (Message.user(text),),
        system="You are terse.",
        tools=(READ,),
        stream=stream,
    )


PROVIDERS = pytest.mark.parametrize("provider", ["anthropic", "openai", "chat"])
STREAMING = pytest.mark.parametrize("stream", [True, False])


@PROVIDERS
@STREAMING
async def test_text_reply_and_usage(fake, session, provider, stream):
    """A text reply arrives whole, with the prompt's size as the provider counted it."""
    fake.queue(Text("all done"))
    reply = await client(fake, session, provider).complete(
        request(stream=stream, provider=provider)
    )
    assert reply.text == "all done"
    assert reply.tool_calls == ()
    recorded = fake.requests[-1]
    assert reply.usage.prompt == recorded.input_tokens
    assert reply.usage.output > 0


@PROVIDERS
@STREAMING
async def test_tool_round_trip(fake, session, provider, stream):
    """A tool call comes back with its arguments, and its result goes back paired with it."""
    fake.queue(ToolCalls([Call("read", {"path": "a.py"})], text="Reading."), Text("ok"))
    c = client(fake, session, provider)
    first = await c.complete(request(stream=stream, provider=provider))
    assert [(t.name, t.arguments) for t in first.tool_calls] == [("read", {"path": "a.py"})]
    call = first.tool_calls[0]
    history = (
        Message.user("hello"),
        Message("assistant", (ToolUse(call.id, call.name, call.arguments),)),
        Message("user", (ToolOutput(call.id, "print('a')"),)),
    )
    second = await c.complete(request(stream=stream, provider=provider, messages=history))
    assert second.text == "ok"
    assert fake.requests[-1].status == 200


async def test_anthropic_thinking_and_its_switch(fake, session):
    """Thinking blocks are read back; with thinking off the request says so."""
    fake.queue(Text("answer", thinking="let me think"))
    reply = await client(fake, session, "anthropic").complete(request())
    assert reply.thinking[0].text == "let me think"
    assert fake.requests[-1].body["thinking"] == {"type": "disabled"}


async def test_openai_reasoning_off_for_reasoning_models(fake, session):
    """A reasoning model gets minimal effort when thinking is off."""
    fake.queue(Text("ok"))
    await client(fake, session, "openai").complete(request(provider="openai"))
    assert fake.requests[-1].body["reasoning"] == {"effort": "minimal"}


async def test_cache_read_is_split_out_of_openai_input(fake, session):
    """OpenAI counts cached tokens inside input; the client reports them as cache read."""
    c = client(fake, session, "openai")
    fake.queue(Text("one"), Text("two"))
    long = "word " * 3000
    await c.complete(request(long, provider="openai"))
    second = await c.complete(request(long, provider="openai"))
    assert second.usage.cache_read > 0
    assert second.usage.prompt == fake.requests[-1].input_tokens


async def test_slow_stream_arrives_whole(fake, session):
    """A slow stream in many pieces still gives the whole text."""
    fake.queue(Slow(Text("abcdefghij" * 5), chunk_delay=0.01, chunks=10))
    reply = await client(fake, session, "anthropic").complete(request())
    assert reply.text == "abcdefghij" * 5


@PROVIDERS
async def test_context_refusal_at_the_window(fake, session, provider):
    """A prompt over the fake's window is a ContextWindowExceeded, with numbers where the
    provider gives them, and is never retried."""
    fake.configure(window=1_000)
    with pytest.raises(ContextWindowExceeded) as caught:
        await client(fake, session, provider).complete(request("word " * 3000, provider=provider))
    if provider != "openai":
        assert caught.value.tokens is not None
        assert caught.value.tokens > 1_000
        assert caught.value.limit == 1_000
    assert len(fake.requests) == 1


async def test_responses_refusal_inside_a_stream(fake, session):
    """context_length_exceeded arriving in response.failed is a refusal too."""
    fake.queue(Overflow(mode="stream"))
    with pytest.raises(ContextWindowExceeded):
        await client(fake, session, "openai").complete(request(provider="openai"))


@PROVIDERS
async def test_wrong_key_is_an_authentication_error(fake, session, provider):
    """A 401 is AuthenticationFailed, not retried, not a refusal."""
    fake.configure(api_key="the-right-key")
    with pytest.raises(AuthenticationFailed):
        await client(fake, session, provider).complete(request(provider=provider))
    assert len(fake.requests) == 1


@PROVIDERS
async def test_rate_limit_is_retried_then_answers(fake, session, provider):
    """A 429 and a 529 are retried with backoff; the next answer is returned."""
    fake.queue(Fail(429, retry_after=0.01), Fail(529), Text("finally"))
    reply = await client(fake, session, provider).complete(request(provider=provider))
    assert reply.text == "finally"
    assert [r.status for r in fake.requests] == [429, 529, 200]


async def test_retries_are_bounded(fake, session):
    """After max_retries, the last error is raised."""
    fake.queue(*[Fail(500)] * 5)
    with pytest.raises(ProviderUnavailable):
        await client(fake, session, "anthropic").complete(request())
    assert len(fake.requests) == FAST.max_retries + 1


async def test_rate_limit_that_persists_raises_rate_limited(fake, session):
    """A rate limit that outlasts the retries surfaces as RateLimited."""
    fake.queue(*[Fail(429)] * 5)
    with pytest.raises(RateLimited):
        await client(fake, session, "chat").complete(request(provider="chat"))


async def test_broken_history_is_malformed_not_a_refusal(fake, session):
    """A tool result with no matching call is a MalformedRequest, never a refusal."""
    history = (Message.user("hi"), Message("user", (ToolOutput("toolu_nope", "x"),)))
    with pytest.raises(MalformedRequest) as caught:
        await client(fake, session, "anthropic").complete(request(messages=history))
    assert not isinstance(caught.value, ContextWindowExceeded)


async def test_unreachable_server_is_a_transport_error(session):
    """Nothing listening: a TransportFailed after the bounded retries."""
    settings = ProviderSettings(anthropic=Endpoint("http://127.0.0.1:9", "k"), retry=FAST)
    c = make_client("anthropic:claude-sonnet-4-5", settings, session)
    with pytest.raises(TransportFailed):
        await c.complete(request())


async def test_window_comes_from_the_server_listing(fake, session):
    """Without a setting, a model's window is read from the server's /v1/models listing
    (vLLM's max_model_len) and marked resolved; an explicit setting wins."""
    fake.configure(windows={"qwen3-coder": 32_768}, models=["qwen3-coder"])
    endpoint = Endpoint(fake.url + "/v1", "sk-test")
    name = parse_model("chat:qwen3-coder")
    listed = await resolve_window(session, name, endpoint, {})
    assert (listed.tokens, listed.resolved) == (32_768, True)
    explicit = await resolve_window(session, name, endpoint, {"chat:qwen3-coder": 16_000})
    assert explicit.tokens == 16_000
    unknown = await resolve_window(session, parse_model("chat:mystery"), endpoint, {})
    assert unknown.resolved is False
