"""The fake model server's prompt caches over loopback HTTP: Anthropic's ``cache_control``
breakpoints (https://platform.claude.com/docs/en/build-with-claude/prompt-caching; the rules
below the page's top come from captures of the page, a secondary source) and OpenAI's automatic
caching (https://developers.openai.com/api/docs/guides/prompt-caching)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import Fail, FakeModelServer
from tests.integration.fake_api import post, usage_sum, user

ANTHROPIC_PAGE = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
OPENAI_PAGE = "https://developers.openai.com/api/docs/guides/prompt-caching"
CLAUDE = "claude-sonnet-4-5"
"""Minimum cacheable prompt 1,024 tokens; runs no thinking check."""
SYSTEM = [{"type": "text", "text": "You are a careful coding agent on a large repository. " * 200}]
"""About 2,000 tokens: past every minimum but Haiku's."""
FIVE_MINUTES = {"type": "ephemeral"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=None) as server:
        yield server


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": CLAUDE, "max_tokens": 256, "system": SYSTEM, "messages": messages, **extra}


def marked(text: str, marker: dict[str, Any] = FIVE_MINUTES) -> dict[str, Any]:
    return user(text, cache_control=marker)


def blocks(count: int, last_marked: bool = True) -> list[dict[str, Any]]:
    """``count`` short text blocks, the last one carrying a breakpoint."""
    made: list[dict[str, Any]] = [{"type": "text", "text": f"note {i}"} for i in range(count)]
    if last_marked and made:
        made[-1]["cache_control"] = FIVE_MINUTES
    return made


async def messages(
    session: aiohttp.ClientSession, fake: FakeModelServer, request: dict[str, Any]
) -> dict[str, Any]:
    status, reply, _ = await post(session, f"{fake.url}/v1/messages", request)
    assert status == 200, reply
    assert isinstance(reply, dict)
    return reply


async def test_no_breakpoint_caches_nothing(fake, session):
    """Without ``cache_control`` nothing is written or read: the page offers two ways to cache,
    "Automatic caching: Add a single `cache_control` field at the top level of your request"
    and "Explicit cache breakpoints: Place `cache_control` directly on individual content
    blocks" (ANTHROPIC_PAGE); "if both cache_creation_input_tokens and cache_read_input_tokens
    are 0, the prompt was not cached"."""
    request = body([user("List the files.")])
    await messages(session, fake, request)
    again = (await messages(session, fake, request))["usage"]
    assert again["cache_read_input_tokens"] == 0
    assert again["cache_creation_input_tokens"] == 0
    assert again["input_tokens"] == fake.requests[1].input_tokens > 1_024


async def test_a_breakpoint_is_read_by_the_next_request(fake, session):
    """A breakpoint on the last block writes the prompt; the next turn, with its breakpoint on
    its own last block, reads it through the lookback ("The system automatically checks for
    cache hits at all previous content block boundaries (up to 20 blocks before your
    breakpoint", ANTHROPIC_PAGE), and writes the rest."""
    first = (await messages(session, fake, body([marked("List the files.")])))["usage"]
    history = [
        user("List the files."),
        {"role": "assistant", "content": [{"type": "text", "text": "a.py b.py"}]},
        marked("Now read a.py"),
    ]
    second = (await messages(session, fake, body(history)))["usage"]
    assert first["cache_creation_input_tokens"] == usage_sum(first)
    assert second["cache_read_input_tokens"] == usage_sum(first)
    assert second["cache_creation_input_tokens"] == usage_sum(second) - usage_sum(first) > 0
    assert second["input_tokens"] == 0


