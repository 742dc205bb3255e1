"""Scripted replies: the dataclasses a test queues, their JSON form for the control API, and the
per-model queues a request takes its reply from. Pure and thread-safe: no I/O, no aiohttp.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias


@dataclass(frozen=True)
class Call:
    """One tool call. A dict ``arguments`` is a JSON function call; a str is a freeform tool's raw
    input (a Responses ``custom_tool_call``; Anthropic and Chat get ``{"input": str}``).

    ``Call("Bash", {"command": "echo hi"})`` or ``Call("apply_patch", "*** Begin Patch ...")``.
    ``namespace`` names the tool namespace of a Responses function call (a deferred tool Codex
    offers by namespace, ``Call("compact_context", {...}, namespace="mcp__condensate")``);
    the other APIs ignore it.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Text:
    """A plain answer that ends the turn, optionally after a thinking/reasoning block."""

    text: str
    thinking: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """One or more tool calls, optionally preceded by text and thinking."""

    calls: Sequence[Call]
    text: str = ""
    thinking: str | None = None


@dataclass(frozen=True)
class Slow:
    """Streams ``reply`` with every streamed string (thinking, text, tool arguments) cut into
    ``chunks`` pieces, ``chunk_delay`` seconds apart; a non-streaming request waits the sum."""

    reply: Reply
    chunk_delay: float = 0.05
    chunks: int = 10


@dataclass(frozen=True)
class Fail:
    """An HTTP error in the API's real shape; ``error_type`` and ``message`` default per status
    (401 auth, 413 too large, 429 rate limit, 500 server, 529 overloaded). ``retry_after``
    seconds, when given, is sent as the ``retry-after`` header."""

    status: int
    error_type: str | None = None
    message: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class Overflow:
    """A context-window refusal whatever the prompt's size. ``mode`` matters for the Responses
    API only: ``"400"`` is an HTTP 400, ``"stream"`` an HTTP 200 stream ending in
    ``response.failed``. ``tokens`` is the N in the message (default: just over the window)."""

    mode: Literal["400", "stream"] = "400"
    tokens: int | None = None


@dataclass(frozen=True)
class Usage:
    """Answers with ``reply`` but reports the given usage instead of the counted one."""

    reply: Reply
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None


Reply: TypeAlias = Text | ToolCalls | Slow | Fail | Overflow | Usage
Body: TypeAlias = Text | ToolCalls | Fail | Overflow


@dataclass(frozen=True)
class Plan:
    """A reply with its ``Slow``/``Usage`` wrappers peeled off."""

    body: Body
    kind: str
    chunks: int = 1
    chunk_delay: float = 0.0
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None


_KINDS: dict[type, str] = {
    Text: "text",
    ToolCalls: "tool_calls",
    Fail: "fail",
    Overflow: "overflow",
    Slow: "slow",
    Usage: "usage",
}


def plan_of(reply: Reply, *, default: bool = False) -> Plan:
    """Peels wrappers; ``kind`` names them outside-in, e.g. ``"usage:slow:text"``."""
    wrappers: list[str] = ["default"] if default else []
    chunks, delay = 1, 0.0
    prompt = output = cached = None
    while isinstance(reply, Slow | Usage):
        wrappers.append(_KINDS[type(reply)])
        if isinstance(reply, Slow):
            chunks, delay = max(1, reply.chunks), max(0.0, reply.chunk_delay)
        else:
            prompt = reply.prompt_tokens if reply.prompt_tokens is not None else prompt
            output = reply.output_tokens if reply.output_tokens is not None else output
            cached = reply.cached_tokens if reply.cached_tokens is not None else cached
        reply = reply.reply
    kind = ":".join([*wrappers, _KINDS[type(reply)]])
    return Plan(reply, kind, chunks, delay, prompt, output, cached)


def default_reply(number: int, prompt_chars: int) -> Text:
    """The reply when no queue has one: deterministic, naming the generation request's number
    and the length of the prompt's canonical text (see ``_accounting``)."""
    return Text(f"FAKE reply #{number}: I read {prompt_chars} chars.")


