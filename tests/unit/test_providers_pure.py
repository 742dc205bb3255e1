"""The pure parts of the provider layer: SSE parsing, error classes, model names, windows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from condensate.errors import (
    AuthenticationFailed,
    ConfigError,
    ContextWindowExceeded,
    MalformedRequest,
    ProviderUnavailable,
    RateLimited,
)
from condensate.providers import ModelName, parse_model
from condensate.providers._http import RetryPolicy, classify
from condensate.providers.sse import ServerEvent, SSEParser
from condensate.providers.windows import FALLBACK, resolve

ANTHROPIC_TOO_LONG = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 232473 tokens > 200000 maximum",
    },
    "request_id": "req_0e3d79cec85b4ea7a396d34c",
}
OPENAI_TOO_LONG = {
    "error": {
        "message": "Your input exceeds the context window of this model. Please adjust your "
        "input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}
CHAT_TOO_LONG = {
    "error": {
        "message": "This model's maximum context length is 32768 tokens. However, your "
        "messages resulted in 40012 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def test_anthropic_prompt_too_long_is_a_refusal_with_its_numbers():
    """Anthropic's 400 'prompt is too long: N tokens > M maximum' is a context refusal."""
    error = classify("anthropic", 400, ANTHROPIC_TOO_LONG)
    assert isinstance(error, ContextWindowExceeded)
    assert (error.tokens, error.limit) == (232_473, 200_000)


def test_openai_context_length_exceeded_is_a_refusal():
    """OpenAI's context_length_exceeded (400 or in response.failed) is a context refusal."""
    error = classify("openai", 400, OPENAI_TOO_LONG)
    assert isinstance(error, ContextWindowExceeded)
    assert error.tokens is None
    streamed = classify(
        "openai", 200, {"error": {"code": "context_length_exceeded", "message": "too long"}}
    )
    assert isinstance(streamed, ContextWindowExceeded)


def test_chat_completions_refusal_carries_its_numbers():
    """The classic Chat Completions message gives the tokens and the limit."""
    error = classify("chat", 400, CHAT_TOO_LONG)
    assert isinstance(error, ContextWindowExceeded)
    assert (error.tokens, error.limit) == (40_012, 32_768)


def test_http_413_is_a_refusal():
    """A 413 request-too-large counts as a context refusal."""
    body = {"type": "error", "error": {"type": "request_too_large", "message": "too big"}}
    assert isinstance(classify("anthropic", 413, body), ContextWindowExceeded)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            401,
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
            AuthenticationFailed,
        ),
        (403, {"error": {"message": "forbidden"}}, AuthenticationFailed),
        (
            429,
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
            RateLimited,
        ),
        (
            500,
            {"type": "error", "error": {"type": "api_error", "message": "boom"}},
            ProviderUnavailable,
        ),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            ProviderUnavailable,
        ),
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "messages.1.content.0: unexpected `tool_use_id` found in "
                    "`tool_result` blocks",
                },
            },
            MalformedRequest,
        ),
        (
            404,
            {"error": {"message": "model not found", "code": "model_not_found"}},
            MalformedRequest,
        ),
    ],
)
def test_other_errors_are_their_own_class_and_never_a_refusal(status, body, kind):
    """Authentication, rate limit, server and malformed-history errors are separate classes,
    none of them a context refusal."""
    error = classify("anthropic", status, body)
    assert isinstance(error, kind)
    assert not isinstance(error, ContextWindowExceeded)


def test_rate_limit_reads_retry_after():
    """A 429's retry-after header is kept for the backoff."""
    error = classify("openai", 429, {"error": {"message": "slow"}}, {"Retry-After": "2"})
    assert isinstance(error, RateLimited)
    assert error.retry_after == 2.0
    assert error.retryable


def test_backoff_grows_and_is_capped():
    """Backoff doubles per attempt, is jittered, honours retry-after, and never passes the cap."""
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    assert 0.5 <= policy.delay(0) <= 1.0
    assert 2.0 <= policy.delay(2) <= 4.0
    assert policy.delay(10) <= 5.0
    assert policy.delay(0, retry_after=3.0) == 3.0
    assert policy.delay(0, retry_after=60.0) == 5.0


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("anthropic:claude-sonnet-4-5", ModelName("anthropic", "claude-sonnet-4-5")),
        ("openai:gpt-5-mini", ModelName("openai", "gpt-5-mini")),
        ("chat:qwen3-coder:30b", ModelName("chat", "qwen3-coder:30b")),
        ("claude-opus-4-1", ModelName("anthropic", "claude-opus-4-1")),
        ("gpt-5.5", ModelName("openai", "gpt-5.5")),
    ],
)
def test_model_names(model, expected):
    """Models are named provider:model; bare Claude and GPT names are understood."""
    assert parse_model(model) == expected


@pytest.mark.parametrize("model", ["mistral:large", "llama3", "anthropic:"])
def test_bad_model_names_say_what_to_write(model):
    """An unknown provider or a bare unknown model is a clear configuration error."""
    with pytest.raises(ConfigError, match=r"provider|model"):
        parse_model(model)


def test_window_sources_in_order():
    """An explicit setting beats the server's listing, which beats the table, which beats the
    fallback; only the fallback is unresolved."""
    name = ModelName("chat", "qwen3")
    listing = {"data": [{"id": "qwen3", "object": "model", "max_model_len": 32_768}]}
    assert resolve(name, {"chat:qwen3": 16_000}, listing).tokens == 16_000
    assert resolve(name, {}, listing).tokens == 32_768
    assert resolve(ModelName("anthropic", "claude-sonnet-4-5"), {}).tokens == 200_000
    fallback = resolve(name, {})
    assert (fallback.tokens, fallback.resolved) == (FALLBACK, False)
    assert resolve(name, {}, listing).resolved


def test_sse_events_and_data_lines():
    """Named events, multi-line data, comments and CRLF endings parse into events."""
    parser = SSEParser()
    raw = b': ping\r\nevent: message_start\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata: x\n\n'
    assert parser.feed(raw) == [
        ServerEvent("message_start", '{"a":\n1}'),
        ServerEvent("message", "x"),
    ]


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "delta", "done"]),
            st.text(
                alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n")
            ),
        ),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_sse_parsing_does_not_depend_on_chunking(events, cuts, newline):
    """However the transport splits the bytes (even inside a character), the same events come
    out."""
    wire = "".join(
        (f"event: {name}{newline}" if name else "") + f"data: {data}{newline}{newline}"
        for name, data in events
    ).encode()
    whole = SSEParser().feed(wire)
    parser = SSEParser()
    pieces: list[ServerEvent] = []
    position = 0
    for cut in cuts:
        pieces += parser.feed(wire[position : position + cut])
        position += cut
    pieces += parser.feed(wire[position:])
    pieces += parser.close()
    assert pieces == whole
    assert [e.data for e in whole] == [data for _, data in events]
