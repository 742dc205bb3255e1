"""The fake's shared state: configuration, reply queues, prompt cache and request log, behind
one lock so the server's loop and a test's thread can both use it. Decides each request's
outcome (``FakeState.begin``); rendering it on the wire is left to the API modules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from condensate.testing.fake_model._accounting import (
    DEFAULT_WINDOW,
    Bill,
    PromptCache,
    Windows,
    count_blocks,
)
from condensate.testing.fake_model._script import (
    Fail,
    Html,
    Overflow,
    Plan,
    Raw,
    Script,
    default_reply,
    plan_of,
)

Api: TypeAlias = Literal["anthropic", "openai"]
Endpoint: TypeAlias = Literal["messages", "count_tokens", "models", "responses", "chat"]
OverflowMode: TypeAlias = Literal["400", "stream"]

DEFAULT_MODELS = (
    "claude-opus-5-5",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "gpt-5.5",
    "gpt-5-mini",
)


@dataclass(frozen=True)
class RecordedRequest:
    """One request to a model API, as the fake saw and answered it.

    ``input_tokens`` is the counted prompt; ``cache_read`` and ``cache_write`` are the simulated
    cache's split of it (see ``Bill``); ``usage`` is the usage object sent back, if any;
    ``reply`` is the reply kind (``"text"``, ``"default:text"``, ``"slow:tool_calls"``,
    ``"fail"``, ``"overflow"``, ``"stall:text"``, ``"broken:tool_calls"``, ``"html"``, ``"raw"``,
    ``"window"`` for a refusal by size, ``"invalid"``,
    ``"unauthorized"``, ``"count_tokens"``, ``"models"``).
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

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.windows.default,
            "windows": dict(self.windows.per_model),
            "api_key": self.api_key,
            "responses_overflow": self.responses_overflow,
            "models": list(self.models),
            "bearer_token": self.bearer_token,
        }

    def listed_models(self) -> list[str]:
        return list(dict.fromkeys([*self.models, *self.windows.per_model]))

    def update(self, data: Mapping[str, Any]) -> None:
        """Applies the keys present: ``window`` (int or null), ``windows`` (merged; a null
        removes that model's entry), ``api_key``, ``responses_overflow``, ``models``,
        ``bearer_token``."""
        known = {"window", "windows", "api_key", "responses_overflow", "models", "bearer_token"}
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


def _window(value: Any, name: str) -> int | None:
    return None if value is None else _positive(value, name)


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name} must be a positive integer or null, not {value!r}."
        raise ValueError(msg)
    return value


class FakeState:
    """Everything the handlers share. Every method is safe to call from any thread."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.script = Script()
        self.cache = PromptCache()
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

    def begin(self, model: str, blocks: Sequence[str]) -> Turn:
        """Counts and bills the prompt, then refuses it (window or ``Overflow``) or picks the
        reply. A refusal by size leaves the queues alone; answered prompts enter the cache."""
        counts = count_blocks(model, blocks)
        bill = Bill.of(counts, self.cache.matched(model, blocks))
        limit = self.config.windows.limit(model)
        with self._lock:
            self._generations += 1
            number = self._generations
        if limit is not None and bill.total > limit:
            refusal = Refusal(bill.total, limit, self.config.responses_overflow)
            return Turn(number, model, bill, None, refusal, "window")
        reply = self.script.take(model)
        plan = (
            plan_of(reply)
            if reply is not None
            else plan_of(default_reply(number, sum(map(len, blocks))), default=True)
        )
        if isinstance(plan.body, Overflow):
            window = limit if limit is not None else DEFAULT_WINDOW
            tokens = plan.body.tokens or max(bill.total, window + 1)
            return Turn(
                number, model, bill, None, Refusal(tokens, window, plan.body.mode), plan.kind
            )
        if not isinstance(plan.body, Fail | Html | Raw):
            self.cache.remember(model, blocks)
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
        """Forgets queues, cache, log and the request counter; configuration stays."""
        self.script.clear()
        self.cache.clear()
        with self._lock:
            self._log.clear()
            self._generations = 0
