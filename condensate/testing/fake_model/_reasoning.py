"""Reasoning items of the OpenAI Responses API and the prefix they follow. Pure and
thread-safe; no I/O.

"Starting with newer frontier models, the API will drop reasoning items that follow a prefix
change as part of our safeguards. When reasoning items are dropped, the model may have to redo
some reasoning, which can increase token usage" and "A reasoning item's prefix is the
conversation history that comes before it" (https://developers.openai.com/api/docs/guides/
keep-prefix-unchanged.md). No error is described, so the drop is silent. Stated, not
documented: the fake applies it from GPT-5.6 on (which models are "newer frontier models" is
not documented); a reasoning item's prefix is the request's instructions and tools and every
input item before it, reasoning items left out; the model re-creates a dropped item's reasoning
once, at its reasoning tokens, as output, whether the API dropped it or the client left it out
of a request that still holds the calls it came with (the same estimate as for Claude's
thinking, so that every way of losing it costs the same).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from condensate.testing.fake_model._accounting import (
    responses_item_text,
    responses_items,
    responses_preamble,
)
from condensate.testing.fake_model._models import drops_stale_reasoning


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class Reasoned:
    """A reasoning item the fake sent: the prefix it follows and its reasoning tokens."""

    prefix: tuple[bytes, ...]
    tokens: int


@dataclass(frozen=True)
class ReasoningOutcome:
    """The reasoning items a request carried back, those dropped and what they cost again."""

    checked: int = 0
    dropped: tuple[dict[str, str], ...] = ()
    rethink: Mapping[str, int] = field(default_factory=dict)

    @property
    def rethink_tokens(self) -> int:
        return sum(self.rethink.values())


class ReasoningLedger:
    """Every reasoning item the fake sent, by its ``id`` and its ``encrypted_content``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent: dict[str, tuple[str, Reasoned]] = {}
        self._charged: set[str] = set()
        self._by_call: dict[str, str] = {}

    def issue(self, keys: list[str], item: Reasoned, calls: Sequence[str] = ()) -> None:
        """An item sent with the reply whose function calls are ``calls`` (by call id)."""
        with self._lock:
            for key in keys:
                self._sent[key] = (keys[0], item)
            for call in calls:
                self._by_call[call] = keys[0]

    def came_with(self, call_id: str) -> tuple[str, Reasoned] | None:
        """The reasoning item the reply that made call ``call_id`` carried."""
        with self._lock:
            name = self._by_call.get(call_id)
            return None if name is None else self._sent.get(name)

    def find(self, item: Mapping[str, Any]) -> tuple[str, Reasoned] | None:
        with self._lock:
            for key in (item.get("encrypted_content"), item.get("id")):
                if isinstance(key, str) and key in self._sent:
                    return self._sent[key]
            return None

    def charge(self, names: list[str]) -> None:
        with self._lock:
            self._charged.update(names)

    def charged(self, name: str) -> bool:
        with self._lock:
            return name in self._charged

    def clear(self) -> None:
        with self._lock:
            self._sent.clear()
            self._charged.clear()


def prefix(body: Mapping[str, Any]) -> tuple[bytes, ...]:
    """What a reasoning item produced for ``body`` follows: all of it but reasoning items."""
    texts = (responses_item_text(item) for item in responses_items(body))
    return (_digest(responses_preamble(body)), *(_digest(t) for t in texts if t is not None))


def check(ledger: ReasoningLedger, model: str, body: Mapping[str, Any]) -> ReasoningOutcome:
    """The reasoning items ``body`` carries back whose prefix changed since the fake sent
    them, on the models that drop those."""
    if not drops_stale_reasoning(model):
        return ReasoningOutcome()
    before = [_digest(responses_preamble(body))]
    checked = 0
    dropped: list[dict[str, str]] = []
    rethink: dict[str, int] = {}
    kept: set[str] = set()
    calls: list[str] = []
    for index, item in enumerate(responses_items(body)):
        text = responses_item_text(item)
        if text is not None:
            before.append(_digest(text))
            if isinstance(item, Mapping) and item.get("type") in (
                "function_call",
                "custom_tool_call",
            ):
                calls.append(str(item.get("call_id")))
            continue
        found = ledger.find(item) if isinstance(item, Mapping) else None
        if found is None:
            continue
        checked += 1
        name, sent = found
        if sent.prefix == tuple(before):
            kept.add(name)
            continue
        dropped.append(
            {"type": "reasoning_dropped", "path": f"input.{index}", "reason": "prefix_mismatch"}
        )
        if not ledger.charged(name):
            rethink[name] = sent.tokens
    # A reply's calls sent back without its reasoning: left out by the client, lost all the same.
    for call in calls:
        came = ledger.came_with(call)
        if came is not None and came[0] not in kept and not ledger.charged(came[0]):
            rethink[came[0]] = came[1].tokens
    return ReasoningOutcome(checked, tuple(dropped), rethink)
