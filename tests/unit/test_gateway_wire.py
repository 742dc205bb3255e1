"""What the model gateway reads and writes on the wire, and the passes it checks (spec:
"Model gateway"; design.md §6): pure functions, no sockets."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from condensate.core.tokens import MESSAGE_OVERHEAD
from condensate.engine.registry import installed
from condensate.gateway.dialects import Api, anthropic, dialect, openai
from condensate.gateway.passes import Passes, PassRefused
from condensate.gateway.wire import (
    HELD_MARK,
    ReplyUsage,
    RequestShape,
    SessionMeter,
    SseSplitter,
    credential_of,
    held_text,
)
from condensate.runtime.gateway_port import NewestResult, Notice, ResetCut


@dataclass(frozen=True)
class Words:
    """A counter whose counts a test can read off: one token a word."""

    name: str = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def cost(text: str) -> int:
    """What Words counts for one message holding ``text``."""
    return len(text.split()) + MESSAGE_OVERHEAD


def shape(*messages: str, system: str = "you are a careful agent") -> RequestShape:
    body = {"model": "m", "system": system, "messages": [user(m) for m in messages]}
    return anthropic.shape(body)


# -- credentials and sessions --------------------------------------------------------------------


def test_credential_is_the_api_key_when_there_is_one():
    """Claude Code's x-api-key is the pass, even with a bearer token beside it."""
    headers = {"x-api-key": " cgw1.t.s.m ", "Authorization": "Bearer other"}
    assert credential_of(headers) == "cgw1.t.s.m"


def test_credential_is_the_bearer_token_without_an_api_key():
    """Without x-api-key the pass is the bearer token, stripped."""
    assert credential_of({"Authorization": "Bearer  cgw1.t.s.m "}) == "cgw1.t.s.m"


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
def test_the_bearer_scheme_is_case_insensitive(scheme: str):
    """'Bearer' is matched in any case."""
    assert credential_of({"Authorization": f"{scheme} tok"}) == "tok"


def test_an_empty_api_key_falls_back_to_the_bearer_token():
    """An empty x-api-key is no key."""
    assert credential_of({"x-api-key": "", "Authorization": "Bearer tok"}) == "tok"


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer"}]
)
def test_no_credential_is_empty(headers: dict[str, str]):
    """No key and no bearer token is the empty credential."""
    assert credential_of(headers) == ""


@pytest.mark.parametrize(
    ("engine", "header"), [("claude", "x-claude-code-session-id"), ("codex", "thread-id")]
)
def test_a_request_names_its_session_in_the_header_its_engine_declares(engine, header):
    """Claude Code names its session in x-claude-code-session-id and Codex its thread in
    thread-id: each engine declares its header, and the passes read a thread's from it."""
    assert installed()[engine].session_header == header
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    passes.session_headers["t-1"] = header
    assert passes.session_named(grant.credential, {header: " abc "}) == "abc"


def test_no_session_header_is_none():
    """A request naming no session has None, an empty header is no name, and another
    engine's header names nothing for this thread."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    passes.session_headers["t-1"] = "thread-id"
    assert passes.session_named(grant.credential, {"x-api-key": "k"}) is None
    assert passes.session_named(grant.credential, {"thread-id": ""}) is None
    assert passes.session_named(grant.credential, {"x-claude-code-session-id": "s"}) is None
    assert passes.session_named("garbage", {"thread-id": "th_1"}) is None


# -- error bodies --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, "authentication_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "api_error"),
    ],
)
def test_anthropic_errors_have_anthropics_shape(status: int, kind: str):
    """An Anthropic error is {"type": "error", "error": {type, message}}, its type by
    status, and the code in the message (the shape has no code field)."""
    body = anthropic.error_body(status, "stale-session", "Session s is retired.")
    assert body == {
        "type": "error",
        "error": {"type": kind, "message": "Session s is retired. (stale-session)"},
    }


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "invalid_request_error"), (502, "server_error")]
)
def test_openai_errors_have_openais_shape(status: int, kind: str):
    """An OpenAI error is {"error": {message, type, param, code}}."""
    body = openai.error_body(status, "no-gateway-pass", "No pass.")
    assert body == {
        "error": {"message": "No pass.", "type": kind, "param": None, "code": "no-gateway-pass"}
    }


# -- request shapes ------------------------------------------------------------------------------


def test_an_anthropic_request_is_system_and_tools_then_messages():
    """The fixed part is the system prompt and tool schemas; each message is one entry."""
    body: dict[str, Any] = {
        "model": "claude-x",
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "read", "description": "reads a file"}],
        "messages": [{"content": "hi", "role": "user"}, {"role": "assistant", "content": "yo"}],
        "stream": True,
    }
    got = anthropic.shape(body)
    assert got.model == "claude-x"
    assert got.fixed.split("\n") == ["be brief", "read", "reads a file"]
    assert got.messages == tuple(body["messages"])
    assert got.stream


def test_a_responses_request_is_instructions_and_tools_then_input_items():
    """On the Responses API the fixed part is the instructions and tools; the input items
    are the conversation."""
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    body = {
        "model": "gpt-x",
        "instructions": "be brief",
        "tools": [{"type": "function", "name": "shell"}],
        "input": items,
        "system": "ignored on this API",
    }
    got = openai.shape(body)
    assert got.fixed.split("\n") == ["be brief", "shell"]  # "type" is syntax, not text
    assert got.messages == tuple(items)
    assert not got.stream


def test_a_string_input_is_one_user_message():
    """A Responses request whose input is a string holds one user message."""
    got = openai.shape({"model": "gpt-x", "input": "hello there"})
    assert got.messages == ({"role": "user", "content": "hello there"},)


def test_a_request_without_a_conversation_has_no_messages():
    """Missing or malformed conversations are empty, not errors."""
    assert anthropic.shape({"messages": "nope"}).messages == ()
    assert openai.shape({}).messages == ()


def test_codexs_leading_tools_and_developer_messages_are_its_fixed_part():
    """Codex opens a request with its developer messages (and, on its default model, its
    tools as an ``additional_tools`` item): they are the fixed part the baseline measures,
    not the conversation."""
    tools = {"type": "additional_tools", "role": "developer", "tools": [{"name": "exec"}]}
    developer = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "be Codex"}],
    }
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    shape = openai.shape({"input": [tools, developer, user, developer]})
    assert shape.messages == (user, developer)
    assert "be Codex" in shape.fixed
    assert "exec" in shape.fixed


def test_equal_messages_are_equal_whatever_their_key_order():
    """Key order does not make two messages differ (the meter compares them)."""
    one = anthropic.shape({"messages": [{"role": "user", "content": "x"}]})
    two = anthropic.shape({"messages": [{"content": "x", "role": "user"}]})
    assert one.messages == two.messages


# -- the session meter ---------------------------------------------------------------------------


def test_a_first_request_is_counted_whole():
    """A session's first request is the fixed part plus every message, counted locally."""
    meter = SessionMeter(Words())
    size, _ = meter.measure(shape("one two", "three"))
    assert size == 5 + cost("one two") + cost("three")


