"""Reasoning items on the fake's OpenAI Responses API, over loopback HTTP: from GPT-5.6 on, a
reasoning item sent back after a change to what came before it is dropped without an error,
and the model re-creates that reasoning at an output cost. The rule:
https://developers.openai.com/api/docs/guides/keep-prefix-unchanged.md ("Starting with newer
frontier models, the API will drop reasoning items that follow a prefix change"); which models
those are is not documented (the fake assumes GPT-5.6 and later), nor is the cost (stated)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.fake_api import post

PAGE = "https://developers.openai.com/api/docs/guides/keep-prefix-unchanged.md"
NEWER = "gpt-5.6-sol"
OLDER = "gpt-5.5"
PLAN = "Let me plan the listing carefully before running anything. " * 20


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=None) as server:
        yield server


def say(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def respond(
    session: aiohttp.ClientSession, fake: FakeModelServer, model: str, items: list[Any]
) -> dict[str, Any]:
    body = {
        "model": model,
        "input": items,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    status, reply, _ = await post(session, f"{fake.url}/v1/responses", body)
    assert status == 200, reply
    assert isinstance(reply, dict)
    return reply


async def first_turn(
    session: aiohttp.ClientSession, fake: FakeModelServer, model: str
) -> list[dict[str, Any]]:
    """A question, the reply's reasoning item and call as received, and the call's output."""
    fake.queue(ToolCalls([Call("exec_command", {"cmd": "ls"})], thinking=PLAN))
    reply = await respond(session, fake, model, [say("List the files.")])
    call = reply["output"][-1]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "a.py"}
    return [say("List the files."), *reply["output"], output]


def edited(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history`` with the question before the reasoning item rewritten."""
    changed = copy.deepcopy(history)
    changed[0] = say("List every file.")
    return changed


async def test_a_reasoning_item_after_a_prefix_change_is_dropped_silently(fake, session):
    """ "Starting with newer frontier models, the API will drop reasoning items that follow a
    prefix change"; "A reasoning item's prefix is the conversation history that comes before
    it" (PAGE): the request is answered, and the fake's log names the dropped item."""
    history = edited(await first_turn(session, fake, NEWER))
    fake.queue(Text("Done."))
    reply = await respond(session, fake, NEWER, history)
    outcome = fake.requests[-1].thinking
    assert reply["status"] == "completed"
    assert outcome is not None
    assert outcome.dropped == (
        {"type": "reasoning_dropped", "path": "input.1", "reason": "prefix_mismatch"},
    )


async def test_dropped_reasoning_is_re_created_once(fake, session):
    """ "When reasoning items are dropped, the model may have to redo some reasoning, which can
    increase token usage" (PAGE); the fake charges the item's reasoning tokens as output on the
    first request that drops it, not again (stated)."""
    history = edited(await first_turn(session, fake, NEWER))
    fake.queue(Text("Done."), Text("Done."))
    first = await respond(session, fake, NEWER, history)
    again = await respond(session, fake, NEWER, history)
    extra = first["usage"]["output_tokens"] - again["usage"]["output_tokens"]
    assert extra == fake.requests[1].rethink_tokens > 150
    assert first["usage"]["output_tokens_details"]["reasoning_tokens"] == extra
    assert fake.requests[2].rethink_tokens == 0


async def test_reasoning_the_client_left_out_is_re_created_once(fake, session):
    """A request that holds a reply's call but not its reasoning item lost that reasoning as
    surely as one the API dropped: the fake charges it the same way, once (stated: the same
    estimate for every way of losing it)."""
    history = [i for i in await first_turn(session, fake, NEWER) if i["type"] != "reasoning"]
    fake.queue(Text("Done."), Text("Done."))
    await respond(session, fake, NEWER, history)
    await respond(session, fake, NEWER, history)
    assert fake.requests[1].rethink_tokens > 150
    assert fake.requests[2].rethink_tokens == 0


async def test_an_unchanged_prefix_keeps_the_reasoning(fake, session):
    """A reasoning item sent back after the same history is kept: only "a prefix change"
    drops it (PAGE)."""
    history = await first_turn(session, fake, NEWER)
    fake.queue(Text("Done."))
    await respond(session, fake, NEWER, history)
    outcome = fake.requests[-1].thinking
    assert outcome is not None
    assert (outcome.checked, outcome.dropped) == (1, ())
    assert fake.requests[-1].rethink_tokens == 0


async def test_models_before_gpt_5_6_keep_the_reasoning(fake, session):
    """The rule is for "newer frontier models" (PAGE): on gpt-5.5 (assumed older) nothing is
    dropped after a change."""
    history = edited(await first_turn(session, fake, OLDER))
    fake.queue(Text("Done."))
    await respond(session, fake, OLDER, history)
    assert fake.requests[-1].thinking is None
    assert fake.requests[-1].rethink_tokens == 0
