"""What the gateway reads in requests and replies, with no I/O: the pass a request carries,
the size of what it holds, the usage in a reply (a JSON body or its SSE stream), and errors in
each provider's own shape."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from condensate.core import clamps
from condensate.core.tokens import MESSAGE_OVERHEAD, Counter
from condensate.gateway.binding import canonical_digest
from condensate.gateway.bound import bound as bytes_bound

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
        # Anthropic's shape has no code: the sentence carries it, as the CLI shows only that.
        return {"type": "error", "error": {"type": kind, "message": f"{message} ({code})"}}
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
    fixed_part: Any
    """The system prompt (instructions) and tool schemas, as sent: turned into text only
    for a session's first request (``fixed``), as it seldom changes and is large."""
    messages: tuple[Any, ...]
    """Each message (item) as parsed."""
    stream: bool

    @property
    def fixed(self) -> str:
        return text_of(self.fixed_part)

    @classmethod
    def of(cls, api: Api, body: Mapping[str, Any]) -> RequestShape:
        if api == "anthropic":
            fixed: Any = [body.get("system"), body.get("tools")]
            conversation = body.get("messages")
        else:
            given = body.get("input")
            if isinstance(given, str):
                given = [{"role": "user", "content": given}]
            listed: list[Any] = given if isinstance(given, list) else []
            leading = _leading_fixed(listed)
            fixed = [body.get("instructions"), body.get("tools"), *listed[:leading]]
            conversation = listed[leading:]
        items = conversation if isinstance(conversation, list) else []
        return cls(
            model=str(body.get("model") or ""),
            fixed_part=fixed,
            messages=tuple(items),
            stream=bool(body.get("stream")),
        )


def _leading_fixed(items: list[Any]) -> int:
    """How many items open a Responses request as its fixed part: the tools Codex sends as an
    ``additional_tools`` item on its default model ("lite" requests) and its developer (or
    system) messages, before the conversation starts."""
    count = 0
    for item in items:
        if not isinstance(item, Mapping):
            break
        kind = item.get("type", "message")
        if kind != "additional_tools" and not (
            kind == "message" and item.get("role") in ("developer", "system")
        ):
            break
        count += 1
    return count


@dataclass(frozen=True)
class Sent:
    """A request's conversation as the meter counted it: its messages and their counts."""

    messages: tuple[Any, ...] = ()
    counts: tuple[int, ...] = ()


def _common_prefix(new: tuple[Any, ...], old: tuple[Any, ...]) -> int:
    """How many leading messages ``new`` shares with ``old`` (compared as parsed JSON)."""
    if new[: len(old)] == old:
        return len(old)
    shared = 0
    for a, b in zip(new, old, strict=False):
        if a != b:
            break
        shared += 1
    return shared


