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

    ``raw`` is sent as the arguments text as it is, JSON or not, in place of ``arguments``:
    ``Call("read", raw="{'path': 'a.txt'}")``, as small local models write. Chat and Responses
    send it as the function call's ``arguments``, an Anthropic stream as its
    ``input_json_delta`` pieces; an Anthropic JSON reply, which has no arguments text, sends
    the parsed JSON as ``input`` when it is JSON and the string itself when it is not.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    namespace: str | None = None
    raw: str | None = None


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


@dataclass(frozen=True)
class Broken:
    """A broken stream: ``reply`` is streamed, but after its first ``after`` events comes a
    ``data:`` line holding ``line``, which is not JSON, and then the rest. A non-streaming
    request gets its JSON body cut off in the middle."""

    reply: Reply
    after: int = 2
    line: str = "<html><body>502 Bad Gateway</body></html>"


@dataclass(frozen=True)
class Stall:
    """A stall: the response headers and the first ``after`` events of ``reply`` are sent,
    then nothing for ``seconds``, then the rest (``after=0``: headers, then silence). A
    non-streaming request gets its headers, the silence, then its body. The silence ends
    early when the client hangs up."""

    reply: Reply
    seconds: float = 30.0
    after: int = 0


@dataclass(frozen=True)
class Unframed:
    """A stream missing its frame. ``drop="start"`` leaves out the opening events (Anthropic
    ``message_start``; Responses ``response.created`` and ``response.in_progress``; Chat the
    ``role`` chunk), ``"stop"`` the closing ones (Anthropic ``message_stop``; Responses
    ``response.completed``; Chat the ``finish_reason`` chunk, the usage chunk and
    ``[DONE]``), ``"all"`` every event (a 200 stream that carries nothing). A non-streaming
    request gets ``{}``."""

    reply: Reply
    drop: Literal["start", "stop", "all"] = "stop"


@dataclass(frozen=True)
class Cut:
    """``reply`` stops at the output token limit: its last tool call's arguments text (else
    its text) keeps only its first ``keep`` characters (default: half). Anthropic says
    ``stop_reason: "max_tokens"`` (a stream ends in the middle of the ``input_json_delta``
    pieces, then closes its block and the message), Responses ends in ``response.incomplete``
    (``max_output_tokens``), Chat says ``finish_reason: "length"``."""

    reply: Reply
    keep: int | None = None


@dataclass(frozen=True)
class Html:
    """A body that is not JSON with ``status`` (default 200), as a proxy or a captive portal
    sends it, whether or not the request streams."""

    body: str = "<!DOCTYPE html><html><body><h1>Sign in to the Wi-Fi</h1></body></html>"
    status: int = 200
    content_type: str = "text/html"


@dataclass(frozen=True)
class Raw:
    """HTTP 200 with JSON of any shape: ``body`` for a non-streaming request; a streaming one
    gets each of ``events`` as a ``data:`` line (a str as it is, anything else as JSON), with
    an ``event:`` line naming an object's ``type`` when it has one."""

    body: Any = None
    events: Sequence[Any] = ()


Reply: TypeAlias = (
    Text | ToolCalls | Slow | Fail | Overflow | Usage | Broken | Stall | Unframed | Cut | Html | Raw
)
Body: TypeAlias = Text | ToolCalls | Fail | Overflow | Html | Raw
_WRAPPERS = (Slow, Usage, Broken, Stall, Unframed, Cut)


@dataclass(frozen=True)
class Plan:
    """A reply with its wrappers peeled off: the pacing of ``Slow``, the usage of ``Usage``
    and the faults of ``Broken``, ``Stall``, ``Unframed`` and ``Cut``."""

    body: Body
    kind: str
    chunks: int = 1
    chunk_delay: float = 0.0
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    broken: Broken | None = None
    stall: Stall | None = None
    unframed: Unframed | None = None
    cut: Cut | None = None


_KINDS: dict[type, str] = {
    Text: "text",
    ToolCalls: "tool_calls",
    Fail: "fail",
    Overflow: "overflow",
    Slow: "slow",
    Usage: "usage",
    Broken: "broken",
    Stall: "stall",
    Unframed: "unframed",
    Cut: "cut",
    Html: "html",
    Raw: "raw",
}


def plan_of(reply: Reply, *, default: bool = False) -> Plan:
    """Peels wrappers; ``kind`` names them outside-in, e.g. ``"usage:slow:text"``."""
    wrappers: list[str] = ["default"] if default else []
    chunks, delay = 1, 0.0
    prompt = output = cached = None
    faults: dict[str, Any] = {}
    while isinstance(reply, _WRAPPERS):
        wrappers.append(_KINDS[type(reply)])
        match reply:
            case Slow():
                chunks, delay = max(1, reply.chunks), max(0.0, reply.chunk_delay)
            case Usage():
                prompt = reply.prompt_tokens if reply.prompt_tokens is not None else prompt
                output = reply.output_tokens if reply.output_tokens is not None else output
                cached = reply.cached_tokens if reply.cached_tokens is not None else cached
            case _:
                faults.setdefault(_KINDS[type(reply)], reply)
        reply = reply.reply
    kind = ":".join([*wrappers, _KINDS[type(reply)]])
    return Plan(reply, kind, chunks, delay, prompt, output, cached, **faults)


