"""The fake's shared state: configuration, clock, reply queues, prompt caches, the thinking and
compaction blocks it issued, and the request log, each behind a lock so the server's loop and a
test's thread can both use them. Decides each request's outcome (``FakeState.begin``);
rendering it on the wire is left to the API modules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from condensate.testing.fake_model._accounting import DEFAULT_WINDOW, Bill, Windows
from condensate.testing.fake_model._caching import AnthropicCache, OpenAICache
from condensate.testing.fake_model._context import CompactionLedger
from condensate.testing.fake_model._models import DEFAULT_MODELS
from condensate.testing.fake_model._reasoning import ReasoningLedger
from condensate.testing.fake_model._script import (
    Fail,
    Html,
    Overflow,
    Plan,
    Raw,
    Script,
    Text,
    default_reply,
    plan_of,
)
from condensate.testing.fake_model._thinking import ThinkingLedger

Api: TypeAlias = Literal["anthropic", "openai"]
Endpoint: TypeAlias = Literal["messages", "count_tokens", "models", "responses", "chat"]
OverflowMode: TypeAlias = Literal["400", "stream"]

DEFAULT_THINKING_TOKENS = 200


@dataclass(frozen=True)
class ThinkingOutcome:
    """What the preserved-thinking check did with a request's thinking blocks: how many it
    carried, those the model did not read (``{"type": "thinking_dropped", "path", "reason"}``)
    and whether the request was refused for them."""

    checked: int
    dropped: tuple[dict[str, str], ...] = ()
    refused: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    """One request to a model API, as the fake saw and answered it.

    ``input_tokens`` is the counted prompt (what the model read, after dropped thinking and
    context edits); ``cache_read`` and ``cache_write`` are the simulated cache's split of it
    (see ``Bill``), ``cache_write_1h`` the part of ``cache_write`` written for an hour;
    ``usage`` is the usage object sent back, if any; ``thinking`` what the preserved-thinking
    check did (Anthropic, ``None`` elsewhere); ``rethink_tokens`` the output tokens the reply
    spent re-creating lost thinking; ``applied_edits`` the context edits applied (``None``
    without ``context_management``); ``compaction`` is ``"summarized"`` for a request that
    asked for a compaction block, ``"carried"`` for one that carried one back;
    ``reply`` is the reply kind (``"text"``, ``"default:text"``, ``"slow:tool_calls"``,
    ``"fail"``, ``"overflow"``, ``"stall:text"``, ``"broken:tool_calls"``, ``"html"``, ``"raw"``,
    ``"window"`` for a refusal by size, ``"invalid"``,
    ``"unauthorized"``, ``"count_tokens"``, ``"models"``, ``"compaction"``).
    """

    number: int
    api: Api
    endpoint: Endpoint
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    model: str
    input_tokens: int
    cache_read: int
    cache_write: int
    reply: str
    status: int
    usage: dict[str, Any] | None = None
    cache_write_1h: int = 0
    thinking: ThinkingOutcome | None = None
    rethink_tokens: int = 0
    applied_edits: tuple[dict[str, Any], ...] | None = None
    compaction: Literal["summarized", "carried"] | None = None


@dataclass(frozen=True)
class Details:
    """What an Anthropic request's checks did, for its ``RecordedRequest``."""

    thinking: ThinkingOutcome | None = None
    rethink_tokens: int = 0
    applied_edits: tuple[dict[str, Any], ...] | None = None
    compaction: Literal["summarized", "carried"] | None = None


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Priced:
    """A counted prompt: its bill, its length in characters (the default reply names it) and
    what to write to the cache if it is answered."""

    bill: Bill
    chars: int
    commit: Callable[[], None] = _nothing


@dataclass(frozen=True)
class Refusal:
    """A context-window refusal: ``tokens > limit``; ``mode`` as in ``Overflow``."""

    tokens: int
    limit: int
    mode: OverflowMode


@dataclass(frozen=True)
class Turn:
    """The decided outcome of one generation request. Exactly one of ``plan`` (answer or fail)
    and ``refusal`` is set."""

    number: int
    model: str
    bill: Bill
    plan: Plan | None
    refusal: Refusal | None
    kind: str

    def reported(self) -> Bill:
        if self.plan is None:
            return self.bill
        return self.bill.reported(self.plan.prompt_tokens, self.plan.cached_tokens)