async def test_the_automatic_breakpoint_sits_on_the_last_block(fake, session):
    """A top-level ``cache_control`` caches through the last block: "The system automatically
    applies the cache breakpoint to the last cacheable block and moves it forward as
    conversations grow" (ANTHROPIC_PAGE)."""
    await messages(session, fake, body([user("List the files.")], cache_control=FIVE_MINUTES))
    grown = [
        user("List the files."),
        {"role": "assistant", "content": "a.py b.py"},
        user("Now read a.py"),
    ]
    second = (await messages(session, fake, body(grown, cache_control=FIVE_MINUTES)))["usage"]
    assert second["cache_read_input_tokens"] == fake.requests[0].input_tokens
    assert second["cache_creation_input_tokens"] > 0


async def test_the_lookback_reaches_twenty_blocks_back(fake, session):
    """A breakpoint 20 blocks after the written one still hits: "The lookback window is 20
    blocks" (ANTHROPIC_PAGE, capture)."""
    await messages(session, fake, body([{"role": "user", "content": blocks(1)}]))
    grown = [{"role": "user", "content": [{"type": "text", "text": "note 0"}, *blocks(20)]}]
    usage = (await messages(session, fake, body(grown)))["usage"]
    assert usage["cache_read_input_tokens"] == fake.requests[0].input_tokens


async def test_twenty_one_blocks_on_the_lookback_misses(fake, session):
    """With 21 blocks between the written breakpoint and the new one, the hit is out of reach
    ("The automatic prefix checking only looks back approximately 20 content blocks from each
    explicit breakpoint", ANTHROPIC_PAGE, an older copy)."""
    await messages(session, fake, body([{"role": "user", "content": blocks(1)}]))
    grown = [{"role": "user", "content": [{"type": "text", "text": "note 0"}, *blocks(21)]}]
    usage = (await messages(session, fake, body(grown)))["usage"]
    assert usage["cache_read_input_tokens"] == 0
    assert usage["cache_creation_input_tokens"] == usage_sum(usage)


async def test_five_breakpoints_are_refused(fake, session):
    """ "You can define up to 4 cache breakpoints"; a fifth is a 400 (ANTHROPIC_PAGE, capture;
    the message is the API's as captured)."""
    content = [{"type": "text", "text": f"n{i}", "cache_control": FIVE_MINUTES} for i in range(5)]
    status, error, _ = await post(
        session, f"{fake.url}/v1/messages", body([{"role": "user", "content": content}])
    )
    assert status == 400
    assert error["error"] == {
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    }


async def test_the_automatic_breakpoint_takes_one_of_the_four_slots(fake, session):
    """ "When used together, the automatic cache breakpoint uses one of the 4 available
    breakpoint slots"; "If 4 explicit block-level breakpoints already exist, the API returns a
    400 error" (ANTHROPIC_PAGE, capture)."""
    content = [{"type": "text", "text": f"n{i}", "cache_control": FIVE_MINUTES} for i in range(4)]
    request = body([{"role": "user", "content": content}], cache_control=FIVE_MINUTES)
    status, error, _ = await post(session, f"{fake.url}/v1/messages", request)
    assert status == 400
    assert error["error"]["message"].endswith("Found 5.")


async def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused(fake, session):
    """ "Cache entries with longer TTL must appear before shorter TTLs (that is, a 1-hour cache
    entry must appear before any 5-minute cache entries)" (ANTHROPIC_PAGE, several copies);
    the 400's wording is the fake's."""
    content = [
        {"type": "text", "text": "short", "cache_control": FIVE_MINUTES},
        {"type": "text", "text": "long", "cache_control": ONE_HOUR},
    ]
    status, error, _ = await post(
        session, f"{fake.url}/v1/messages", body([{"role": "user", "content": content}])
    )
    assert status == 400
    assert 'a `ttl` of "1h" cannot come after' in error["error"]["message"]