@dataclass
class SessionMeter:
    """The meter's anchor-plus-delta rule on a session's requests: the provider's count for
    the last request whose reply came back, plus a local count of the messages appended to
    the conversation since. A request that does not extend the last one (a rewritten history)
    is counted whole. Messages are compared as parsed (no re-encoding) and only new ones are
    counted: this runs on every request, in its latency."""

    counter: Counter
    last: Sent = field(default_factory=Sent)
    """The last request whose reply came back."""
    seen: Sent = field(default_factory=Sent)
    """The last request measured (its counts are reused for the next)."""
    anchor: int | None = None
    """The provider's count for ``last``, once its reply came back."""
    prior: bytes | None = None
    """``last`` as it was sent, when those were the CLI's own bytes."""
    fixed_tokens: int = 0
    requests: int = 0

    def _count(self, message: Any) -> int:
        return self.counter.count(text_of(message)) + MESSAGE_OVERHEAD

    def measure(self, shape: RequestShape, baseline: int | None = None) -> tuple[int, Sent]:
        """The request's size before it is forwarded, and what was counted (for
        ``answered``). A request with no count to stand on (a session's first) has
        ``baseline`` as its fixed part when given: the thread's, measured on an earlier
        session's first reply, where the local count of schemas and prompts can be far off
        the provider's."""
        messages = shape.messages
        seen = self.seen
        known = _common_prefix(messages, seen.messages)
        counts = seen.counts[:known] + tuple(self._count(m) for m in messages[known:])
        sent = Sent(messages, counts)
        self.seen = sent
        if self.requests == 0:
            self.fixed_tokens = self.counter.count(shape.fixed)
        self.requests += 1
        anchored = len(self.last.messages)
        if self.anchor is not None:
            # The answered request is most often the one seen last: compared once.
            shared = known if self.last is seen else _common_prefix(messages, self.last.messages)
            if shared == anchored:
                return self.anchor + sum(counts[anchored:]), sent
        fixed = self.fixed_tokens if baseline is None else baseline
        return fixed + sum(counts), sent

    def answered(self, sent: Sent, prompt: int, body: bytes | None = None) -> None:
        """The provider counted ``prompt`` tokens for the request ``sent``, whose bytes were
        ``body`` (None: not the CLI's own, a receipt replaced something)."""
        self.last, self.anchor, self.prior = sent, prompt, body

    def bound(self, body: bytes) -> int | None:
        """At most how many tokens the provider counts for ``body``, from its bytes and the
        last counted request's (``bound``); None when they cannot say."""
        if self.anchor is None or self.prior is None:
            return None
        return bytes_bound(self.prior, self.anchor, body)

    def conversation_tokens(self, sent: Sent) -> int:
        return sum(sent.counts)

    def baseline(self, prompt: int, sent: Sent) -> int:
        """The fixed part of a first request the provider counted ``prompt``: the count less
        the conversation, kept within half and twice the local count of its text (a count
        that says more holds what no request shows, and is no baseline)."""
        rest = prompt - self.conversation_tokens(sent)
        return min(max(rest, self.fixed_tokens // 2), 2 * self.fixed_tokens)


# -- what a reply says ---------------------------------------------------------------------------


@dataclass
class ReplyUsage:
    """The provider's count for one call, gathered from its reply."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    cache_write_1h: int = 0
    """Of ``cache_write``, the tokens written for an hour."""
    compaction_input: int = 0
    compaction_output: int = 0
    """A server-side compaction's tokens, billed beside the reply's."""
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
        creation = usage.get("cache_creation")
        if isinstance(creation, Mapping):
            hour = creation.get("ephemeral_1h_input_tokens")
            self.cache_write_1h = int(hour or self.cache_write_1h)
        iterations = usage.get("iterations")
        if isinstance(iterations, list):
            # The top-level counts leave the compaction out; each event that carries the
            # list carries all of it, so it replaces what an earlier one said.
            compactions = [
                i for i in iterations if isinstance(i, Mapping) and i.get("type") == "compaction"
            ]
            self.compaction_input = sum(int(i.get("input_tokens") or 0) for i in compactions)
            self.compaction_output = sum(int(i.get("output_tokens") or 0) for i in compactions)

    def responses(self, usage: Mapping[str, Any]) -> None:
        """OpenAI counts the cached and the written parts inside ``input_tokens``;
        Condensate's ``input`` is the rest (GPT-5.6 and later report writes)."""
        self.seen = True
        details = usage.get("input_tokens_details")
        if not isinstance(details, Mapping):
            details = {}
        cached = int(details.get("cached_tokens") or 0)
        written = int(details.get("cache_write_tokens") or 0)
        self.input = max(int(usage.get("input_tokens") or 0) - cached - written, 0)
        self.cache_read = cached
        self.cache_write = written
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


TEXT_EVENTS = (b"text_delta", b"output_text.delta")
"""The events that carry a reply's text as it is written (read only while somebody follows
the thread live)."""
USAGE_EVENTS = (
    b"message_start",
    b"message_delta",
    b"message_stop",
    b"response.completed",
    b"response.incomplete",
    b"response.failed",
)
"""The events that carry a reply's counts, or end it."""


@dataclass
class SseSplitter:
    """Cuts a byte stream into SSE events; what is left of a partial event waits for the next
    chunk."""

    buffer: bytes = b""
    wanted: tuple[bytes, ...] | None = None
    """Decode only events whose bytes hold one of these (None: every event): a reply's text
    deltas need no parsing to find its counts."""

    def feed(self, chunk: bytes) -> list[Any]:
        """The data of each event that ``chunk`` completes (``None`` for data that is not
        JSON)."""
        # Normalized with what came before: a chunk may end between a CR and its LF.
        self.buffer = (self.buffer + chunk).replace(b"\r\n", b"\n")
        *events, self.buffer = self.buffer.split(b"\n\n")
        out: list[Any] = []
        for event in events:
            if self.wanted is not None and not any(w in event for w in self.wanted):
                continue
            lines = [ln[5:].lstrip() for ln in event.split(b"\n") if ln.startswith(b"data:")]
            if not lines:
                continue
            try:
                out.append(json.loads(b"\n".join(lines)))
            except ValueError:
                out.append(None)
        return out


# -- Condensate's own answers --------------------------------------------------------------------

HELD_MARK = "[condensate]"
"""How a reply the gateway wrote (not the model) begins: the engines do not log it as the
model's words."""


def held_text(reason: str) -> str:
    return f"{HELD_MARK} {reason}"


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def held_reply(api: Api, model: str, text: str, reply_id: str) -> dict[str, Any]:
    """A whole reply, in the API's shape, that ends the CLI's turn with ``text`` and no tool
    call; it counts no tokens."""
    if api == "anthropic":
        return {
            "id": reply_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
    return {
        "id": reply_id,
        "object": "response",
        "status": "completed",
        "model": model,
        "output": [_responses_message(reply_id, text)],
        "usage": {
            "input_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "total_tokens": 0,
        },
    }


def _responses_message(reply_id: str, text: str) -> dict[str, Any]:
    return {
        "id": f"{reply_id}_msg",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def held_stream(api: Api, model: str, text: str, reply_id: str) -> bytes:
    """The same reply as the SSE events the API streams."""
    whole = held_reply(api, model, text, reply_id)
    if api == "anthropic":
        opening = {**whole, "content": [], "stop_reason": None}
        block = {"type": "text", "text": ""}
        return b"".join(
            [
                _sse("message_start", {"type": "message_start", "message": opening}),
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": block},
                ),
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": text},
                    },
                ),
                _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
                _sse(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": 0},
                    },
                ),
                _sse("message_stop", {"type": "message_stop"}),
            ]
        )
    item = _responses_message(reply_id, text)
    started = {**whole, "status": "in_progress", "output": [], "usage": None}
    at: dict[str, Any] = {"item_id": item["id"], "output_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": started}),
        ("response.in_progress", {"response": started}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
        ),
        ("response.content_part.added", {**at, "content_index": 0, "part": part}),
        ("response.output_text.delta", {**at, "content_index": 0, "delta": text}),
        ("response.output_text.done", {**at, "content_index": 0, "text": text}),
        ("response.content_part.done", {**at, "content_index": 0, "part": item["content"][0]}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": whole}),
    ]
    return b"".join(
        _sse(name, {"type": name, "sequence_number": n, **data})
        for n, (name, data) in enumerate(events)
    )


