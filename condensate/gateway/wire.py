"""What the gateway reads in requests and replies, with no I/O: the pass a request carries,
the size of what it holds, the usage in a reply (a JSON body or its SSE stream), and errors in
each provider's own shape."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from condensate.tokens import MESSAGE_OVERHEAD, Counter

Api = Literal["anthropic", "openai"]
APIS: tuple[Api, ...] = ("anthropic", "openai")
MEASURED_PATHS: dict[Api, frozenset[str]] = {
    "anthropic": frozenset({"v1/messages"}),
    "openai": frozenset({"responses"}),
}
"""The endpoints whose requests are model calls (measured, their usage logged): the path after
``/gateway/<api>/``, as the CLI appends it to its base URL."""


def credential_of(headers: Mapping[str, str]) -> str:
    """The pass: Claude Code sends its API key as ``x-api-key`` (or ``ANTHROPIC_AUTH_TOKEN`` as
    a bearer token); Codex sends its ``env_key`` as a bearer token."""
    key = headers.get("x-api-key")
    if key:
        return key.strip()
    bearer = headers.get("Authorization", "")
    return bearer[7:].strip() if bearer[:7].lower() == "bearer " else ""


def error_body(api: Api, status: int, code: str, message: str) -> dict[str, Any]:
    """An error as the provider would word it, so the CLI shows it and retries (or not) the
    way it does for the provider's own."""
    if api == "anthropic":
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
        }.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# -- what a request holds ----------------------------------------------------------------------


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in {"type", "id", "tool_use_id", "call_id", "cache_control", "role"}:
                _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def text_of(value: Any) -> str:
    """The text a provider tokenizes in a message or a fixed part, without JSON's syntax."""
    out: list[str] = []
    _strings(value, out)
    return "\n".join(out)


@dataclass(frozen=True)
class RequestShape:
    """A model request cut into the parts the meter adds up: the fixed part (system prompt,
    instructions, tool schemas) and the conversation, one entry per message or item."""

    model: str
    fixed: str
    messages: tuple[str, ...]
    """Each message's JSON, sorted keys: equal messages are equal texts."""
    stream: bool

    @classmethod
    def of(cls, api: Api, body: Mapping[str, Any]) -> RequestShape:
        if api == "anthropic":
            fixed: Any = [body.get("system"), body.get("tools")]
            conversation = body.get("messages")
        else:
            fixed = [body.get("instructions"), body.get("tools")]
            conversation = body.get("input")
            if isinstance(conversation, str):
                conversation = [{"role": "user", "content": conversation}]
        items = conversation if isinstance(conversation, list) else []
        return cls(
            model=str(body.get("model") or ""),
            fixed=text_of(fixed),
            messages=tuple(json.dumps(m, sort_keys=True, ensure_ascii=False) for m in items),
            stream=bool(body.get("stream")),
        )


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


@dataclass
class SessionMeter:
    """The meter's anchor-plus-delta rule on a session's requests: the provider's count for
    the last request whose reply came back, plus a local count of the messages appended to
    the conversation since. A request that does not extend the last one (a rewritten history)
    is counted whole."""

    counter: Counter
    counted: dict[bytes, int] = field(default_factory=dict)
    """Message digest -> tokens, for the messages of the last request."""
    last: tuple[bytes, ...] = ()
    anchor: int | None = None
    """The provider's count for ``last``, once its reply came back."""
    fixed_tokens: int = 0
    requests: int = 0

    def _count(self, text: str) -> int:
        return self.counter.count(text_of(json.loads(text))) + MESSAGE_OVERHEAD

    def measure(self, shape: RequestShape) -> tuple[int, tuple[bytes, ...]]:
        """The request's size before it is forwarded, and its digests (for ``counted``)."""
        digests = tuple(_digest(m) for m in shape.messages)
        counts = {d: self.counted.get(d) for d in digests}
        for digest, text in zip(digests, shape.messages, strict=True):
            if counts[digest] is None:
                counts[digest] = self._count(text)
        self.counted = {d: c for d, c in counts.items() if c is not None}
        if self.requests == 0:
            self.fixed_tokens = self.counter.count(shape.fixed)
        self.requests += 1
        extends = self.anchor is not None and digests[: len(self.last)] == self.last
        if extends and self.anchor is not None:
            size = self.anchor + sum(self.counted[d] for d in digests[len(self.last) :])
        else:
            size = self.fixed_tokens + sum(self.counted[d] for d in digests)
        return size, digests

    def answered(self, digests: tuple[bytes, ...], prompt: int) -> None:
        """The provider counted ``prompt`` tokens for the request of ``digests``."""
        self.last, self.anchor = digests, prompt

    def conversation_tokens(self, digests: tuple[bytes, ...]) -> int:
        return sum(self.counted.get(d, 0) for d in digests)