async def test_one_hour_and_five_minute_writes_are_billed_apart(fake, session):
    """A one-hour breakpoint on the system prompt and a five-minute one on the last message:
    "1-hour cache write tokens for (B - A). 5-minute cache write tokens for (C - B)", and
    "`cache_creation_input_tokens` equals the sum of the values in the `cache_creation`
    object" (ANTHROPIC_PAGE, capture). Another question on the same system prompt reads the
    hour's entry."""
    system = [{**SYSTEM[0], "cache_control": ONE_HOUR}]
    first = (await messages(session, fake, body([marked("Go.")], system=system)))["usage"]
    second = (await messages(session, fake, body([marked("Stop.")], system=system)))["usage"]
    split = first["cache_creation"]
    assert split["ephemeral_1h_input_tokens"] == second["cache_read_input_tokens"] > 1_024
    assert (
        split["ephemeral_5m_input_tokens"] == usage_sum(first) - second["cache_read_input_tokens"]
    )
    assert first["cache_creation_input_tokens"] == sum(split.values())
    assert fake.requests[0].cache_write_1h == split["ephemeral_1h_input_tokens"]
    assert fake.requests[0].cache_write == first["cache_creation_input_tokens"]


async def test_an_entry_expires_after_five_minutes(fake, session):
    """ "By default, the cache has a 5-minute lifetime"; "The lifetime is measured from the
    start of the request that writes or reads the cache entry" (ANTHROPIC_PAGE, capture)."""
    request = body([marked("List the files.")])
    await messages(session, fake, request)
    fake.advance(301)
    usage = (await messages(session, fake, request))["usage"]
    assert usage["cache_read_input_tokens"] == 0
    assert usage["cache_creation_input_tokens"] == usage_sum(usage)


async def test_a_hit_refreshes_the_lifetime(fake, session):
    """ "The cache is refreshed for no additional cost each time the cached content is used"
    (ANTHROPIC_PAGE, capture): read at 4 minutes, the entry still serves at 8."""
    request = body([marked("List the files.")])
    await messages(session, fake, request)
    fake.advance(240)
    await messages(session, fake, request)
    fake.advance(240)
    usage = (await messages(session, fake, request))["usage"]
    assert usage["cache_read_input_tokens"] == usage_sum(usage)


async def test_a_one_hour_entry_outlives_five_minutes(fake, session):
    """``ttl: "1h"`` keeps an entry an hour: "ttl: optional "5m" or "1h" ... Defaults to `5m`"
    (the API reference, through ANTHROPIC_PAGE's capture)."""
    request = body([marked("List the files.", ONE_HOUR)])
    await messages(session, fake, request)
    fake.advance(50 * 60)
    usage = (await messages(session, fake, request))["usage"]
    assert usage["cache_read_input_tokens"] == usage_sum(usage)
    fake.advance(61 * 60)
    usage = (await messages(session, fake, request))["usage"]
    assert usage["cache_read_input_tokens"] == 0


async def test_a_prompt_under_the_minimum_is_not_cached(fake, session):
    """ "Shorter prompts cannot be cached, even if marked with `cache_control`. Any requests to
    cache fewer than this number of tokens will be processed without caching, and no error is
    returned" (ANTHROPIC_PAGE, capture; 1,024 tokens for Claude Sonnet 4.5)."""
    request = body([marked("List the files.")], system="Be brief.")
    await messages(session, fake, request)
    usage = (await messages(session, fake, request))["usage"]
    assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
    assert usage["input_tokens"] == fake.requests[1].input_tokens < 1_024


async def test_an_entry_belongs_to_its_model(fake, session):
    """The same prompt on another model is a miss (an entry is the model's own)."""
    request = body([marked("List the files.")])
    await messages(session, fake, request)
    usage = (await messages(session, fake, {**request, "model": "claude-opus-4-1"}))["usage"]
    assert usage["cache_read_input_tokens"] == 0
    assert usage["cache_creation_input_tokens"] == usage_sum(usage)


async def test_the_thinking_setting_is_part_of_the_entry(fake, session):
    """ "The thinking configuration and the effort level (or its default) are part of the
    cached prompt prefix, so changing any of them starts a new prefix" (https://
    platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting, copy)."""
    request = body([marked("List the files.")], thinking={"type": "enabled", "budget_tokens": 2048})
    await messages(session, fake, request)
    changed = {**request, "thinking": {"type": "enabled", "budget_tokens": 4096}}
    usage = (await messages(session, fake, changed))["usage"]
    assert usage["cache_read_input_tokens"] == 0