def reply_to_json(reply: Reply) -> dict[str, Any]:
    """The control API's JSON form of a reply; ``reply_from_json`` reads it back."""
    match reply:
        case Text(text=text, thinking=thinking):
            return {"type": "text", "text": text, "thinking": thinking}
        case ToolCalls(calls=calls, text=text, thinking=thinking):
            return {
                "type": "tool_calls",
                "calls": [
                    {
                        "name": c.name,
                        "arguments": _plain(c.arguments),
                        "id": c.id,
                        "namespace": c.namespace,
                    }
                    for c in calls
                ],
                "text": text,
                "thinking": thinking,
            }
        case Slow(reply=inner, chunk_delay=delay, chunks=chunks):
            return {
                "type": "slow",
                "reply": reply_to_json(inner),
                "chunk_delay": delay,
                "chunks": chunks,
            }
        case Fail(status=status, error_type=error_type, message=message, retry_after=retry_after):
            return {
                "type": "fail",
                "status": status,
                "error_type": error_type,
                "message": message,
                "retry_after": retry_after,
            }
        case Overflow(mode=mode, tokens=tokens):
            return {"type": "overflow", "mode": mode, "tokens": tokens}
        case Usage(reply=inner):
            return {
                "type": "usage",
                "reply": reply_to_json(inner),
                "prompt_tokens": reply.prompt_tokens,
                "output_tokens": reply.output_tokens,
                "cached_tokens": reply.cached_tokens,
            }


def _plain(arguments: Mapping[str, Any] | str) -> dict[str, Any] | str:
    return arguments if isinstance(arguments, str) else dict(arguments)


def reply_from_json(data: Any) -> Reply:
    """Reads one control-API reply; raises ``ValueError`` naming what is wrong."""
    if not isinstance(data, Mapping):
        msg = f"A reply must be a JSON object, not {data!r}."
        raise ValueError(msg)
    kind = data.get("type")
    try:
        match kind:
            case "text":
                return Text(str(data["text"]), _opt_str(data.get("thinking")))
            case "tool_calls":
                calls = [_call_from_json(c) for c in data["calls"]]
                return ToolCalls(calls, str(data.get("text") or ""), _opt_str(data.get("thinking")))
            case "slow":
                return Slow(
                    reply_from_json(data["reply"]),
                    float(data.get("chunk_delay", 0.05)),
                    int(data.get("chunks", 10)),
                )
            case "fail":
                retry = data.get("retry_after")
                return Fail(
                    int(data["status"]),
                    _opt_str(data.get("error_type")),
                    _opt_str(data.get("message")),
                    None if retry is None else float(retry),
                )
            case "overflow":
                mode = data.get("mode", "400")
                if mode not in ("400", "stream"):
                    msg = f'Overflow mode must be "400" or "stream", not {mode!r}.'
                    raise ValueError(msg)
                return Overflow(mode, _opt_int(data.get("tokens")))
            case "usage":
                return Usage(
                    reply_from_json(data["reply"]),
                    _opt_int(data.get("prompt_tokens")),
                    _opt_int(data.get("output_tokens")),
                    _opt_int(data.get("cached_tokens")),
                )
    except (KeyError, TypeError) as exc:
        msg = f"The {kind!r} reply {dict(data)!r} is missing or mistypes a field: {exc}."
        raise ValueError(msg) from exc
    msg = f"Unknown reply type {kind!r}; use text, tool_calls, slow, fail, overflow or usage."
    raise ValueError(msg)


def _call_from_json(data: Any) -> Call:
    if not isinstance(data, Mapping):
        msg = f"A tool call must be a JSON object, not {data!r}."
        raise ValueError(msg)
    arguments = data.get("arguments", {})
    if not isinstance(arguments, str | Mapping):
        msg = f"Tool call arguments must be an object or a string, not {arguments!r}."
        raise ValueError(msg)
    return Call(
        str(data["name"]), arguments, _opt_str(data.get("id")), _opt_str(data.get("namespace"))
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


class Script:
    """Reply queues. A request takes from its model's own queue first (the longest queue model
    that the request model equals or starts with), then from the queue for any model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str | None, deque[Reply]] = {}

    def queue(self, replies: Iterable[Reply], model: str | None = None) -> None:
        with self._lock:
            self._queues.setdefault(model, deque()).extend(replies)

    def take(self, model: str) -> Reply | None:
        with self._lock:
            own = [
                k for k, v in self._queues.items() if k is not None and v and model.startswith(k)
            ]
            replies = self._queues[max(own, key=len)] if own else self._queues.get(None)
            return replies.popleft() if replies else None

    def pending(self) -> dict[str, int]:
        """Replies left per queue; the any-model queue is keyed ``"*"``."""
        with self._lock:
            return {("*" if k is None else k): len(v) for k, v in self._queues.items() if v}

    def clear(self) -> None:
        with self._lock:
            self._queues.clear()