def test_a_first_request_with_a_baseline_uses_it_as_its_fixed_part():
    """A baseline given for a first request stands in for the local count of its fixed
    part."""
    meter = SessionMeter(Words())
    size, _ = meter.measure(shape("one two"), baseline=1_000)
    assert size == 1_000 + cost("one two")


def test_a_request_that_extends_the_last_is_its_count_plus_the_new_messages():
    """Once the provider counted a request, the next one that appends to it is that count
    plus a local count of what was appended."""
    meter = SessionMeter(Words())
    _, sent = meter.measure(shape("one two", "three"))
    meter.answered(sent, 900)
    size, _ = meter.measure(shape("one two", "three", "four five six"))
    assert size == 900 + cost("four five six")


def test_a_request_equal_to_the_last_is_its_count():
    """A request that appends nothing is the provider's count of the last one."""
    meter = SessionMeter(Words())
    _, sent = meter.measure(shape("one two"))
    meter.answered(sent, 321)
    assert meter.measure(shape("one two"))[0] == 321


def test_a_request_that_rewrites_history_is_counted_whole():
    """A request whose earlier message changed does not extend the last: it is counted
    whole, not as the anchor plus a delta."""
    meter = SessionMeter(Words())
    _, sent = meter.measure(shape("one two", "three"))
    meter.answered(sent, 900)
    size, _ = meter.measure(shape("[receipt]", "three", "four"))
    assert size == 5 + cost("[receipt]") + cost("three") + cost("four")


def test_a_shorter_request_is_counted_whole():
    """A request holding less than the last (a compacted history) is counted whole."""
    meter = SessionMeter(Words())
    _, sent = meter.measure(shape("one two", "three"))
    meter.answered(sent, 900)
    assert meter.measure(shape("one two"))[0] == 5 + cost("one two")


def test_a_request_before_any_reply_is_counted_whole():
    """Without a provider count yet, a second request is counted whole too."""
    meter = SessionMeter(Words())
    meter.measure(shape("one"))
    assert meter.measure(shape("one", "two"))[0] == 5 + cost("one") + cost("two")


def test_an_answer_anchors_its_own_request_even_after_a_later_one_was_measured():
    """The anchor is the request the reply answered, not the one measured last: a request
    extending it is its count plus what was appended."""
    meter = SessionMeter(Words())
    _, first = meter.measure(shape("one two"))
    meter.measure(shape("side question"))
    meter.answered(first, 600)
    assert meter.measure(shape("one two", "three"))[0] == 600 + cost("three")


@dataclass
class Recording:
    """Words, remembering every text it was asked to count."""

    name: str = "recording"
    texts: list[str] = field(default_factory=list)

    def count(self, text: str) -> int:
        self.texts.append(text)
        return len(text.split())


def test_only_new_messages_are_counted_locally():
    """A request repeating the last one's messages counts only those it appends (and the
    fixed part only on the session's first request)."""
    counter = Recording()
    meter = SessionMeter(counter)
    _, sent = meter.measure(shape("one two", "three"))
    meter.answered(sent, 900)
    counter.texts.clear()
    meter.measure(shape("one two", "three", "four five"))
    assert counter.texts == ["four five"]


