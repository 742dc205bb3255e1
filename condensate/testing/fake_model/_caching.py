"""The simulated prompt caches, on the fake's clock. Pure and thread-safe; no I/O.

Anthropic (https://platform.claude.com/docs/en/build-with-claude/prompt-caching; the rules
below the page's top come from captures of it, a secondary source): only ``cache_control``
breakpoints write, at most 4 a request (a top-level ``cache_control`` puts one on the last
cacheable block); a hit is looked for at each breakpoint and at each of the 20 block boundaries
before it; entries live 5 minutes, or an hour with ``ttl: "1h"``, from the start of the request
that last wrote or read them; a prefix shorter than the model's minimum is not cached and "no
error is returned". An entry belongs to one model, thinking setting, effort and tool choice.

OpenAI (https://developers.openai.com/api/docs/guides/prompt-caching): automatic. A prompt of
1,024 tokens or more is written whole and a later one reads the longest written prefix it starts
with, at item boundaries; a shorter prompt reads and writes nothing. Entries are per model and
``prompt_cache_key``. Before GPT-5.6 an entry lives 5 minutes after its last use and at most an
hour (24 hours with ``prompt_cache_retention: "24h"``); from GPT-5.6 on, 30 minutes after its
last use. Assumed: a read is at least 1,024 tokens long (the page's minimum applied to reads).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from condensate.testing.fake_model._accounting import Bill, canonical_json
from condensate.testing.fake_model._errors import BadRequest
from condensate.testing.fake_model._models import bills_cache_writes
from condensate.testing.fake_model._parts import FIVE_MINUTES, Part, chain, ttl_of

MAX_BREAKPOINTS = 4
LOOKBACK = 20
OPENAI_MINIMUM = 1_024

Commit = Callable[[], None]


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Breakpoint:
    index: int
    """The part the breakpoint sits on; the cached prefix runs through it."""
    ttl: float


def breakpoints(parts: Sequence[Part], body: Mapping[str, Any]) -> list[Breakpoint]:
    """The request's breakpoints in order, a top-level ``cache_control`` on the last block that
    is not thinking ("Thinking blocks cannot be cached directly with `cache_control`").

    Raises ``BadRequest`` past 4 ("A maximum of 4 blocks with cache_control may be provided.",
    captured from the API, secondary) and for a one-hour breakpoint after a five-minute one
    ("a 1-hour cache entry must appear before any 5-minute cache entries"; the fake's wording).
    """
    found = [
        Breakpoint(i, p.ttl) for i, p in enumerate(parts) if p.ttl is not None and not p.is_thinking
    ]
    automatic = ttl_of(body.get("cache_control"))
    cacheable = [i for i, p in enumerate(parts) if not p.is_thinking]
    if automatic is not None and cacheable:
        found.append(Breakpoint(cacheable[-1], automatic))
    if len(found) > MAX_BREAKPOINTS:
        msg = (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(found)}."
        )
        raise BadRequest(msg)
    found.sort(key=lambda b: b.index)
    short = next((b for b in found if b.ttl == FIVE_MINUTES), None)
    for late in found:
        if short is not None and late.ttl > FIVE_MINUTES and late.index > short.index:
            msg = (
                f'{parts[late.index].path}.cache_control: a `ttl` of "1h" cannot come after a '
                f'`ttl` of "5m" (at {parts[short.index].path}): cache entries with a longer TTL '
                "must appear before shorter TTLs."
            )
            raise BadRequest(msg)
    return found


def anthropic_key(model: str, body: Mapping[str, Any]) -> str:
    """What an entry belongs to besides its prefix: the model, the thinking type and budget,
    the effort and the tool choice ("the thinking configuration and the effort level ... are
    part of the cached prompt prefix"; "Changes to `tool_choice` ... will invalidate the
    cache"). Set to its default, a field is the same as left out."""
    thinking = body.get("thinking")
    mode = None
    if isinstance(thinking, Mapping) and thinking.get("type") not in (None, "disabled"):
        mode = [thinking.get("type"), thinking.get("budget_tokens")]
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, Mapping) else None
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice == {"type": "auto"}:
        choice = None
    return canonical_json([model, mode, effort, choice])


@dataclass
class _Entry:
    ttl: float
    expires: float


class AnthropicCache:
    """Entries by (key, running digest of the parts through a breakpoint)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, bytes], _Entry] = {}

    def price(
        self,
        key: str,
        parts: Sequence[Part],
        marks: Sequence[Breakpoint],
        minimum: int,
        now: float,
    ) -> tuple[Bill, Commit]:
        """The bill of ``parts`` and what to write if the request is answered.

        Positions as the page gives them: A the highest hit, B the highest one-hour
        breakpoint after A, C the last breakpoint after A; reads A, writes B - A for an hour
        and C - B for five minutes, the rest is input. A breakpoint whose prefix is under
        ``minimum`` writes nothing.
        """
        digests = chain(parts)
        reach: list[int] = []
        for part in parts:
            reach.append((reach[-1] if reach else 0) + part.tokens)
        total = reach[-1] if reach else 0
        with self._lock:
            hit = -1
            for mark in marks:
                for i in range(mark.index, max(-1, mark.index - LOOKBACK - 1), -1):
                    entry = self._entries.get((key, digests[i]))
                    if entry is not None and entry.expires > now:
                        hit = max(hit, i)
                        break
        read = reach[hit] if hit >= 0 else 0
        writes = [m for m in marks if m.index > hit and reach[m.index] >= minimum]
        long_end = max((reach[m.index] for m in writes if m.ttl > FIVE_MINUTES), default=read)
        end = max((reach[m.index] for m in writes), default=read)
        bill = Bill(total, read, end - read, long_end - read)

        def commit() -> None:
            with self._lock:
                if hit >= 0:
                    entry = self._entries[(key, digests[hit])]
                    entry.expires = now + entry.ttl
                for mark in writes:
                    self._entries[(key, digests[mark.index])] = _Entry(mark.ttl, now + mark.ttl)

        return bill, commit

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass(frozen=True)
class Retention:
    """How long an OpenAI entry lives: ``idle`` seconds after its last use, at most ``most``
    seconds after it was written (``None``: no such limit)."""

    idle: float | None
    most: float | None


def openai_retention(model: str, body: Mapping[str, Any]) -> Retention:
    if bills_cache_writes(model):
        return Retention(idle=30 * 60.0, most=None)
    if body.get("prompt_cache_retention") == "24h":
        return Retention(idle=None, most=24 * 3600.0)
    return Retention(idle=5 * 60.0, most=3600.0)


@dataclass
class _Written:
    written: float
    used: float
    retention: Retention

    def alive(self, now: float) -> bool:
        idle, most = self.retention.idle, self.retention.most
        return (idle is None or now - self.used <= idle) and (
            most is None or now - self.written <= most
        )


class OpenAICache:
    """Entries by (model, ``prompt_cache_key``, running digest through an item)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, bytes], _Written] = {}

    def price(
        self,
        model: str,
        body: Mapping[str, Any],
        items: Sequence[str],
        counts: Sequence[int],
        now: float,
    ) -> tuple[Bill, Commit]:
        total = sum(counts)
        if total < OPENAI_MINIMUM:
            return Bill(total), _nothing
        key = str(body.get("prompt_cache_key") or "")
        retention = openai_retention(model, body)
        digests, reach, digest, tokens = [], [], b"", 0
        for item, count in zip(items, counts, strict=True):
            digest = hashlib.sha256(digest + hashlib.sha256(item.encode()).digest()).digest()
            tokens += count
            digests.append(digest)
            reach.append(tokens)
        with self._lock:
            hit = next(
                (
                    i
                    for i in range(len(digests) - 1, -1, -1)
                    if reach[i] >= OPENAI_MINIMUM
                    and (entry := self._entries.get((model, key, digests[i]))) is not None
                    and entry.alive(now)
                ),
                -1,
            )
        read = reach[hit] if hit >= 0 else 0

        def commit() -> None:
            with self._lock:
                for digest in digests:
                    entry = self._entries.get((model, key, digest))
                    if entry is not None and entry.alive(now):
                        entry.used = now
                        entry.retention = retention
                    else:
                        self._entries[(model, key, digest)] = _Written(now, now, retention)

        return Bill(total, read, total - read), commit

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
