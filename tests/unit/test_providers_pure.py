"""The pure parts of the provider layer: SSE parsing, error classes, model names, windows,
reading tool arguments and event data, and the call bounds' settings."""

from __future__ import annotations

import email.utils
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from condensate.errors import (
    AuthenticationFailed,
    ConfigError,
    ContextWindowExceeded,
    MalformedRequest,
    MalformedResponse,
    ProviderError,
    ProviderOverloaded,
    ProviderUnavailable,
    RateLimited,
)
from condensate.providers import ModelName, billed_model, parse_model
from condensate.providers._http import RetryPolicy, Timeouts, classify, may_retry, retry_after
from condensate.providers._parse import QUOTED, Arguments, arguments, event_data
from condensate.providers.sse import ServerEvent, SSEParser
from condensate.providers.windows import FALLBACK, resolve
from condensate.settings import Settings, load_settings

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
            ProviderOverloaded,
        ),
        (
            200,  # an error event inside a stream
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ProviderOverloaded,
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
    assert policy.delay(0, retry_after=60.0) == 60.0  # the provider's word, up to a minute
    assert policy.delay(0, retry_after=61.0) <= 1.0  # past a minute: the backoff
    assert policy.delay(0, retry_after=0.0) <= 1.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_as_the_official_sdks_read_it(
    headers: dict[str, str], seconds: float | None
) -> None:
    """retry-after-ms first (milliseconds), then retry-after in seconds (floats too)."""
    assert retry_after(headers) == seconds


def test_retry_after_may_be_an_http_date() -> None:
    """A retry-after that is an HTTP date is the seconds until then."""
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    waited = retry_after({"retry-after": when})
    assert waited is not None
    assert 28 <= waited <= 31


def test_x_should_retry_overrides_the_errors_kind() -> None:
    """A 400 the provider says to retry is retried; a 529 it says not to retry is not."""
    told = classify("anthropic", 400, {"error": {"message": "m"}}, {"X-Should-Retry": "true"})
    assert may_retry(told)
    refused = classify("anthropic", 529, {"error": {"message": "m"}}, {"x-should-retry": "false"})
    assert not may_retry(refused)
    plain = classify("anthropic", 529, {"error": {"message": "m"}})
    assert may_retry(plain)
    assert classify("openai", 503, {}, {"retry-after-ms": "1500"}).retry_after == 1.5


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


SONNET = "anthropic:claude-sonnet-4-5"


@pytest.mark.parametrize(
    ("called", "thread", "shown"),
    [
        ("", "anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
        ("claude-sonnet-4-5", "anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", SONNET, SONNET),
        ("gpt-5-2025-08-07", "openai:gpt-5", "openai:gpt-5"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("qwen3-coder:30b", "chat:qwen3-coder:30b", "chat:qwen3-coder:30b"),
        ("claude-haiku-4-5", "anthropic:claude-sonnet-4-5", "anthropic:claude-haiku-4-5"),
        ("gpt-5-mini", "openai:gpt-5", "openai:gpt-5-mini"),
        ("anthropic:claude-haiku-4-5", "openai:gpt-5", "anthropic:claude-haiku-4-5"),
    ],
)
def test_a_call_is_billed_under_one_spelling_of_its_model(called, thread, shown):
    """A call on the thread's model (unnamed, named bare, or as a dated snapshot) is shown
    as the thread names its model; a call on another model as provider:name."""
    assert billed_model(called, thread) == shown


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


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-opus-5-5", 1_000_000),
        ("claude-sonnet-5-5", 1_000_000),
        ("claude-haiku-5-5", 1_000_000),
        ("claude-fable-5-2", 1_000_000),
        ("gpt-6.2-sol", 922_000),
        ("gpt-6.1-terra", 922_000),
        ("gpt-5.6-sol", 922_000),
        ("gpt-5.5", 922_000),
        ("gpt-5-mini", 400_000),
    ],
)
def test_todays_models_have_the_window_their_api_accepts(model, window):
    """Claude 5.x models take 1,000,000 tokens; OpenAI's GPT-5.5 and later a 922,000-token
    prompt (1,050,000 less 128,000 of output), not the Codex catalog's smaller figures."""
    name = (
        ModelName("anthropic", model) if model.startswith("claude") else ModelName("openai", model)
    )
    known = resolve(name, {})
    assert (known.tokens, known.resolved) == (window, True)


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


@pytest.mark.parametrize(
    ("raw", "cut", "value", "problem"),
    [
        ('{"path": "a.txt"}', False, {"path": "a.txt"}, None),
        ("", False, {}, None),
        ("  ", True, {}, None),
        (
            "{'path': 'a.txt'}",
            False,
            {},
            "The arguments of read were not valid JSON (Expecting property name enclosed in "
            "double quotes at 1): {'path': 'a.txt'}",
        ),
        (
            '{"path": "a.t',
            True,
            {},
            "The arguments of read were cut off at max_tokens before they were complete: "
            '{"path": "a.t',
        ),
        ("[1, 2]", False, {}, "The arguments of read were JSON but not an object: [1, 2]"),
        ("null", False, {}, "The arguments of read were JSON but not an object: null"),
    ],
)
def test_tool_arguments_are_read_or_named_as_unreadable(raw, cut, value, problem):
    """Arguments text is an object, or no arguments with a sentence naming why it could not
    be read: not JSON, cut off at max_tokens, or JSON that is not an object."""
    assert arguments("read", raw, cut=cut) == Arguments(value, problem)


def test_a_long_unreadable_argument_text_is_quoted_by_its_start():
    """Only the start of long unreadable arguments is quoted, marked as cut."""
    problem = arguments("write", "{" + "x" * 1_000, cut=False).problem
    assert problem is not None
    assert problem.endswith("{" + "x" * (QUOTED - 1) + "…")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("<html>", "a stream event's data line is not JSON: '<html>'"),
        ("[1]", "a stream event is not a JSON object: '[1]'"),
    ],
)
def test_event_data_that_is_no_json_object_is_malformed(data, expected):
    """A data line that is not a JSON object is a MalformedResponse naming the provider."""
    with pytest.raises(MalformedResponse) as caught:
        event_data("chat", data)
    assert str(caught.value) == f"The chat reply could not be read: {expected}."
    assert caught.value.retryable