# -- cheap tiers in flight -----------------------------------------------------------------------


def result_ids(api: Api, body: Mapping[str, Any]) -> list[str]:
    """The call ids of the tool results a request carries, in order."""
    ids: list[str] = []
    if api == "anthropic":
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else []:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    ids.append(str(block.get("tool_use_id") or ""))
    else:
        for item in body.get("input") or []:
            if isinstance(item, Mapping) and str(item.get("type", "")).endswith("_output"):
                ids.append(str(item.get("call_id") or ""))
    return [i for i in ids if i]


@dataclass(frozen=True)
class NewestResult:
    """The last tool result a request carries: its call, that call's tool, and its size."""

    call_id: str
    tool: str
    chars: int


def newest_result(api: Api, body: Mapping[str, Any]) -> NewestResult | None:
    """The request's last tool result (None: it carries none)."""
    tools: dict[str, str] = {}
    newest: tuple[str, Any] | None = None
    if api == "anthropic":
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, Mapping):
                    continue
                if block.get("type") == "tool_use":
                    tools[str(block.get("id"))] = str(block.get("name") or "")
                elif block.get("type") == "tool_result":
                    newest = str(block.get("tool_use_id") or ""), block.get("content")
    else:
        items = body.get("input")
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, Mapping):
                continue
            kind = str(item.get("type", ""))
            if kind.endswith("_call"):
                tools[str(item.get("call_id"))] = str(item.get("name") or "")
            elif kind.endswith("_output"):
                newest = str(item.get("call_id") or ""), item.get("output")
    if newest is None or not newest[0]:
        return None
    call_id, output = newest
    return NewestResult(call_id, tools.get(call_id, ""), len(text_of(output)))