# -- what a reply says ---------------------------------------------------------------------------


@dataclass
class ReplyUsage:
    """The provider's count for one call, gathered from its reply."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    message_id: str | None = None
    model: str = ""
    seen: bool = False
    """Some count arrived."""
    complete: bool = False
    """The reply's last count arrived: the call can be logged."""

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    def anthropic(self, usage: Mapping[str, Any]) -> None:
        self.seen = True
        self.input = int(usage.get("input_tokens") or self.input)
        self.cache_read = int(usage.get("cache_read_input_tokens") or self.cache_read)
        self.cache_write = int(usage.get("cache_creation_input_tokens") or self.cache_write)
        self.output = int(usage.get("output_tokens") or self.output)

    def responses(self, usage: Mapping[str, Any]) -> None:
        """OpenAI counts the cached part inside ``input_tokens``; Condensate's ``input`` is
        the uncached part."""
        self.seen = True
        details = usage.get("input_tokens_details")
        cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
        self.input = max(int(usage.get("input_tokens") or 0) - cached, 0)
        self.cache_read = cached
        self.output = int(usage.get("output_tokens") or 0)

    def read_body(self, api: Api, body: Any) -> None:
        """A whole (non-streamed) reply."""
        if not isinstance(body, Mapping):
            return
        usage = body.get("usage")
        if isinstance(usage, Mapping):
            self.anthropic(usage) if api == "anthropic" else self.responses(usage)
            self.complete = True
        self.message_id = str(body["id"]) if body.get("id") else None
        self.model = str(body.get("model") or "")

    def read_event(self, api: Api, data: Any) -> None:
        """One SSE event's data."""
        if not isinstance(data, Mapping):
            return
        kind = data.get("type")
        if api == "anthropic":
            if kind == "message_start" and isinstance(data.get("message"), Mapping):
                message = data["message"]
                self.message_id = str(message.get("id") or "") or None
                self.model = str(message.get("model") or "")
                if isinstance(message.get("usage"), Mapping):
                    self.anthropic(message["usage"])
            elif kind == "message_delta" and isinstance(data.get("usage"), Mapping):
                self.anthropic(data["usage"])
                self.complete = True
            elif kind == "message_stop" and self.seen:
                self.complete = True
        elif kind in {"response.completed", "response.incomplete", "response.failed"}:
            response = data.get("response")
            if isinstance(response, Mapping):
                self.read_body(api, response)
                self.complete = self.seen


@dataclass
class SseSplitter:
    """Cuts a byte stream into SSE events; what is left of a partial event waits for the next
    chunk."""

    buffer: bytes = b""

    def feed(self, chunk: bytes) -> list[Any]:
        """The data of each event that ``chunk`` completes (``None`` for data that is not
        JSON)."""
        self.buffer += chunk.replace(b"\r\n", b"\n")
        *events, self.buffer = self.buffer.split(b"\n\n")
        out: list[Any] = []
        for event in events:
            lines = [ln[5:].lstrip() for ln in event.split(b"\n") if ln.startswith(b"data:")]
            if not lines:
                continue
            try:
                out.append(json.loads(b"\n".join(lines)))
            except ValueError:
                out.append(None)
        return out