def default_reply(number: int, prompt_chars: int) -> Text:
    """The reply when no queue has one: deterministic, naming the generation request's number
    and the length of the prompt's canonical text (see ``_accounting``)."""
    return Text(f"FAKE reply #{number}: I read {prompt_chars} chars.")


def reply_to_json(reply: Reply) -> dict[str, Any]:
    """The control API's JSON form of a reply; ``reply_from_json`` reads it back.

    An object whose ``type`` names the class (``text``, ``tool_calls``, ``slow``, ``fail``,
    ``overflow``, ``usage``, ``broken``, ``stall``, ``unframed``, ``cut``, ``html``, ``raw``)
    and whose other keys are its fields; a wrapper's ``reply`` is another such object:
    ``{"type": "stall", "reply": {"type": "text", "text": "late"}, "seconds": 5}``.
    """
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
                        "raw": c.raw,
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
        case Broken(reply=inner, after=after, line=line):
            return {"type": "broken", "reply": reply_to_json(inner), "after": after, "line": line}
        case Stall(reply=inner, seconds=seconds, after=after):
            return {
                "type": "stall",
                "reply": reply_to_json(inner),
                "seconds": seconds,
                "after": after,
            }
        case Unframed(reply=inner, drop=drop):
            return {"type": "unframed", "reply": reply_to_json(inner), "drop": drop}
        case Cut(reply=inner, keep=keep):
            return {"type": "cut", "reply": reply_to_json(inner), "keep": keep}
        case Html(body=body, status=status, content_type=content_type):
            return {"type": "html", "body": body, "status": status, "content_type": content_type}
        case Raw(body=body, events=events):
            return {"type": "raw", "body": body, "events": list(events)}


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
            case _:
                return _fault_from_json(kind, data)
    except (KeyError, TypeError) as exc:
        msg = f"The {kind!r} reply {dict(data)!r} is missing or mistypes a field: {exc}."
        raise ValueError(msg) from exc


def _fault_from_json(kind: Any, data: Mapping[str, Any]) -> Reply:
    match kind:
        case "broken":
            line = data.get("line")
            return Broken(
                reply_from_json(data["reply"]),
                int(data.get("after", 2)),
                Broken.line if line is None else str(line),
            )
        case "stall":
            return Stall(
                reply_from_json(data["reply"]),
                float(data.get("seconds", 30.0)),
                int(data.get("after", 0)),
            )
        case "unframed":
            drop = data.get("drop", "stop")
            if drop not in ("start", "stop", "all"):
                msg = f'Unframed drop must be "start", "stop" or "all", not {drop!r}.'
                raise ValueError(msg)
            return Unframed(reply_from_json(data["reply"]), drop)
        case "cut":
            return Cut(reply_from_json(data["reply"]), _opt_int(data.get("keep")))
        case "html":
            return Html(
                str(data.get("body", Html.body)),
                int(data.get("status", 200)),
                str(data.get("content_type", Html.content_type)),
            )
        case "raw":
            events = data.get("events") or []
            if not isinstance(events, list):
                msg = f"Raw events must be a list, not {events!r}."
                raise ValueError(msg)
            return Raw(data.get("body"), events)
    msg = (
        f"Unknown reply type {kind!r}; use text, tool_calls, slow, fail, overflow, usage, "
        "broken, stall, unframed, cut, html or raw."
    )
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
        str(data["name"]),
        arguments,
        _opt_str(data.get("id")),
        _opt_str(data.get("namespace")),
        _opt_str(data.get("raw")),
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
            replies = self._queue_for(model)
            return replies.popleft() if replies else None

    def take_text(self, model: str) -> Text | None:
        """The next reply for ``model`` if it is a ``Text`` (a compaction's summary); any other
        reply stays queued."""
        with self._lock:
            replies = self._queue_for(model)
            if replies and isinstance(replies[0], Text):
                head = replies.popleft()
                assert isinstance(head, Text)
                return head
            return None

    def _queue_for(self, model: str) -> deque[Reply] | None:
        own = [k for k, v in self._queues.items() if k is not None and v and model.startswith(k)]
        return self._queues[max(own, key=len)] if own else self._queues.get(None)

    def pending(self) -> dict[str, int]:
        """Replies left per queue; the any-model queue is keyed ``"*"``."""
        with self._lock:
            return {("*" if k is None else k): len(v) for k, v in self._queues.items() if v}

    def clear(self) -> None:
        with self._lock:
            self._queues.clear()