def with_receipts(
    api: Api, body: Mapping[str, Any], receipts: Mapping[str, str]
) -> tuple[dict[str, Any], int]:
    """``body`` with every tool result whose call has a receipt replaced by it (the view's
    cheap tiers, applied to what the provider sees), and how many were replaced. Messages
    without one are the same objects: the request is otherwise unchanged."""
    out = dict(body)
    replaced = 0
    if not receipts:
        return out, 0
    if api == "anthropic":
        messages = []
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, Mapping) else None
            if not isinstance(content, list):
                messages.append(message)
                continue
            blocks = []
            for block in content:
                receipt = (
                    receipts.get(str(block.get("tool_use_id")))
                    if isinstance(block, Mapping) and block.get("type") == "tool_result"
                    else None
                )
                if receipt is not None and block.get("content") != receipt:
                    blocks.append({**block, "content": receipt})
                    replaced += 1
                else:
                    blocks.append(block)
            messages.append({**message, "content": blocks} if blocks != content else message)
        out["messages"] = messages
    else:
        conversation = body.get("input")
        if not isinstance(conversation, list):
            return out, 0  # a string input holds no tool result
        items = []
        for item in conversation:
            receipt = (
                receipts.get(str(item.get("call_id")))
                if isinstance(item, Mapping) and str(item.get("type", "")).endswith("_output")
                else None
            )
            if receipt is not None and item.get("output") != receipt:
                items.append({**item, "output": receipt})
                replaced += 1
            else:
                items.append(item)
        out["input"] = items
    return out, replaced


# -- clamps in flight ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Clamps:
    """The texts and calls of a thread's view that are clamped (``clamps``), as its CLI's
    requests carry them: a text block by its digest, a call by its id, each with the seq the
    log keeps its original at. Results are the receipts' (their clamped output by call id)."""

    cap: int = 0
    texts: Mapping[str, int] = field(default_factory=dict)
    calls: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.texts or self.calls)

    def text(self, text: str) -> str:
        """``text`` as the view shows it."""
        if len(text) <= self.cap:
            return text
        seq = self.texts.get(clamps.digest(text))
        return text if seq is None else clamps.clamp(text, self.cap, seq)


def with_clamps(api: Api, body: Mapping[str, Any], found: Clamps) -> tuple[dict[str, Any], int]:
    """``body`` with each clamped message text and each clamped call's arguments shown as
    the view shows them, and how many were changed; the rest is the same objects."""
    out = dict(body)
    if not found:
        return out, 0
    changed = 0
    if api == "anthropic":
        messages = []
        for message in body.get("messages") or []:
            new = _clamped_message(message, found) if isinstance(message, Mapping) else message
            changed += new is not message
            messages.append(new)
        out["messages"] = messages
        return out, changed
    conversation = body.get("input")
    if not isinstance(conversation, list):
        return out, 0
    items = []
    for item in conversation:
        new = _clamped_item(item, found) if isinstance(item, Mapping) else item
        changed += new is not item
        items.append(new)
    out["input"] = items
    return out, changed


def _clamped_message(message: Mapping[str, Any], found: Clamps) -> Mapping[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        shown = found.text(content)
        return message if shown == content else {**message, "content": shown}
    if not isinstance(content, list):
        return message
    blocks = [_clamped_block(b, found) if isinstance(b, Mapping) else b for b in content]
    same = all(a is b for a, b in zip(blocks, content, strict=True))
    return message if same else {**message, "content": blocks}


def _clamped_block(block: Mapping[str, Any], found: Clamps) -> Mapping[str, Any]:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        shown = found.text(block["text"])
        return block if shown == block["text"] else {**block, "text": shown}
    if kind == "tool_use" and (seq := found.calls.get(str(block.get("id")))) is not None:
        arguments = block.get("input")
        if clamps.has_long_string(arguments, found.cap):
            return {**block, "input": clamps.clamp_value(arguments, found.cap, seq)}
    return block


def _clamped_item(item: Mapping[str, Any], found: Clamps) -> Mapping[str, Any]:
    kind = item.get("type")
    if kind == "message" and isinstance(item.get("content"), list):
        parts = []
        for part in item["content"]:
            text = part.get("text") if isinstance(part, Mapping) else None
            shown = found.text(text) if isinstance(text, str) else text
            parts.append(part if shown == text else {**part, "text": shown})
        same = all(a is b for a, b in zip(parts, item["content"], strict=True))
        return item if same else {**item, "content": parts}
    seq = found.calls.get(str(item.get("call_id")))
    if seq is None:
        return item
    for key in ("arguments", "input"):  # a function call's JSON, a custom call's text
        value = item.get(key)
        if isinstance(value, str) and len(value) > found.cap:
            shown = (
                clamps.clamped_json(value, found.cap, seq)
                if key == "arguments"
                else clamps.clamp(value, found.cap, seq, argument=True)
            )
            return {**item, key: shown}
    return item


# -- an agent's reset in flight ------------------------------------------------------------------


@dataclass(frozen=True)
class ResetCut:
    """An agent-reset thread's latest committed reset, as the provider is to see it: the
    fixed context, then ``notice``, then the agent's ``condense`` call (``call_id``) and all
    that followed it. ``own_context`` opens the text blocks the CLI itself writes into the
    conversation (its environment, its instructions): fixed context, kept."""

    call_id: str
    notice: str
    own_context: tuple[str, ...] = ()


def with_reset(api: Api, body: Mapping[str, Any], cut: ResetCut) -> tuple[dict[str, Any], bool]:
    """``body`` starting again from the reset, and whether it did: the CLI keeps its whole
    history, and each request is cut where the reset cut the view. A request that does not
    hold the call (a new session) is unchanged."""
    if api == "anthropic":
        messages = body.get("messages")
        if not isinstance(messages, list):
            return dict(body), False
        at = _anthropic_call(messages, cut.call_id)
        if at is None:
            return dict(body), False
        before = messages[:at]
        own = _own_blocks(before, cut.own_context)
        notice = {"role": "user", "content": [*own, {"type": "text", "text": cut.notice}]}
        system = [m for m in before if isinstance(m, Mapping) and m.get("role") == "system"]
        return {**body, "messages": [notice, *system, *messages[at:]]}, True
    items = body.get("input")
    if not isinstance(items, list):
        return dict(body), False
    at = _responses_call(items, cut.call_id)
    if at is None:
        return dict(body), False
    fixed = [item for item in items[:at] if _fixed_item(item, cut.own_context)]
    notice_item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": cut.notice}],
    }
    return {**body, "input": [*fixed, notice_item, *items[at:]]}, True