def test_the_baseline_is_the_count_less_the_conversation():
    """A first request's baseline is the provider's count less the conversation's local
    count."""
    meter = SessionMeter(Words())
    _, sent = meter.measure(shape("one two", system="a b c d e f g h i j"))
    assert meter.baseline(cost("one two") + 14, sent) == 14


def test_the_baseline_is_at_most_twice_the_local_fixed_count():
    """A count far above the request (it holds what no request shows) gives twice the
    local count of the fixed part."""
    meter = SessionMeter(Words())
    _, sent = meter.measure(shape("one two", system="a b c d e f g h i j"))
    assert meter.baseline(cost("one two") + 1_000, sent) == 20


def test_the_baseline_is_at_least_half_the_local_fixed_count():
    """A count below the conversation's gives half the local count of the fixed part."""
    meter = SessionMeter(Words())
    _, sent = meter.measure(shape("one two", system="a b c d e f g h i j"))
    assert meter.baseline(1, sent) == 5


# -- reply usage ---------------------------------------------------------------------------------


def done(usage: ReplyUsage) -> bool:
    """Whether the call can be logged (read through a call: mypy would keep a narrowed
    attribute across the reads that change it)."""
    return usage.complete


def test_anthropic_stream_usage_is_complete_at_message_delta():
    """message_start carries the prompt's counts, message_delta the output; the call is
    complete once the delta arrived."""
    usage = ReplyUsage()
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "model": "claude-x",
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 1_000,
                "cache_creation_input_tokens": 50,
                "output_tokens": 1,
            },
        },
    }
    anthropic.read_event(usage, start)
    assert usage.seen
    assert not done(usage)
    anthropic.read_event(usage, {"type": "content_block_delta", "delta": {"text": "x"}})
    assert not done(usage)
    anthropic.read_event(usage, {"type": "message_delta", "usage": {"output_tokens": 77}})
    assert done(usage)
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (10, 1_000, 50, 77)
    assert usage.prompt == 1_060
    assert (usage.message_id, usage.model) == ("msg_1", "claude-x")


def test_anthropic_message_stop_completes_a_reply_whose_counts_were_seen():
    """message_stop completes the call when a count arrived before it."""
    usage = ReplyUsage()
    anthropic.read_event(
        usage,
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5}}},
    )
    anthropic.read_event(usage, {"type": "message_stop"})
    assert usage.complete
    assert usage.prompt == 5


def test_anthropic_message_stop_without_counts_is_not_complete():
    """message_stop with no count seen leaves the call incomplete (nothing to log)."""
    usage = ReplyUsage()
    anthropic.read_event(usage, {"type": "message_start", "message": {"id": "m"}})
    anthropic.read_event(usage, {"type": "message_stop"})
    assert not usage.seen
    assert not usage.complete


def test_responses_completed_counts_the_uncached_part_as_input():
    """OpenAI counts cached tokens inside input_tokens: input is the uncached rest and
    cache_read the cached part, so the prompt is input_tokens."""
    usage = ReplyUsage()
    openai.read_event(usage, {"type": "response.created", "response": {"id": "r"}})
    assert not done(usage)
    completed = {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "model": "gpt-x",
            "usage": {
                "input_tokens": 1_000,
                "input_tokens_details": {"cached_tokens": 800},
                "output_tokens": 20,
            },
        },
    }
    openai.read_event(usage, completed)
    assert usage.complete
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (200, 800, 0, 20)
    assert usage.prompt == 1_000
    assert (usage.message_id, usage.model) == ("resp_1", "gpt-x")


def test_responses_completed_without_usage_is_not_complete():
    """A completed event without counts is no count."""
    usage = ReplyUsage()
    openai.read_event(usage, {"type": "response.completed", "response": {"id": "r"}})
    assert not usage.complete


def test_a_whole_anthropic_body_is_read_at_once():
    """A non-streamed Anthropic reply carries its whole usage: complete at once."""
    usage = ReplyUsage()
    body = {
        "id": "msg_2",
        "model": "claude-x",
        "usage": {"input_tokens": 3, "cache_read_input_tokens": 7, "output_tokens": 2},
    }
    anthropic.read_body(usage, body)
    assert usage.complete
    assert (usage.prompt, usage.output, usage.message_id) == (10, 2, "msg_2")


def test_a_whole_responses_body_is_read_at_once():
    """A non-streamed Responses reply: input less cached, complete at once."""
    usage = ReplyUsage()
    body = {
        "id": "resp_2",
        "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 30}},
    }
    openai.read_body(usage, body)
    assert usage.complete
    assert (usage.input, usage.cache_read, usage.prompt) == (20, 30, 50)


def test_a_body_that_is_not_an_object_is_ignored():
    """A list or a string body leaves the usage unseen."""
    usage = ReplyUsage()
    anthropic.read_body(usage, ["no"])
    anthropic.read_event(usage, "no")
    assert not usage.seen
    assert not usage.complete


