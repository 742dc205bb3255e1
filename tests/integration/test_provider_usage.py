"""The native clients read the billing a reply reports beyond input, cache and output, over
real HTTP from the fake model server's raw replies: Anthropic's one-hour cache writes and
server-side compaction, OpenAI's cache writes (GPT-5.6 and later), streamed and whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from condensate.core.messages import Message, Request, Usage
from condensate.events import now_utc
from condensate.providers import Endpoint, ProviderSettings, make_client
from condensate.providers._http import RetryPolicy, Timeouts
from condensate.testing.fake_model import FakeModelServer, Raw
from tests.unit.test_reply_usage import ANTHROPIC_USAGE, RESPONSES_USAGE

MODELS = {"anthropic": "anthropic:claude-opus-5-5", "openai": "openai:gpt-6.2-sol"}
ANTHROPIC_BILLED = Usage(
    input=23_000,
    cache_read=40_000,
    cache_write=5_000,
    output=1_000,
    cache_write_1h=4_000,
    compaction_input=180_000,
    compaction_output=3_500,
)
RESPONSES_BILLED = Usage(input=1_000, cache_read=6_000, cache_write=3_000, output=200)


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


async def billed(
    fake: FakeModelServer, session: aiohttp.ClientSession, provider: str, reply: Raw, stream: bool
) -> Usage:
    settings = ProviderSettings(
        anthropic=Endpoint(fake.url, "sk-test"),
        openai=Endpoint(fake.url + "/v1", "sk-test"),
        chat=Endpoint(fake.url + "/v1", "sk-test"),
        retry=RetryPolicy(max_retries=0),
        timeouts=Timeouts(call=30, read=5),
    )
    fake.queue(reply)
    client = make_client(MODELS[provider], settings, session)
    model = MODELS[provider].split(":", 1)[1]
    done = await client.complete(Request(model, (Message.user("hello"),), stream=stream))
    return done.usage


def anthropic_message(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-5-5",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "usage": usage,
    }


async def test_anthropic_whole_reply_reads_one_hour_writes_and_compaction(fake, session):
    """A whole Messages reply: the one-hour writes and the compaction iteration are read."""
    reply = Raw(body=anthropic_message(ANTHROPIC_USAGE))
    assert await billed(fake, session, "anthropic", reply, stream=False) == ANTHROPIC_BILLED


async def test_anthropic_stream_reads_one_hour_writes_and_the_final_compaction(fake, session):
    """A stream: the cache split comes in message_start, the iterations in message_delta."""
    start = {k: v for k, v in ANTHROPIC_USAGE.items() if k != "iterations"} | {"output_tokens": 1}
    message = anthropic_message(start) | {"content": [], "stop_reason": None}
    events = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1_000, "iterations": ANTHROPIC_USAGE["iterations"]},
        },
        {"type": "message_stop"},
    ]
    assert await billed(fake, session, "anthropic", Raw(events=events), stream=True) == (
        ANTHROPIC_BILLED
    )


def responses_reply(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-6.2-sol",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done"}],
            }
        ],
        "usage": usage,
    }


async def test_responses_whole_reply_splits_cache_writes_out_of_input(fake, session):
    """A whole Responses reply: the written and the cached parts leave ``input``."""
    reply = Raw(body=responses_reply(RESPONSES_USAGE))
    assert await billed(fake, session, "openai", reply, stream=False) == RESPONSES_BILLED


async def test_responses_stream_splits_cache_writes_out_of_input(fake, session):
    """The same counts from a stream's response.completed event."""
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.completed", "response": responses_reply(RESPONSES_USAGE)},
    ]
    assert await billed(fake, session, "openai", Raw(events=events), stream=True) == (
        RESPONSES_BILLED
    )


def test_the_logged_count_keeps_every_billed_class():
    """``Usage.logged`` (what the native loop appends as ``model.usage``) carries the
    one-hour writes and the compaction, so the call's cost stamp can bill them."""
    logged = ANTHROPIC_BILLED.logged(now_utc(), "claude-opus-5-5")
    assert (logged.cache_write_1h, logged.compaction_input, logged.compaction_output) == (
        4_000,
        180_000,
        3_500,
    )