def _anthropic_call(messages: list[Any], call_id: str) -> int | None:
    """Where the assistant message holding the call is."""
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if (
                isinstance(block, Mapping)
                and block.get("type") == "tool_use"
                and str(block.get("id")) == call_id
            ):
                return i
    return None


def _own_blocks(messages: list[Any], marks: tuple[str, ...]) -> list[Any]:
    """The CLI's own text blocks at the start of the first user message."""
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if _opens_with(b, marks)]
    return []


def _opens_with(block: Any, marks: tuple[str, ...]) -> bool:
    if not isinstance(block, Mapping) or block.get("type") not in ("text", "input_text"):
        return False
    return bool(marks) and str(block.get("text") or "").lstrip().startswith(marks)


def _responses_call(items: list[Any], call_id: str) -> int | None:
    """Where the response holding the call starts: its reasoning and its text come before
    the call in the input."""
    for i, item in enumerate(items):
        if (
            isinstance(item, Mapping)
            and item.get("type") == "function_call"
            and str(item.get("call_id")) == call_id
        ):
            start = i
            while start > 0 and _same_response(items[start - 1]):
                start -= 1
            return start
    return None


def _same_response(item: Any) -> bool:
    if not isinstance(item, Mapping):
        return False
    kind = item.get("type")
    return kind == "reasoning" or (kind == "message" and item.get("role") == "assistant")


def _fixed_item(item: Any, marks: tuple[str, ...]) -> bool:
    """An item of the fixed context: the instructions (developer or system messages), or a
    user message the CLI wrote itself (its environment)."""
    if not isinstance(item, Mapping) or item.get("type", "message") != "message":
        return False
    role = item.get("role")
    if role in ("developer", "system"):
        return True
    content = item.get("content")
    if role != "user" or not isinstance(content, list) or not content:
        return False
    return all(_opens_with(block, marks) for block in content)


# -- notices, kept where they were first added ------------------------------------------------


@dataclass(frozen=True)
class Notice:
    """A text the thread's next request is due to carry: ``key`` says which (a level of the
    near-line notice, a staged warning's level), so that each is added once a session."""

    key: str
    text: str


@dataclass(frozen=True)
class Notices:
    """What the runtime says a request is due to carry beside what the CLI sent: a notice
    near the line; an agent-reset thread's staged warning."""

    near: Notice | None = None
    warning: Notice | None = None

    def due(self) -> tuple[Notice, ...]:
        return tuple(n for n in (self.near, self.warning) if n is not None)


@dataclass(frozen=True)
class Insertion:
    """A notice the gateway added to a session's conversation, after the content of the
    message (item) at ``index`` of the CLI's requests, whose digest is ``anchor``. It stays
    there in every later request of the session: a notice added to one request and gone
    from the next would change what the model's later thinking is bound to."""

    key: str
    text: str
    index: int
    anchor: bytes