# -- SSE splitting -------------------------------------------------------------------------------


def test_an_event_split_across_chunks_comes_out_once_complete():
    """A partial event waits for the chunk that completes it."""
    splitter = SseSplitter()
    assert splitter.feed(b'event: ping\ndata: {"a"') == []
    assert splitter.feed(b": 1}\n") == []
    assert splitter.feed(b'\ndata: {"b": 2}\n\n') == [{"a": 1}, {"b": 2}]
    assert splitter.buffer == b""


def test_every_event_a_chunk_completes_comes_out_in_order():
    """One chunk may complete several events."""
    chunk = b"".join(f'data: {{"n": {n}}}\n\n'.encode() for n in range(3))
    assert SseSplitter().feed(chunk) == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_crlf_line_endings_split_events():
    """Events whose lines end in CRLF are split like LF ones."""
    stream = b'event: a\r\ndata: {"a": 1}\r\n\r\nevent: b\r\ndata: {"b": 2}\r\n\r\n'
    assert SseSplitter().feed(stream) == [{"a": 1}, {"b": 2}]


def test_crlf_split_between_its_cr_and_lf_still_splits_events():
    """A chunk boundary between the CR and the LF of a CRLF loses no event (a stream is cut
    into chunks wherever the network cuts it)."""
    stream = b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\r\n\r\n'
    cut = stream.index(b"\r\n\r\n") + 3  # after the second CR
    splitter = SseSplitter()
    events = splitter.feed(stream[:cut]) + splitter.feed(stream[cut:])
    assert events == [{"a": 1}, {"b": 2}]


def test_crlf_fed_byte_by_byte_still_splits_events():
    """Fed one byte at a time, a CRLF stream gives the same events."""
    stream = b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\r\n\r\n'
    splitter = SseSplitter()
    events: list[Any] = []
    for i in range(len(stream)):
        events += splitter.feed(stream[i : i + 1])
    assert events == [{"a": 1}, {"b": 2}]


def test_several_data_lines_are_one_json_text():
    """An event's data lines are joined with newlines before parsing."""
    assert SseSplitter().feed(b'data: {"a":\ndata: [1,\ndata: 2]}\n\n') == [{"a": [1, 2]}]


def test_data_that_is_not_json_is_none():
    """An event whose data is not JSON comes out as None (e.g. OpenAI's [DONE])."""
    assert SseSplitter().feed(b"data: [DONE]\n\n") == [None]


def test_events_without_data_are_skipped():
    """Comments and events without data lines give nothing."""
    assert SseSplitter().feed(b": keep-alive\n\nevent: ping\n\n") == []


# -- Condensate's own replies ----------------------------------------------------------------


def events_of(stream: bytes) -> list[dict[str, Any]]:
    events = SseSplitter().feed(stream)
    assert all(isinstance(e, dict) for e in events)
    return events


def test_held_text_starts_with_the_mark():
    """A reply the gateway wrote begins with HELD_MARK, so no engine logs it as the
    model's."""
    assert held_text("windows paused").startswith(HELD_MARK)
    assert held_text("windows paused").endswith("windows paused")


def test_held_anthropic_stream_is_anthropics_event_sequence():
    """The Anthropic held stream is message_start, one text block, message_delta ending
    the turn, message_stop."""
    events = events_of(anthropic.held_stream("claude-x", "held", "msg_h"))
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0]["message"]["id"] == "msg_h"
    assert events[0]["message"]["model"] == "claude-x"
    assert events[4]["delta"]["stop_reason"] == "end_turn"


def test_held_anthropic_stream_names_its_sse_events():
    """Each SSE event's name is its data's type (Anthropic's SDKs read the name)."""
    stream = anthropic.held_stream("claude-x", "held", "msg_h").decode()
    blocks = [b for b in stream.split("\n\n") if b]
    for block in blocks:
        name, data = block.split("\n")
        assert name == f"event: {json.loads(data[len('data: ') :])['type']}"


def test_held_anthropic_stream_carries_the_text_and_no_tool_call():
    """The text the stream carries is the one given; no block is a tool call."""
    text = held_text("over the ceiling")
    events = events_of(anthropic.held_stream("claude-x", text, "msg_h"))
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(deltas) == text
    blocks = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in blocks] == ["text"]