async def test_a_failed_request_writes_nothing(fake, session):
    """Only an answered request writes: a 500 leaves no entry for the next request to read."""
    fake.queue(Fail(500))
    request = body([marked("List the files.")])
    status, _, _ = await post(session, f"{fake.url}/v1/messages", request)
    usage = (await messages(session, fake, request))["usage"]
    assert status == 500
    assert usage["cache_read_input_tokens"] == 0


GPT = "gpt-5.5"
GPT_56 = "gpt-5.6-sol"
LONG = "Keep the repository tidy and explain each change you make. " * 150
"""About 1,700 tokens: past OpenAI's 1,024."""


def responses_body(model: str, *items: Any, **extra: Any) -> dict[str, Any]:
    return {"model": model, "instructions": LONG, "input": list(items), **extra}


def say(text: str, role: str = "user") -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


async def respond(
    session: aiohttp.ClientSession, fake: FakeModelServer, request: dict[str, Any]
) -> dict[str, Any]:
    status, reply, _ = await post(session, f"{fake.url}/v1/responses", request)
    assert status == 200, reply
    assert isinstance(reply, dict)
    return reply


def cached(reply: dict[str, Any]) -> int:
    return int(reply["usage"]["input_tokens_details"]["cached_tokens"])


async def test_openai_prompts_under_1024_tokens_are_not_cached(fake, session):
    """ "For requests under 1024 tokens, `cached_tokens` is zero" (OPENAI_PAGE)."""
    request = {"model": GPT, "input": [say("hi")], "instructions": "Be brief. " * 150}
    await respond(session, fake, request)
    again = await respond(session, fake, request)
    assert cached(again) == 0
    assert 300 < again["usage"]["input_tokens"] < 1_024


async def test_openai_reads_the_longest_written_prefix(fake, session):
    """ "By default, caching is enabled automatically for prompts that are 1024 tokens or
    longer" (OPENAI_PAGE): the next turn reads the whole earlier prompt; ``input_tokens`` stays
    the whole prompt."""
    first = await respond(session, fake, responses_body(GPT, say("List the files.")))
    grown = responses_body(GPT, say("List the files."), *first["output"], say("Read a.py"))
    second = await respond(session, fake, grown)
    assert cached(first) == 0
    assert cached(second) == first["usage"]["input_tokens"]
    assert second["usage"]["input_tokens"] == fake.requests[1].input_tokens > cached(second)


async def test_chat_completions_cache_the_same_way(fake, session):
    """Chat Completions report the read in ``usage.prompt_tokens_details.cached_tokens``
    (OPENAI_PAGE's example)."""
    url = f"{fake.url}/v1/chat/completions"
    chat = [{"role": "system", "content": LONG}, {"role": "user", "content": "hi"}]
    _, first, _ = await post(session, url, {"model": GPT, "messages": chat})
    grown = [*chat, first["choices"][0]["message"], {"role": "user", "content": "more"}]
    _, second, _ = await post(session, url, {"model": GPT, "messages": grown})
    read = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert read == first["usage"]["prompt_tokens"] > 1_024


async def test_gpt_5_6_reports_its_cache_writes(fake, session):
    """ "For GPT-5.6 models and later model families, cache writes cost 1.25x the uncached
    input token rate ... OpenAI reports writes in `cache_write_tokens` and reads in
    `cached_tokens`" (OPENAI_PAGE; that the Responses API reports it in
    ``input_tokens_details`` is implied, not shown)."""
    first = await respond(session, fake, responses_body(GPT_56, say("List the files.")))
    grown = responses_body(GPT_56, say("List the files."), *first["output"], say("Read a.py"))
    second = await respond(session, fake, grown)
    details = second["usage"]["input_tokens_details"]
    assert first["usage"]["input_tokens_details"]["cache_write_tokens"] == cached(second)
    assert details["cache_write_tokens"] == second["usage"]["input_tokens"] - cached(second) > 0
    assert fake.requests[1].cache_write == details["cache_write_tokens"]