@dataclass
class Config:
    """What ``POST /_fake/config`` may change at run time."""

    windows: Windows = field(default_factory=Windows)
    api_key: str | None = None
    responses_overflow: OverflowMode = "400"
    models: tuple[str, ...] = DEFAULT_MODELS
    bearer_token: str | None = None
    """When set, only ``Authorization: Bearer <bearer_token>`` passes (a subscription's OAuth
    login): an ``x-api-key``, even ``api_key`` itself, is turned away."""
    thinking_tokens: int = DEFAULT_THINKING_TOKENS
    """About how long the default thinking of a model that signs its blocks is, in tokens."""

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.windows.default,
            "windows": dict(self.windows.per_model),
            "api_key": self.api_key,
            "responses_overflow": self.responses_overflow,
            "models": list(self.models),
            "bearer_token": self.bearer_token,
            "thinking_tokens": self.thinking_tokens,
        }

    def listed_models(self) -> list[str]:
        return list(dict.fromkeys([*self.models, *self.windows.per_model]))

    def update(self, data: Mapping[str, Any]) -> None:
        """Applies the keys present: ``window`` (int or null), ``windows`` (merged; a null
        removes that model's entry), ``api_key``, ``responses_overflow``, ``models``,
        ``bearer_token``, ``thinking_tokens``."""
        known = {
            "window",
            "windows",
            "api_key",
            "responses_overflow",
            "models",
            "bearer_token",
            "thinking_tokens",
        }
        unknown = set(data) - known
        if unknown:
            msg = f"Unknown config keys {sorted(unknown)}."
            raise ValueError(msg)
        if "window" in data:
            self.windows.default = _window(data["window"], "window")
        for model, size in dict(data.get("windows") or {}).items():
            if size is None:
                self.windows.per_model.pop(model, None)
            else:
                self.windows.per_model[str(model)] = _positive(size, f"windows.{model}")
        if "api_key" in data:
            key = data["api_key"]
            self.api_key = None if key is None else str(key)
        if "responses_overflow" in data:
            mode = data["responses_overflow"]
            if mode not in ("400", "stream"):
                msg = f'responses_overflow must be "400" or "stream", not {mode!r}.'
                raise ValueError(msg)
            self.responses_overflow = mode
        if "models" in data:
            self.models = tuple(str(m) for m in data["models"])
        if "bearer_token" in data:
            token = data["bearer_token"]
            self.bearer_token = None if token is None else str(token)
        if "thinking_tokens" in data:
            self.thinking_tokens = _positive(data["thinking_tokens"], "thinking_tokens")


def _window(value: Any, name: str) -> int | None:
    return None if value is None else _positive(value, name)


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name} must be a positive integer or null, not {value!r}."
        raise ValueError(msg)
    return value


class Clock:
    """``time.monotonic()`` plus an offset a test moves forward (cache lifetimes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = 0.0

    def now(self) -> float:
        with self._lock:
            return time.monotonic() + self._offset

    def advance(self, seconds: float) -> float:
        """Moves the clock ``seconds`` forward; returns the total offset."""
        if seconds < 0:
            msg = f"The clock only moves forward; got {seconds!r} seconds."
            raise ValueError(msg)
        with self._lock:
            self._offset += seconds
            return self._offset


class FakeState:
    """Everything the handlers share. Every method is safe to call from any thread."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.clock = Clock()
        self.script = Script()
        self.anthropic_cache = AnthropicCache()
        self.openai_cache = OpenAICache()
        self.thinking = ThinkingLedger()
        self.compactions = CompactionLedger()
        self.reasoning = ReasoningLedger()
        self._lock = threading.Lock()
        self._log: list[RecordedRequest] = []
        self._generations = 0
        self._last_activity = time.monotonic()
        self._in_flight = 0

    def started(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._last_activity = time.monotonic()

    def finished(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._last_activity = time.monotonic()

    def idle_seconds(self) -> float:
        """Seconds since the last request finished; 0 while any request is in flight."""
        with self._lock:
            return 0.0 if self._in_flight else time.monotonic() - self._last_activity

    def key_ok(self, headers: Mapping[str, str]) -> bool:
        """Whether the request's key is accepted; any key (or none) when none is configured.
        A configured ``bearer_token`` is the only credential accepted, as a bearer token."""
        bearer = headers.get("Authorization", "")
        token = bearer[7:] if bearer.startswith("Bearer ") else None
        if self.config.bearer_token is not None:
            return "x-api-key" not in headers and token == self.config.bearer_token
        wanted = self.config.api_key
        if wanted is None:
            return True
        given = headers.get("x-api-key") or token
        return given == wanted

    def begin(self, model: str, priced: Priced, *, summary: str | None = None) -> Turn:
        """Refuses the prompt (window or ``Overflow``) or picks the reply. A refusal by size
        leaves the queues alone; an answered prompt commits its cache writes. With ``summary``
        (a compaction) the reply is the next queued ``Text`` if there is one, else that text."""
        bill = priced.bill
        limit = self.config.windows.limit(model)
        with self._lock:
            self._generations += 1
            number = self._generations
        if limit is not None and bill.total > limit:
            refusal = Refusal(bill.total, limit, self.config.responses_overflow)
            return Turn(number, model, bill, None, refusal, "window")
        if summary is not None:
            text = self.script.take_text(model) or Text(summary)
            priced.commit()
            return Turn(number, model, bill, plan_of(text), None, "compaction")
        reply = self.script.take(model)
        plan = (
            plan_of(reply)
            if reply is not None
            else plan_of(default_reply(number, priced.chars), default=True)
        )
        if isinstance(plan.body, Overflow):
            window = limit if limit is not None else DEFAULT_WINDOW
            tokens = plan.body.tokens or max(bill.total, window + 1)
            return Turn(
                number, model, bill, None, Refusal(tokens, window, plan.body.mode), plan.kind
            )
        if not isinstance(plan.body, Fail | Html | Raw):
            priced.commit()
        return Turn(number, model, bill, plan, None, plan.kind)

    def record(self, entry: RecordedRequest) -> RecordedRequest:
        """Appends ``entry``, numbering it in arrival order from 1."""
        with self._lock:
            entry = replace(entry, number=len(self._log) + 1)
            self._log.append(entry)
            return entry

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._log)

    def reset(self) -> None:
        """Forgets queues, caches, issued blocks, log and the request counter; configuration
        and the clock stay."""
        self.script.clear()
        self.anthropic_cache.clear()
        self.openai_cache.clear()
        self.thinking.clear()
        self.compactions.clear()
        self.reasoning.clear()
        with self._lock:
            self._log.clear()
            self._generations = 0