def _conversation(api: Api, body: Mapping[str, Any]) -> list[Any] | None:
    conversation = body.get("messages" if api == "anthropic" else "input")
    return conversation if isinstance(conversation, list) else None


def insertion_at_end(api: Api, body: Mapping[str, Any], notice: Notice) -> Insertion | None:
    """Where ``notice`` goes in ``body``: after its last message, when that is the user's
    (tool results or a steer; a system-role message after it does not count); None when it
    cannot go (no conversation, or it ends in the model's turn)."""
    conversation = _conversation(api, body)
    if not conversation:
        return None
    at = len(conversation) - 1
    if api == "anthropic":
        # Claude Code may end a request with a system-role message of its own (its
        # environment, on a session's first request): the notice joins the user's turn before.
        while at > 0 and _role(conversation[at]) == "system":
            at -= 1
        if _role(conversation[at]) != "user":
            return None
    last = conversation[at]
    if not isinstance(last, Mapping):
        return None
    return Insertion(notice.key, notice.text, at, canonical_digest(last))


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def with_insertions(
    api: Api, body: Mapping[str, Any], insertions: Sequence[Insertion]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``body`` carrying each insertion whose anchor it still holds (a history the CLI
    rewrote, or another conversation on the same pass, holds none), and the keys of those it
    carries; the messages it does not touch are the same objects."""
    out = dict(body)
    conversation = _conversation(api, body)
    if not insertions or conversation is None:
        return out, ()
    items = list(conversation)
    carried: list[str] = []
    added: dict[int, list[str]] = {}
    for insertion in insertions:
        at = insertion.index
        if at < len(items) and canonical_digest(conversation[at]) == insertion.anchor:
            added.setdefault(at, []).append(insertion.text)
            carried.append(insertion.key)
    if not carried:
        return out, ()
    # From the end, so that an item inserted after one index leaves the earlier ones in place.
    for at in sorted(added, reverse=True):
        texts = added[at]
        if api == "anthropic":
            message = items[at]
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            notes = [{"type": "text", "text": t} for t in texts]
            items[at] = {**message, "content": [*blocks, *notes]}
        else:
            items[at + 1 : at + 1] = [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
                for t in texts
            ]
    out["messages" if api == "anthropic" else "input"] = items
    return out, tuple(carried)


# -- where the prompt cache is read again --------------------------------------------------------

MAX_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` breakpoints a request (prompt caching)."""
BREAKPOINT = {"type": "ephemeral"}


def first_result(body: Mapping[str, Any], calls: set[str]) -> int | None:
    """The index of the first message holding a result of one of ``calls`` (Messages API)."""
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if (
                isinstance(block, Mapping)
                and block.get("type") == "tool_result"
                and str(block.get("tool_use_id")) in calls
            ):
                return i
    return None


def _markers(blocks: Any) -> int:
    """The breakpoints a list of blocks carries (tools, system blocks, a message's content,
    and the blocks inside a tool result: where ``cache_control`` may stand)."""
    if not isinstance(blocks, list):
        return 0
    count = 0
    for block in blocks:
        if isinstance(block, Mapping):
            count += "cache_control" in block
            if block.get("type") == "tool_result":
                count += _markers(block.get("content"))
    return count


def with_breakpoint(body: Mapping[str, Any], index: int) -> dict[str, Any]:
    """``body`` with a cache breakpoint on the last block of message ``index``, where a
    request that changed a part after it can read the cache again: Anthropic looks for a hit
    only at a breakpoint and up to 20 blocks before it (prompt caching), so a request the
    gateway changed in its middle would otherwise read nothing past its system prompt. Left
    as it is when the block is marked already, cannot be marked (a thinking block), or the
    request has no breakpoint to spare."""
    out = dict(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not 0 <= index < len(messages):
        return out
    message = messages[index]
    if not isinstance(message, Mapping):
        return out
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    if not blocks or not isinstance(blocks[-1], Mapping):
        return out
    last = blocks[-1]
    if "cache_control" in last or last.get("type") in ("thinking", "redacted_thinking"):
        return out
    used = _markers(body.get("tools")) + _markers(body.get("system")) + ("cache_control" in body)
    used += sum(_markers(m.get("content")) for m in messages if isinstance(m, Mapping))
    if used >= MAX_BREAKPOINTS:
        return out
    marked = {**message, "content": [*blocks[:-1], {**last, "cache_control": BREAKPOINT}]}
    out["messages"] = [*messages[:index], marked, *messages[index + 1 :]]
    return out
