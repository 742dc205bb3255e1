"""Where the next request reads the provider's cache again after a change in the middle of
its prompt (``condensate.core.cache_rules``): Anthropic's breakpoints with their 20-block lookback
and lifetimes, OpenAI's prefix from 1,024 tokens in 128-token steps, and the fallback for any
other provider."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from condensate.core.cache_rules import FIVE_MINUTES, HOUR, Cache, Part, Rule, lifetime, rule_for

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FIXED = 2_000
"""The system prompt and tools."""


def brief() -> Part:
    return Part(100, 1, "user")


def step(result: int = 3_000, *, calls: int = 1, read: datetime | None = NOW) -> list[Part]:
    """A reply with ``calls`` calls (a request ended before it, last read at ``read``), and
    their results."""
    return [Part(30, calls, "assistant", read), *(Part(result, 1, "user") for _ in range(calls))]


def cache(parts: list[Part], rule: Rule = "anthropic-breakpoints", **changes: object) -> Cache:
    fields: dict[str, object] = {
        "rule": rule,
        "fixed": FIXED,
        "parts": tuple(parts),
        "last_call": NOW,
        "now": NOW,
        "lifetime": FIVE_MINUTES,
    }
    return Cache(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "rule"),
    [
        ("anthropic:claude-opus-5-5", "anthropic-breakpoints"),
        ("claude-opus-5-5", "anthropic-breakpoints"),
        ("openai:gpt-6.2-sol", "openai-prefix"),
        ("gpt-5.5", "openai-prefix"),
        ("chat:qwen3-coder", "first-change"),
    ],
)
def test_the_rule_is_the_provider_s(model: str, rule: Rule):
    """The thread's model id names the provider (a bare Claude or GPT name as the daemon
    reads it); any other provider's cache is not known."""
    assert rule_for(model) == rule


def test_anthropic_reads_at_the_request_end_before_the_changed_message():
    """A result changed in the second step: the breakpoint goes on the reply before it, and
    the lookback finds the end of the request that got that reply; the reply itself is
    written again, not only the changed result on."""
    parts = [brief(), *step(), *step(), *step()]
    reuse = cache(parts).reuse(4)
    assert reuse.start == 3
    assert reuse.read == FIXED + 100 + 30 + 3_000


def test_anthropic_looks_back_20_blocks_at_most():
    """After a reply of 21 parallel calls the request end before it is 21 blocks back from
    the breakpoint: only the system prompt is read. With 20 calls it is found."""
    wide = [brief(), *step(), *step(100, calls=21), *step()]
    assert cache(wide).reuse(4).read == FIXED
    narrow = [brief(), *step(), *step(100, calls=20), *step()]
    assert cache(narrow).reuse(4).read == FIXED + 100 + 30 + 3_000


def test_an_anthropic_entry_lives_five_minutes_after_its_last_read():
    """The request end before the change was last read six minutes ago: gone, and so is
    the one before it; an hour's lifetime keeps it."""
    old = NOW - timedelta(minutes=6)
    parts = [brief(), *step(read=old), *step(read=old), *step()]
    assert cache(parts).reuse(4).read == FIXED
    assert cache(parts, lifetime=HOUR).reuse(4).read == FIXED + 100 + 30 + 3_000


def test_an_idle_thread_reads_nothing_from_the_cache():
    """The last call was longer ago than an entry lives: the system prompt went too."""
    parts = [brief(), *step(), *step()]
    idle = NOW - timedelta(minutes=10)
    assert cache(parts, last_call=idle).reuse(2).read == 0
    assert cache(parts, "openai-prefix", last_call=idle).reuse(2).read == 0


def test_openai_reads_the_shared_prefix_down_to_a_128_token_step():
    """2,000 + 100 + 30 + 3,000 tokens come before the change: 5,130, read as 5,120 (40
    steps); the rewrite starts in the result before the change."""
    parts = [brief(), *step(), *step(), *step()]
    reuse = cache(parts, "openai-prefix").reuse(4)
    assert reuse.read == 5_120
    assert reuse.start == 2


def test_openai_caches_nothing_under_1024_tokens():
    """A shared prefix of 1,023 tokens is not cached at all."""
    parts = [Part(923, 1, "user"), *step(100), *step(100)]
    assert cache(parts, "openai-prefix", fixed=100).reuse(1).read == 0
    assert cache(parts, "openai-prefix", fixed=101).reuse(1).read == 1_024


def test_openai_reads_no_further_than_the_last_request_sent():
    """Entries after the last request's end were never written: a change after them reads
    the prefix only as far as that request went."""
    parts = [brief(), *step(), *step(read=None), Part(50, 1, "user")]
    assert cache(parts, "openai-prefix").reuse(5).read == (FIXED + 100) // 128 * 128


def test_another_provider_keeps_the_old_rule():
    """An unknown provider: everything before the first change is read, idle or not (no
    lifetime applies)."""
    parts = [brief(), *step(), *step()]
    idle = NOW - timedelta(days=1)
    reuse = cache(parts, "first-change", last_call=idle, lifetime=None).reuse(4)
    assert reuse.read == FIXED + 100 + 30 + 3_000 + 30
    assert reuse.start == 4


def test_lifetimes_follow_the_provider_and_the_thread_s_writes():
    """Five minutes on Anthropic, an hour when the thread writes for an hour; OpenAI's five
    minutes, thirty for the models that bill their writes; none for another provider."""
    assert lifetime("anthropic-breakpoints", one_hour=False, bills_writes=True) == FIVE_MINUTES
    assert lifetime("anthropic-breakpoints", one_hour=True, bills_writes=True) == HOUR
    assert lifetime("openai-prefix", one_hour=False, bills_writes=False) == FIVE_MINUTES
    assert lifetime("openai-prefix", one_hour=False, bills_writes=True) == timedelta(minutes=30)
    assert lifetime("first-change", one_hour=True, bills_writes=True) is None