def test_held_responses_stream_is_the_responses_event_sequence():
    """The Responses held stream runs from response.created to response.completed, one
    message item, numbered in order."""
    events = events_of(openai.held_stream("gpt-x", "held", "resp_h"))
    assert [e["type"] for e in events] == [
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
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["response"]["status"] == "completed"
    assert events[-1]["response"]["id"] == "resp_h"


def test_held_responses_stream_carries_the_text_and_no_tool_call():
    """The text is the one given; the only output item is an assistant message."""
    text = held_text("paused")
    events = events_of(openai.held_stream("gpt-x", text, "resp_h"))
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == text
    done = [e["text"] for e in events if e["type"] == "response.output_text.done"]
    assert done == [text]
    output = events[-1]["response"]["output"]
    assert [(o["type"], o["role"]) for o in output] == [("message", "assistant")]
    assert output[0]["content"][0]["text"] == text


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_held_stream_reads_as_zero_usage(api: Api):
    """ReplyUsage reads a complete call of zero tokens from a held stream."""
    usage = ReplyUsage()
    for event in events_of(dialect(api).held_stream("m", "held", "r1")):
        dialect(api).read_event(usage, event)
    assert usage.complete
    assert (usage.prompt, usage.output) == (0, 0)
    assert usage.message_id == "r1"


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_held_reply_reads_as_zero_usage(api: Api):
    """ReplyUsage reads a complete call of zero tokens from a held whole reply."""
    usage = ReplyUsage()
    dialect(api).read_body(usage, dialect(api).held_reply("m", "held", "r1"))
    assert usage.complete
    assert (usage.prompt, usage.output, usage.message_id) == (0, 0, "r1")


def test_held_anthropic_reply_is_one_text_block_ending_the_turn():
    """The whole Anthropic reply is an assistant message of one text block, end_turn."""
    reply = anthropic.held_reply("claude-x", "held", "msg_h")
    assert (reply["type"], reply["role"], reply["stop_reason"]) == (
        "message",
        "assistant",
        "end_turn",
    )
    assert reply["content"] == [{"type": "text", "text": "held"}]


def test_held_responses_reply_is_one_assistant_message():
    """The whole Responses reply is completed, with one assistant message and no call."""
    reply = openai.held_reply("gpt-x", "held", "resp_h")
    assert reply["status"] == "completed"
    assert [o["type"] for o in reply["output"]] == ["message"]
    assert reply["output"][0]["content"][0]["text"] == "held"


# -- tool results and receipts -------------------------------------------------------------------


def tool_result(call_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def anthropic_body() -> dict[str, Any]:
    return {
        "model": "claude-x",
        "messages": [
            {"role": "user", "content": "brief"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "read"}]},
            {"role": "user", "content": [tool_result("a", "big file A")]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "b", "name": "read"},
                    {"type": "tool_use", "id": "c", "name": "read"},
                ],
            },
            {
                "role": "user",
                "content": [
                    tool_result("b", [{"type": "text", "text": "big file B"}]),
                    tool_result("c", "small C"),
                    {"type": "text", "text": "go on"},
                ],
            },
        ],
    }


def responses_body() -> dict[str, Any]:
    return {
        "model": "gpt-x",
        "input": [
            {"type": "message", "role": "user", "content": "brief"},
            {"type": "function_call", "call_id": "a", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "big output A"},
            {"type": "custom_tool_call", "call_id": "b", "name": "apply_patch", "input": "x"},
            {"type": "custom_tool_call_output", "call_id": "b", "output": "patched"},
        ],
    }


def test_anthropic_result_ids_are_the_tool_results_in_order():
    """The ids are the tool_result blocks' tool_use_id, in order; tool_use blocks are
    not results."""
    assert anthropic.result_ids(anthropic_body()) == ["a", "b", "c"]


def test_responses_result_ids_are_the_output_items_call_ids():
    """On the Responses API every *_output item is a result; calls are not."""
    assert openai.result_ids(responses_body()) == ["a", "b"]


def test_result_ids_of_a_request_without_results_are_empty():
    """No messages, string content, or results without ids give no ids."""
    assert anthropic.result_ids({}) == []
    assert anthropic.result_ids({"messages": [{"role": "user", "content": "hi"}]}) == []
    assert anthropic.result_ids({"messages": [{"content": [tool_result("", "x")]}]}) == []
    assert openai.result_ids({"input": "just text"}) == []


def test_anthropic_receipts_replace_exactly_the_results_that_have_one():
    """A result whose call has a receipt carries it; the others are unchanged."""
    body = anthropic_body()
    out, replaced = anthropic.with_receipts(body, {"a": "[receipt a]", "b": "[receipt b]"})
    assert replaced == 2
    assert out["messages"][2]["content"] == [tool_result("a", "[receipt a]")]
    last = out["messages"][4]["content"]
    assert last[0] == tool_result("b", "[receipt b]")
    assert last[1] is body["messages"][4]["content"][1]
    assert last[2] is body["messages"][4]["content"][2]
    assert out["model"] == "claude-x"


def test_anthropic_messages_without_a_receipt_are_the_same_objects():
    """Messages holding no replaced result are passed on as the very same objects."""
    body = anthropic_body()
    out, _ = anthropic.with_receipts(body, {"a": "[receipt a]"})
    for i in (0, 1, 3, 4):
        assert out["messages"][i] is body["messages"][i]
    assert out["messages"][2] is not body["messages"][2]


def test_receipts_leave_the_request_they_were_given_unchanged():
    """The input mapping, its messages and its blocks are not modified."""
    body = anthropic_body()
    before = json.dumps(body, sort_keys=True)
    anthropic.with_receipts(body, {"a": "[receipt a]", "b": "[receipt b]"})
    assert json.dumps(body, sort_keys=True) == before
    items = responses_body()
    before = json.dumps(items, sort_keys=True)
    openai.with_receipts(items, {"a": "[receipt a]"})
    assert json.dumps(items, sort_keys=True) == before


