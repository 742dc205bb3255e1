"""The gateway logs what a reply billed beyond input, cache and output, over real loopback HTTP
in front of the fake's raw replies: Anthropic's one-hour cache writes and server-side
compaction, OpenAI's cache writes, in the ``model.usage`` of the call, streamed and whole."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from condensate.events import ModelUsage
from condensate.testing.fake_model import FakeModelServer, Raw
from tests.integration.test_gateway import (
    CLAUDE,
    GPT,
    claude_body,
    codex_body,
    post,
    serving,
    upstream_for,
    user,
)
from tests.unit.test_reply_usage import ANTHROPIC_USAGE, RESPONSES_USAGE

STREAM = pytest.mark.parametrize("stream", [True, False])


def message(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_billed",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "usage": usage,
    }


def anthropic_reply(stream: bool) -> Raw:
    if not stream:
        return Raw(body=message(ANTHROPIC_USAGE))
    start = {k: v for k, v in ANTHROPIC_USAGE.items() if k != "iterations"} | {"output_tokens": 1}
    return Raw(
        events=[
            {"type": "message_start", "message": message(start) | {"content": []}},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 1_000, "iterations": ANTHROPIC_USAGE["iterations"]},
            },
            {"type": "message_stop"},
        ]
    )


def responses_reply(stream: bool) -> Raw:
    response = {
        "id": "resp_billed",
        "object": "response",
        "status": "completed",
        "model": GPT,
        "output": [],
        "usage": RESPONSES_USAGE,
    }
    if not stream:
        return Raw(body=response)
    return Raw(events=[{"type": "response.completed", "response": response}])


async def logged(fake: FakeModelServer, api: str, stream: bool) -> ModelUsage:
    """The one ``model.usage`` the gateway logs for a request answered by the queued reply."""
    async with serving(upstream_for(fake)) as served, aiohttp.ClientSession() as http:
        if api == "anthropic":
            body = claude_body([user("Go on.")], stream=stream)
            answer = await post(http, served.anthropic(), body, served.key())
        else:
            body = codex_body([user("Go on.")], stream=stream)
            answer = await post(http, served.openai(), body, served.bearer())
        assert answer.status == 200, answer.text
        ((_, usage),) = await served.recorder.logged_at_least(1)
    return usage


@STREAM
async def test_a_messages_calls_one_hour_writes_and_compaction_are_logged(
    fake: FakeModelServer, stream: bool
) -> None:
    """The call's count carries the one-hour part of its writes and the compaction
    iteration's tokens beside the reply's own."""
    fake.queue(anthropic_reply(stream))
    usage = await logged(fake, "anthropic", stream)
    assert (usage.input, usage.cache_read, usage.cache_write) == (23_000, 40_000, 5_000)
    assert usage.cache_write_1h == 4_000
    assert (usage.compaction_input, usage.compaction_output) == (180_000, 3_500)


@STREAM
async def test_a_responses_calls_cache_writes_are_logged_apart_from_input(
    fake: FakeModelServer, stream: bool
) -> None:
    """OpenAI's written tokens leave ``input`` for ``cache_write``; the prompt is still the
    provider's ``input_tokens``."""
    fake.queue(responses_reply(stream))
    usage = await logged(fake, "openai", stream)
    assert (usage.input, usage.cache_read, usage.cache_write) == (1_000, 6_000, 3_000)
    assert usage.prompt == 10_000
