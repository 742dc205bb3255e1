"""The gateway's reading of a reply's billed counts beyond input, cache and output: Anthropic's
one-hour cache writes (``usage.cache_creation``) and server-side compaction
(``usage.iterations``), OpenAI's cache writes (``input_tokens_details.cache_write_tokens``),
from a whole JSON reply and from an SSE stream."""

from __future__ import annotations

import json
from typing import Any

from condensate.gateway.dialects import Api, anthropic, dialect, openai
from condensate.gateway.wire import ReplyUsage, SseSplitter

ANTHROPIC_USAGE = {
    "input_tokens": 23_000,
    "cache_read_input_tokens": 40_000,
    "cache_creation_input_tokens": 5_000,
    "cache_creation": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 4_000},
    "output_tokens": 1_000,
    "iterations": [
        {"type": "compaction", "input_tokens": 180_000, "output_tokens": 3_500},
        {"type": "message", "input_tokens": 23_000, "output_tokens": 1_000},
    ],
}
"""The threshold-compaction page's example, with a cache split added."""
RESPONSES_USAGE = {
    "input_tokens": 10_000,
    "input_tokens_details": {"cached_tokens": 6_000, "cache_write_tokens": 3_000},
    "output_tokens": 200,
}


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def streamed(api: Api, stream: bytes) -> ReplyUsage:
    """The counts read from ``stream``, cut into odd chunks as a socket might deliver it."""
    usage = ReplyUsage()
    splitter = SseSplitter()
    for start in range(0, len(stream), 37):
        for data in splitter.feed(stream[start : start + 37]):
            dialect(api).read_event(usage, data)
    return usage


def test_anthropic_body_gives_one_hour_writes_and_compaction():
    """A whole Messages reply: the one-hour part of the writes and the compaction
    iteration's tokens are read; the ``message`` iteration is the top-level count."""
    usage = ReplyUsage()
    anthropic.read_body(
        usage, {"id": "msg_1", "model": "claude-opus-5-5", "usage": ANTHROPIC_USAGE}
    )
    assert usage.complete
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (
        23_000,
        40_000,
        5_000,
        1_000,
    )
    assert usage.cache_write_1h == 4_000
    assert (usage.compaction_input, usage.compaction_output) == (180_000, 3_500)
    assert usage.prompt == 68_000


def test_anthropic_stream_gives_one_hour_writes_and_the_final_compaction():
    """A stream: message_start carries the cache split, message_delta the iterations with
    the output; both reach the count."""
    start = {k: v for k, v in ANTHROPIC_USAGE.items() if k != "iterations"}
    start["output_tokens"] = 1
    stream = sse(
        {
            "type": "message_start",
            "message": {"id": "m", "model": "claude-opus-5-5", "usage": start},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1_000, "iterations": ANTHROPIC_USAGE["iterations"]},
        },
        {"type": "message_stop"},
    )
    usage = streamed("anthropic", stream)
    assert usage.complete
    assert (usage.cache_write, usage.cache_write_1h, usage.output) == (5_000, 4_000, 1_000)
    assert (usage.compaction_input, usage.compaction_output) == (180_000, 3_500)


def test_anthropic_iterations_without_a_compaction_count_none():
    """With the compaction beta every reply lists its iterations; a reply that compacted
    nothing has only ``message`` entries: no compaction tokens."""
    usage = ReplyUsage()
    only_message = {
        "input_tokens": 10,
        "output_tokens": 5,
        "iterations": [{"type": "message", "input_tokens": 10, "output_tokens": 5}],
    }
    anthropic.read_body(usage, {"id": "m", "usage": only_message})
    assert (usage.compaction_input, usage.compaction_output, usage.cache_write_1h) == (0, 0, 0)


def test_responses_body_splits_cache_writes_out_of_input():
    """OpenAI counts cached and written tokens inside ``input_tokens``: Condensate's input
    is the rest, the writes are cache_write, and the prompt is still input_tokens."""
    usage = ReplyUsage()
    openai.read_body(usage, {"id": "resp_1", "model": "gpt-6.2-sol", "usage": RESPONSES_USAGE})
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (
        1_000,
        6_000,
        3_000,
        200,
    )
    assert usage.prompt == 10_000


def test_responses_stream_splits_cache_writes_out_of_input():
    """The same counts from a stream's response.completed event."""
    response = {"id": "resp_1", "model": "gpt-6.2-sol", "usage": RESPONSES_USAGE}
    stream = sse(
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.output_text.delta", "delta": "hi"},
        {"type": "response.completed", "response": response},
    )
    usage = streamed("openai", stream)
    assert usage.complete
    assert (usage.input, usage.cache_read, usage.cache_write) == (1_000, 6_000, 3_000)