def test_responses_receipts_replace_the_output_of_items_that_have_one():
    """A Responses result's output becomes its receipt; other items are the same
    objects."""
    body = responses_body()
    out, replaced = openai.with_receipts(body, {"b": "[receipt b]"})
    assert replaced == 1
    assert out["input"][4] == {
        "type": "custom_tool_call_output",
        "call_id": "b",
        "output": "[receipt b]",
    }
    for i in range(4):
        assert out["input"][i] is body["input"][i]


def test_receipts_for_calls_not_in_the_request_change_nothing():
    """A receipt whose call the request does not carry replaces nothing."""
    body = anthropic_body()
    out, replaced = anthropic.with_receipts(body, {"zzz": "[receipt]"})
    assert replaced == 0
    assert out == body
    assert all(o is m for o, m in zip(out["messages"], body["messages"], strict=True))


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_no_receipts_do_nothing(api: Api):
    """With no receipts the request comes back equal, nothing counted."""
    body = anthropic_body() if api == "anthropic" else responses_body()
    out, replaced = dialect(api).with_receipts(body, {})
    assert replaced == 0
    assert out == body


def test_a_result_already_its_receipt_is_not_counted_again():
    """A result that already carries its receipt (an earlier request's) is not replaced
    again, and its message stays the same object."""
    body, _ = anthropic.with_receipts(anthropic_body(), {"a": "[receipt a]"})
    out, replaced = anthropic.with_receipts(body, {"a": "[receipt a]"})
    assert replaced == 0
    assert out["messages"][2] is body["messages"][2]
    items, _ = openai.with_receipts(responses_body(), {"a": "[receipt a]"})
    again, replaced = openai.with_receipts(items, {"a": "[receipt a]"})
    assert replaced == 0
    assert again["input"][2] is items["input"][2]


def test_receipts_leave_a_string_input_a_string():
    """A Responses request whose input is a string holds no results: with receipts to apply
    its input stays the string it was (not a list of its characters, which the meter would
    then count as one message a character)."""
    body = {"model": "gpt-x", "input": "hello there"}
    out, replaced = openai.with_receipts(body, {"a": "[receipt a]"})
    assert replaced == 0
    assert out["input"] == "hello there"
    assert openai.shape(out) == openai.shape(body)


# -- gateway passes --------------------------------------------------------------------------


def refusal(passes: Passes, credential: str, engine_session: str | None = None) -> str:
    """The code ``check`` refuses ``credential`` with."""
    with pytest.raises(PassRefused) as refused:
        passes.check(credential, "anthropic", engine_session)
    return refused.value.code


def test_an_issued_pass_is_accepted():
    """check accepts the credential issue gave, naming its thread and session."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    checked = passes.check(grant.credential, "anthropic")
    assert (checked.thread_id, checked.session) == ("t-1", grant.session)


def test_issuing_again_retires_the_earlier_pass():
    """The thread's next pass makes the one before stale; the new one passes."""
    passes = Passes()
    first = passes.issue("t-1", "anthropic")
    second = passes.issue("t-1", "anthropic")
    assert first.session != second.session
    assert refusal(passes, first.credential) == "stale-session"
    assert passes.check(second.credential, "anthropic").session == second.session


def test_passes_of_other_threads_are_independent():
    """Issuing a pass for one thread leaves another thread's pass current."""
    passes = Passes()
    one = passes.issue("t-1", "anthropic")
    passes.issue("t-2", "anthropic")
    assert passes.check(one.credential, "anthropic").thread_id == "t-1"


def test_a_retired_thread_pass_is_stale():
    """After retire, the thread's pass is refused."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    passes.retire("t-1")
    assert refusal(passes, grant.credential) == "stale-session"


def test_a_forged_mac_is_invalid():
    """A pass whose signature does not match is refused as invalid."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    forged = grant.credential.rsplit(".", 1)[0] + "." + "0" * 40
    assert refusal(passes, forged) == "invalid-gateway-pass"


def test_a_pass_naming_another_thread_is_invalid():
    """Changing the thread a pass names breaks its signature."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    passes.issue("t-2", "anthropic")
    assert refusal(passes, grant.credential.replace("t-1", "t-2")) == "invalid-gateway-pass"


@pytest.mark.parametrize(
    "credential", ["", "sk-ant-api03-xyz", "cgw1.t-1.s", "cgw2.t-1.s.m", "cgw1.a.b.c.d"]
)
def test_garbage_is_no_pass(credential: str):
    """A credential that is not shaped like a pass is refused as no pass."""
    assert refusal(Passes(), credential) == "no-gateway-pass"


def test_a_pass_from_another_daemon_is_refused():
    """Another secret (another daemon, or this one before a restart) did not sign it."""
    grant = Passes().issue("t-1", "anthropic")
    assert refusal(Passes(), grant.credential) == "invalid-gateway-pass"


def test_a_bound_thread_refuses_another_engine_session():
    """Once the engine's session is bound, a request naming another one is stale."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    passes.bind("t-1", "s1")
    assert refusal(passes, grant.credential, "s2") == "stale-session"


