"""Where a provider's prompt cache is read again after a prompt changed in its middle: what a
cut leaves the next request to read from the cache, and so what it writes again. Pure: no I/O.

The rules are the providers' (``providers.md`` §3; the fake model server applies the same,
``condensate/testing/fake_model/_caching.py``, with their sources):

- **Anthropic** caches only a prefix that ends at a ``cache_control`` breakpoint (at most 4 a
  request) and looks for a hit at each breakpoint and at the 20 block boundaries before it; an
  entry lives 5 minutes (an hour with ``ttl: "1h"``) after the request that last read or wrote
  it. The native loop marks its system prompt, its end and the last message it shares with the
  request before it; the gateway marks the message before the first result it newly shows as a
  receipt. So after a change the next request reads the cache at the end of the last request
  that ended at or before the message holding the change, when that is at most 20 blocks
  before the breakpoint and still alive, and else at the system prompt.
- **OpenAI** caches automatically: every prompt of 1,024 tokens or more is written whole, and
  a later one reads the longest cached prefix it starts with, from 1,024 tokens in steps of
  128. An entry lives 5 minutes after its last use, 30 minutes from GPT-5.6 on (the models
  that bill writes).
- **Any other provider**: the rule from before these, stated as such: everything before the
  first change is read from the cache, nothing after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

Rule = Literal["anthropic-breakpoints", "openai-prefix", "first-change"]

ANTHROPIC_LOOKBACK = 20
"""Block boundaries before a breakpoint where a hit is looked for."""
OPENAI_MINIMUM = 1_024
OPENAI_STEP = 128
FIVE_MINUTES = timedelta(minutes=5)
HOUR = timedelta(hours=1)
HALF_HOUR = timedelta(minutes=30)

_OPENAI_BARE = re.compile(r"^(gpt|o\d|codex)")


def rule_for(model: str) -> Rule:
    """The cache rule of a model's provider, from its id (``anthropic:...``, ``openai:...``;
    a bare Claude or GPT name as the daemon reads it); any other provider's is the fallback."""
    provider, sep, name = model.partition(":")
    if not sep:
        name = model
        provider = "anthropic" if name.startswith("claude-") else ""
        provider = "openai" if _OPENAI_BARE.match(name) else provider
    if provider == "anthropic":
        return "anthropic-breakpoints"
    if provider == "openai":
        return "openai-prefix"
    return "first-change"


def lifetime(rule: Rule, *, one_hour: bool, bills_writes: bool) -> timedelta | None:
    """How long an entry lives after its last use: Anthropic's five minutes (an hour for a
    thread whose calls write for an hour), OpenAI's five (thirty for a model that bills its
    writes: GPT-5.6 on). None under the fallback: no lifetime is applied."""
    if rule == "anthropic-breakpoints":
        return HOUR if one_hour else FIVE_MINUTES
    if rule == "openai-prefix":
        return HALF_HOUR if bills_writes else FIVE_MINUTES
    return None


@dataclass(frozen=True)
class Part:
    """One entry of the prompt after its fixed part (system prompt and tools), as the cache
    sees it."""

    tokens: int
    blocks: int
    """Content blocks: how far back Anthropic's lookback reaches."""
    role: str
    """The message it goes into: consecutive parts of one role are one message."""
    read_at: datetime | None = None
    """A request the thread made ended just before this part: when the cache there was last
    read (by the request after it) or written (by that request, if it was the last)."""


@dataclass(frozen=True)
class Reuse:
    read: int
    """Prompt tokens the next request reads from the cache, the fixed part included."""
    start: int
    """The first part it writes again, whole or in part."""


@dataclass(frozen=True)
class Cache:
    """What the provider's cache holds of a thread's prompt, as far as the thread's log says."""

    rule: Rule
    fixed: int
    parts: tuple[Part, ...]
    last_call: datetime | None
    """The thread's last model call: every request reads its fixed part."""
    now: datetime
    lifetime: timedelta | None

    def _alive(self, used: datetime | None) -> bool:
        if used is None:
            return False
        return self.lifetime is None or self.now - used <= self.lifetime

    def _through(self, position: int) -> int:
        return self.fixed + sum(p.tokens for p in self.parts[:position])

    def reuse(self, first: int) -> Reuse:
        """What the next request reads from the cache when ``parts[first]`` is the first part
        that changed."""
        if self.rule == "first-change":
            return Reuse(self._through(first), first)
        if not self._alive(self.last_call):
            return Reuse(0, 0)
        if self.rule == "anthropic-breakpoints":
            return self._anthropic(first)
        return self._openai(first)

    def _anthropic(self, first: int) -> Reuse:
        # The breakpoint goes on the message before the one holding the change.
        start = first
        while start > 0 and self.parts[start - 1].role == self.parts[first].role:
            start -= 1
        distance = 0
        for position in range(start, 0, -1):
            if distance > ANTHROPIC_LOOKBACK:
                break
            if self._alive(self.parts[position].read_at):
                return Reuse(self._through(position), position)
            distance += self.parts[position - 1].blocks
        return Reuse(self.fixed, 0)

    def _openai(self, first: int) -> Reuse:
        # What the thread's requests wrote ends where the last of them ended.
        sent = max((i for i, p in enumerate(self.parts) if p.read_at is not None), default=0)
        shared = self._through(min(first, sent))
        read = shared // OPENAI_STEP * OPENAI_STEP if shared >= OPENAI_MINIMUM else 0
        start, reach = 0, self.fixed
        for part in self.parts:
            if reach + part.tokens > read:
                break
            reach += part.tokens
            start += 1
        return Reuse(read, start)