async def test_models_before_gpt_5_6_report_no_cache_writes(fake, session):
    """ "Cache writes have no additional fee on models before the GPT-5.6 family" (OPENAI_PAGE):
    their usage has no ``cache_write_tokens``."""
    reply = await respond(session, fake, responses_body(GPT, say("List the files.")))
    assert "cache_write_tokens" not in reply["usage"]["input_tokens_details"]


async def test_openai_entries_expire_after_five_idle_minutes(fake, session):
    """ "When using the in-memory policy, cached prefixes generally remain active for 5 to 10
    minutes of inactivity, up to a maximum of one hour" (OPENAI_PAGE): the fake keeps 5."""
    request = responses_body(GPT, say("List the files."))
    await respond(session, fake, request)
    fake.advance(301)
    assert cached(await respond(session, fake, request)) == 0


async def test_openai_entries_live_an_hour_at_most(fake, session):
    """ "... up to a maximum of one hour" (OPENAI_PAGE): used every 4 minutes, the entry still
    ends an hour after it was written."""
    request = responses_body(GPT, say("List the files."))
    await respond(session, fake, request)
    for _ in range(14):
        fake.advance(240)
        assert cached(await respond(session, fake, request)) > 0
    fake.advance(240)
    assert cached(await respond(session, fake, request)) == 0


async def test_extended_retention_keeps_entries_a_day(fake, session):
    """ "Extended prompt cache retention keeps cached prefixes active for longer, up to a
    maximum of 24 hours" (OPENAI_PAGE); ``prompt_cache_retention: "24h"``."""
    request = responses_body(GPT, say("List the files."), prompt_cache_retention="24h")
    await respond(session, fake, request)
    fake.advance(23 * 3600)
    assert cached(await respond(session, fake, request)) > 0


async def test_gpt_5_6_entries_live_thirty_idle_minutes(fake, session):
    """ "A cached prefix remains eligible for reuse for at least 30 minutes" (OPENAI_PAGE,
    ``prompt_cache_options.ttl`` "30m", the default from GPT-5.6 on)."""
    request = responses_body(GPT_56, say("List the files."))
    await respond(session, fake, request)
    fake.advance(29 * 60)
    assert cached(await respond(session, fake, request)) > 0
    fake.advance(31 * 60)
    assert cached(await respond(session, fake, request)) == 0


async def test_the_prompt_cache_key_separates_entries(fake, session):
    """ "`prompt_cache_key` ... is combined with the prefix hash" (OPENAI_PAGE): another key
    misses."""
    await respond(session, fake, responses_body(GPT, say("hi"), prompt_cache_key="a"))
    other = await respond(session, fake, responses_body(GPT, say("hi"), prompt_cache_key="b"))
    same = await respond(session, fake, responses_body(GPT, say("hi"), prompt_cache_key="a"))
    assert cached(other) == 0
    assert cached(same) > 0


async def test_the_clock_moves_over_http(fake, session):
    """``POST /_fake/clock {"advance": seconds}`` moves the clock the cache lifetimes run on,
    as ``FakeModelServer.advance`` does, for a test in another process."""
    request = body([marked("List the files.")])
    await messages(session, fake, request)
    status, moved, _ = await post(session, f"{fake.url}/_fake/clock", {"advance": 301})
    usage = (await messages(session, fake, request))["usage"]
    bad, _, _ = await post(session, f"{fake.url}/_fake/clock", {"advance": -1})
    assert (status, moved["offset"]) == (200, 301)
    assert usage["cache_read_input_tokens"] == 0
    assert bad == 400