def test_a_bound_thread_accepts_its_session_or_none():
    """A request naming the bound session, or no session, passes."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    passes.bind("t-1", "s1")
    assert passes.check(grant.credential, "anthropic", "s1").thread_id == "t-1"
    assert passes.check(grant.credential, "anthropic").thread_id == "t-1"


def test_an_unbound_thread_accepts_any_engine_session():
    """Before any bind, a request may name any engine session."""
    passes = Passes()
    grant = passes.issue("t-1", "anthropic")
    assert passes.check(grant.credential, "anthropic", "whatever").thread_id == "t-1"


def test_issuing_clears_the_binding():
    """A new pass starts unbound: the earlier engine session no longer constrains it."""
    passes = Passes()
    passes.issue("t-1", "anthropic")
    passes.bind("t-1", "s1")
    grant = passes.issue("t-1", "anthropic")
    assert passes.check(grant.credential, "anthropic", "s2").thread_id == "t-1"


@pytest.mark.parametrize("credential", ["cgw1.t-1.abc.\u00e9", "cgw1.t-\udce9.abc.0"])
def test_a_credential_with_non_ascii_characters_is_refused_not_an_error(credential: str):
    """A header may carry any characters: a pass-shaped credential with non-ASCII ones is
    refused like any other forgery, it does not raise something else."""
    with pytest.raises(PassRefused):
        Passes().check(credential, "anthropic")


# -- an agent's reset in flight ------------------------------------------------------------------

CUT = ResetCut("toolu_c", "NOTICE", ("<system-reminder>", "<environment_context>"))


def _anthropic_history() -> dict[str, Any]:
    return {
        "system": [{"type": "text", "text": "SYSTEM"}],
        "tools": [{"name": "Bash"}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>\nENV\n</system-reminder>"},
                    {"type": "text", "text": "BRIEF"},
                ],
            },
            {"role": "system", "content": "MODEL IDENTITY"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_a", "name": "Bash"}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_c", "name": "x"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_c"}]},
            {"role": "user", "content": "LATER"},
        ],
    }


def test_a_reset_cuts_an_anthropic_request_after_its_fixed_context():
    """The notice follows the CLI's own blocks of the first message, its system messages
    stay, and the conversation goes on from the condense call; the system and tools are
    untouched."""
    body = _anthropic_history()
    cut, changed = anthropic.with_reset(body, CUT)
    assert changed
    assert (cut["system"], cut["tools"]) == (body["system"], body["tools"])
    assert cut["messages"][0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>\nENV\n</system-reminder>"},
            {"type": "text", "text": "NOTICE"},
        ],
    }
    assert cut["messages"][1:] == [body["messages"][1], *body["messages"][4:]]


def test_a_request_without_the_condense_call_is_not_cut():
    """A new session's request does not hold the call: it goes on as it came."""
    body = _anthropic_history()
    body["messages"] = body["messages"][:4]
    assert anthropic.with_reset(body, CUT) == (body, False)
    assert openai.with_reset({"input": "just text"}, CUT) == (
        {"input": "just text"},
        False,
    )


def test_a_reset_cuts_a_responses_request_at_the_calls_response():
    """Developer messages and the CLI's environment message stay; the notice follows them;
    the call's response (its reasoning and text) and all after it stay."""
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "D"}]},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>E"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "BRIEF"}]},
        {"type": "function_call", "call_id": "call_a"},
        {"type": "function_call_output", "call_id": "call_a", "output": "out"},
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "T"}]},
        {"type": "function_call", "call_id": "toolu_c", "name": "condense"},
        {"type": "function_call_output", "call_id": "toolu_c", "output": "done"},
    ]
    cut, changed = openai.with_reset({"model": "m", "input": items}, CUT)
    assert changed
    notice = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "NOTICE"}],
    }
    assert cut == {"model": "m", "input": [items[0], items[1], notice, *items[5:]]}


# -- notices kept where they were added ---------------------------------------------------------