def test_malformed_response_is_a_retryable_provider_error():
    """MalformedResponse sits under ProviderError with its own code and is retryable."""
    error = MalformedResponse("x", provider="openai")
    assert isinstance(error, ProviderError)
    assert (error.code, error.retryable, error.provider) == ("malformed-response", True, "openai")


def test_call_bounds_come_from_their_settings(monkeypatch):
    """CONDENSATE_PROVIDER_TIMEOUT_S and CONDENSATE_PROVIDER_READ_TIMEOUT_S reach the clients'
    timeouts; the defaults are 600 s and 120 s."""
    assert Settings().providers().timeouts == Timeouts(call=600, read=120)
    monkeypatch.setenv("CONDENSATE_PROVIDER_TIMEOUT_S", "90")
    monkeypatch.setenv("CONDENSATE_PROVIDER_READ_TIMEOUT_S", "2.5")
    timeouts = load_settings().providers().timeouts
    assert (timeouts.call, timeouts.read) == (90, 2.5)
    assert timeouts.client_timeout().sock_read == 2.5


def test_a_call_bound_that_is_not_positive_names_its_variable(monkeypatch):
    """A zero deadline is refused at start, naming the variable."""
    monkeypatch.setenv("CONDENSATE_PROVIDER_TIMEOUT_S", "0")
    with pytest.raises(ConfigError, match="CONDENSATE_PROVIDER_TIMEOUT_S"):
        load_settings()