def test_a_notice_goes_after_the_last_user_message_and_stays_there():
    """A notice joins the request's last user message (after its results); the next request,
    which holds that message and more, carries it at the same place, not at the end."""
    results = {"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}
    where = anthropic.insertion_at_end(results, Notice("near:urgent:0", "URGENT"))
    assert where is not None
    out, carried = anthropic.with_insertions(results, [where])
    assert carried == ("near:urgent:0",)
    (last,) = out["messages"]
    assert last["content"] == [{"type": "tool_result"}, {"type": "text", "text": "URGENT"}]
    later = {
        "messages": [
            *results["messages"],
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": [{"type": "text", "text": "go on"}]},
        ]
    }
    out, _ = anthropic.with_insertions(later, [where])
    assert out["messages"][0]["content"][-1] == {"type": "text", "text": "URGENT"}
    assert out["messages"][1:] == later["messages"][1:]
    assert out["messages"][2] is later["messages"][2]


def test_a_notice_whose_anchor_changed_is_not_carried():
    """A conversation that no longer holds the message the notice went after (the CLI rewrote
    its history, or another conversation uses the pass) carries nothing."""
    first = {"messages": [{"role": "user", "content": "one"}]}
    where = anthropic.insertion_at_end(first, Notice("k", "NOTE"))
    assert where is not None
    other = {"messages": [{"role": "user", "content": "two"}]}
    assert anthropic.with_insertions(other, [where]) == (other, ())


def test_a_notice_joins_the_users_turn_before_a_trailing_system_message():
    """Claude Code ends a session's first request with a system-role message of its own: the
    notice goes at the end of the user's turn before it."""
    first = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "brief"}]},
            {"role": "system", "content": "# Environment"},
        ]
    }
    where = anthropic.insertion_at_end(first, Notice("k", "NOTE"))
    assert where is not None
    out, _ = anthropic.with_insertions(first, [where])
    assert out["messages"][0]["content"][-1] == {"type": "text", "text": "NOTE"}
    assert out["messages"][1] is first["messages"][1]


def test_a_notice_is_not_added_after_the_models_turn():
    """A conversation ending in an assistant message (a prefill) gets no notice there: user
    text after it would be a turn of its own."""
    replied = {"messages": [{"role": "assistant", "content": "hi"}]}
    assert anthropic.insertion_at_end(replied, Notice("k", "WARN")) is None


def test_a_responses_notice_is_an_input_item_after_its_anchor():
    """On the Responses API the notice is a user message item right after the item it went
    after, and later items follow it."""
    body = {"input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}]}
    where = openai.insertion_at_end(body, Notice("k", "WARN"))
    assert where is not None
    later = {"input": [*body["input"], {"type": "message", "role": "assistant", "content": []}]}
    out, carried = openai.with_insertions(later, [where])
    assert carried == ("k",)
    assert out["input"][1] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "WARN"}],
    }
    assert out["input"][2] is later["input"][1]


def test_the_newest_result_names_its_calls_tool_and_size():
    """The last result of either API, with the tool its call named and its text's length;
    none for a request without results."""
    messages = {
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Read"}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x" * 9}],
            },
        ]
    }
    assert anthropic.newest_result(messages) == NewestResult("a", "Read", 9)
    responses = {
        "input": [
            {"type": "function_call", "call_id": "c", "name": "condense"},
            {"type": "function_call_output", "call_id": "c", "output": "done"},
        ]
    }
    assert openai.newest_result(responses) == NewestResult("c", "condense", 4)
    assert openai.newest_result({"input": "text"}) is None
    assert anthropic.newest_result({"messages": [user("hi")]}) is None


# -- where the cache is read again ---------------------------------------------------------------


def _turns(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "brief"}]
    for i in range(n):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"c{i}"}]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{i}"}]}
        )
    return messages


def test_a_breakpoint_goes_before_the_first_result_shown_anew():
    """Anthropic reads its cache only at a breakpoint and up to 20 blocks before it: the
    message before the first result the gateway now shows otherwise gets one, so that all
    before it is read; the rest of the request is the same objects."""
    system = [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]
    body: dict[str, Any] = {"system": system, "messages": _turns(5)}
    at = anthropic.first_result(body, {"c2", "c4"})
    assert at == 6
    out = anthropic.with_breakpoint(body, at - 1)
    assert out["messages"][5]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    pairs = enumerate(zip(out["messages"], body["messages"], strict=True))
    assert all(a is b for i, (a, b) in pairs if i != 5)


def test_no_breakpoint_past_the_four_a_request_may_carry():
    """A request that carries four breakpoints already gets no fifth (the API would refuse
    it), nor a second on a marked block."""
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    messages = _turns(3)
    messages[-1]["content"][-1] = {**messages[-1]["content"][-1], "cache_control": {}}
    tools = [{"name": "t", "cache_control": {}}]
    body: dict[str, Any] = {"system": [marked, marked], "tools": tools, "messages": messages}
    assert anthropic.with_breakpoint(body, 2) == body
    assert anthropic.with_breakpoint(body, len(body["messages"]) - 1) == body


def test_a_side_request_is_told_by_its_clis_own_headers():
    """Claude Code marks a subagent's request with its agent id (and an auxiliary pass with
    its type), Codex with x-openai-subagent or its parent thread; the main conversation's
    requests carry none of these."""
    messages, responses = dialect("anthropic"), dialect("openai")
    assert messages.side_request({"x-claude-code-agent-id": "agent-1"})
    assert messages.side_request({"x-claude-code-auxiliary-type": "memory"})
    assert not messages.side_request(
        {"x-claude-code-session-id": "s", "x-claude-code-agent-id": ""}
    )
    assert responses.side_request({"x-openai-subagent": "review"})
    assert responses.side_request({"x-codex-parent-thread-id": "th-1"})
    assert not responses.side_request({"thread-id": "th-1"})
