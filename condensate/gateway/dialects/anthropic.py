"""The Anthropic Messages API as the gateway reads and changes it: ``POST /v1/messages``, its
``system``/``tools``/``messages`` body, ``tool_use`` and ``tool_result`` blocks, its usage
(``cache_read_input_tokens``, ``cache_creation_input_tokens``, compaction ``iterations``),
its SSE events and its error shape (platform.claude.com: Messages, Streaming Messages,
Errors, Prompt caching)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from condensate.core import clamps
from condensate.core.messages import Block, Message, Text, Thinking, ToolOutput, ToolUse
from condensate.gateway.binding import BINDING_MODELS, canonical_digest, keep_valid
from condensate.gateway.wire import (
    NOTICE_MARK,
    EventEdits,
    Insertion,
    ReplyUsage,
    RequestShape,
    insertions_at,
    opens_with,
    parsed_event,
    read_whole,
    sse,
    text_of,
)
from condensate.runtime.gateway_port import Clamps, NewestResult, Notice, ResetCut

PATHS = frozenset({"v1/messages"})
"""The endpoint whose requests are model calls (the path after ``/gateway/anthropic/``)."""
ENDPOINTS = frozenset(
    {("POST", "v1/messages"), ("POST", "v1/messages/count_tokens"), ("GET", "v1/models")}
)
ENDPOINTS_TEXT = "POST v1/messages, POST v1/messages/count_tokens, GET v1/models[/ID]"
MAX_REQUEST = 32 * 1024 * 1024
MAX_REQUEST_TEXT = "the Messages API takes at most 32 MB"
"""The API's own limit on a request (platform.claude.com/docs/en/api/overview, "Request size
limits": 32 MB for Messages and Token Counting): a larger one is refused unread, as the
provider would refuse it, never parsed or counted."""
MODEL_ID = re.compile(r"v1/models/[A-Za-z0-9][A-Za-z0-9._:@-]*")


SIDE_HEADERS = ("x-claude-code-agent-id", "x-claude-code-auxiliary-type")
"""What Claude Code sends on a request that is not its main conversation's: a subagent's
(its agent id, and its parent's) or an auxiliary pass (a memory pass, ...); each has a context
of its own (strings of the pinned CLI's binary, 2.1.332)."""


def side_request(headers: Mapping[str, str]) -> bool:
    return any(headers.get(name) for name in SIDE_HEADERS)


def subscription(headers: Mapping[str, str]) -> bool:
    """A Claude subscription's token goes to the same API as a key (with its beta flag)."""
    return False


def endpoint(method: str, tail: str) -> bool:
    """The endpoints Claude Code uses (Messages, token counting, models); any other path,
    another provider's, or a ``..`` segment is none of the gateway's."""
    return (method, tail) in ENDPOINTS or (
        method == "GET" and MODEL_ID.fullmatch(tail) is not None and ".." not in tail
    )


REPLY_PREFIX = "msg"
"""How the ids of the replies Condensate writes itself begin, as Anthropic's do."""
keep = keep_valid
"""A changed request's thinking blocks whose binding broke, taken out."""


def binds(model: str) -> bool:
    """Whether ``model`` binds its thinking to what came before it: the Claude models that
    run the prefix check."""
    return model.rsplit("/", 1)[-1].startswith(BINDING_MODELS)


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    """An error as Anthropic words one. Its shape has no code: the sentence carries it, as
    the CLI shows only that."""
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": f"{message} ({code})"}}


def shape(body: Mapping[str, Any]) -> RequestShape:
    conversation = body.get("messages")
    return RequestShape(
        model=str(body.get("model") or ""),
        fixed_part=[body.get("system"), body.get("tools")],
        messages=tuple(conversation if isinstance(conversation, list) else []),
        stream=bool(body.get("stream")),
    )


# -- what a reply says ---------------------------------------------------------------------------


def read_usage(into: ReplyUsage, usage: Mapping[str, Any]) -> None:
    into.seen = True
    into.input = int(usage.get("input_tokens") or into.input)
    into.cache_read = int(usage.get("cache_read_input_tokens") or into.cache_read)
    into.cache_write = int(usage.get("cache_creation_input_tokens") or into.cache_write)
    into.output = int(usage.get("output_tokens") or into.output)
    creation = usage.get("cache_creation")
    if isinstance(creation, Mapping):
        hour = creation.get("ephemeral_1h_input_tokens")
        into.cache_write_1h = int(hour or into.cache_write_1h)
    iterations = usage.get("iterations")
    if isinstance(iterations, list):
        # The top-level counts leave the compaction out; each event that carries the list
        # carries all of it, so it replaces what an earlier one said.
        compactions = [
            i for i in iterations if isinstance(i, Mapping) and i.get("type") == "compaction"
        ]
        into.compaction_input = sum(int(i.get("input_tokens") or 0) for i in compactions)
        into.compaction_output = sum(int(i.get("output_tokens") or 0) for i in compactions)


def read_body(into: ReplyUsage, body: Any) -> None:
    """A whole (non-streamed) reply."""
    read_whole(into, body, read_usage)


def read_event(into: ReplyUsage, data: Any) -> None:
    """One SSE event's data."""
    if not isinstance(data, Mapping):
        return
    kind = data.get("type")
    if kind == "message_start" and isinstance(data.get("message"), Mapping):
        message = data["message"]
        into.message_id = str(message.get("id") or "") or None
        into.model = str(message.get("model") or "")
        if isinstance(message.get("usage"), Mapping):
            read_usage(into, message["usage"])
    elif kind == "message_delta" and isinstance(data.get("usage"), Mapping):
        read_usage(into, data["usage"])
        into.complete = True
    elif kind == "message_stop" and into.seen:
        into.complete = True


# -- Condensate's own answers --------------------------------------------------------------------


def held_reply(model: str, text: str, reply_id: str) -> dict[str, Any]:
    """A whole reply that ends the CLI's turn with ``text`` and no tool call; it counts no
    tokens."""
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


def held_stream(model: str, text: str, reply_id: str) -> bytes:
    """The same reply as the SSE events the API streams."""
    opening = {**held_reply(model, text, reply_id), "content": [], "stop_reason": None}
    block = {"type": "text", "text": ""}
    delta = {"type": "text_delta", "text": text}
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    return b"".join(
        [
            sse("message_start", {"type": "message_start", "message": opening}),
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse(
                "message_delta",
                {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 0}},
            ),
            sse("message_stop", {"type": "message_stop"}),
        ]
    )


# -- cheap tiers in flight -----------------------------------------------------------------------


def _blocks(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every content block of the request's messages, in order."""
    found: list[Mapping[str, Any]] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, Mapping):
                found.append(block)
    return found


def result_ids(body: Mapping[str, Any]) -> list[str]:
    """The call ids of the tool results a request carries, in order."""
    ids = [str(b.get("tool_use_id") or "") for b in _blocks(body) if b.get("type") == "tool_result"]
    return [i for i in ids if i]


def newest_result(body: Mapping[str, Any]) -> NewestResult | None:
    """The request's last tool result (None: it carries none)."""
    tools: dict[str, str] = {}
    newest: tuple[str, Any] | None = None
    for block in _blocks(body):
        if block.get("type") == "tool_use":
            tools[str(block.get("id"))] = str(block.get("name") or "")
        elif block.get("type") == "tool_result":
            newest = str(block.get("tool_use_id") or ""), block.get("content")
    if newest is None or not newest[0]:
        return None
    call_id, output = newest
    return NewestResult(call_id, tools.get(call_id, ""), len(text_of(output)))


def with_receipts(
    body: Mapping[str, Any], receipts: Mapping[str, str]
) -> tuple[dict[str, Any], int]:
    """``body`` with every tool result whose call has a receipt replaced by it, and how many
    were replaced; messages without one are the same objects."""
    out = dict(body)
    if not receipts:
        return out, 0
    replaced = 0
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
    return out, replaced


# -- clamps in flight ----------------------------------------------------------------------------


def with_clamps(body: Mapping[str, Any], found: Clamps) -> tuple[dict[str, Any], int]:
    """``body`` with each clamped message text and each clamped call's arguments shown as
    the view shows them, and how many were changed; the rest is the same objects."""
    out = dict(body)
    if not found:
        return out, 0
    changed = 0
    messages = []
    for message in body.get("messages") or []:
        new = _clamped_message(message, found) if isinstance(message, Mapping) else message
        changed += new is not message
        messages.append(new)
    out["messages"] = messages
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


# -- an agent's reset in flight ------------------------------------------------------------------


def with_reset(body: Mapping[str, Any], cut: ResetCut) -> tuple[dict[str, Any], bool]:
    """``body`` starting again from the reset, and whether it did: the CLI keeps its whole
    history, and each request is cut where the reset cut the view. A request that does not
    hold the call (a new session) is unchanged."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return dict(body), False
    at = _call_at(messages, cut.call_id) if cut.at is None else _message_start(messages, cut.at)
    if at is None:
        return dict(body), False
    before = messages[:at]
    own = _own_blocks(before, cut.own_context)
    notice = {"role": "user", "content": [*own, {"type": "text", "text": cut.notice}]}
    system = [m for m in before if isinstance(m, Mapping) and m.get("role") == "system"]
    return {**body, "messages": [notice, *system, *messages[at:]]}, True


def _message_start(messages: list[Any], at: int) -> int | None:
    """``at``, or the assistant message before it when the message at ``at`` answers that
    one's calls: a result is never sent without its call."""
    if not 0 < at <= len(messages):
        return None
    if at == len(messages):
        return at  # all of it summarized
    content = messages[at].get("content") if isinstance(messages[at], Mapping) else None
    answers = isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    )
    return at - 1 if answers else at


def conversation(body: Mapping[str, Any]) -> list[tuple[int, Message]]:
    """The request's conversation, provider-neutral, each message with its position in
    ``messages``: text, thinking, calls and results (images and documents are left out)."""
    messages = body.get("messages")
    out: list[tuple[int, Message]] = []
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        role = _role(message)
        if role not in ("user", "assistant"):
            continue
        content = message.get("content")
        raw = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks = tuple(b for b in map(_neutral, raw if isinstance(raw, list) else []) if b)
        out.append((i, Message(role, blocks)))
    return out


def _neutral(block: Any) -> Block | None:
    if not isinstance(block, Mapping):
        return None
    match block.get("type"):
        case "text":
            return Text(str(block.get("text") or ""))
        case "thinking":
            return Thinking(str(block.get("thinking") or ""), str(block.get("signature") or ""))
        case "tool_use":
            arguments = block.get("input")
            return ToolUse(
                str(block.get("id") or ""),
                str(block.get("name") or ""),
                dict(arguments) if isinstance(arguments, Mapping) else {},
            )
        case "tool_result":
            return ToolOutput(
                str(block.get("tool_use_id") or ""),
                _result_text(block.get("content")),
                bool(block.get("is_error")),
            )
    return None


def _result_text(content: Any) -> str:
    """A result's text: a string, or its text blocks joined (an image is named, not kept)."""
    if isinstance(content, str):
        return content
    parts = (
        [
            str(b.get("text") or "") if b.get("type") == "text" else f"[{b.get('type')}]"
            for b in content
            if isinstance(b, Mapping)
        ]
        if isinstance(content, list)
        else []
    )
    return "\n".join(parts)


def _call_at(messages: list[Any], call_id: str) -> int | None:
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
        return [b for b in content if opens_with(b, marks)]
    return []


# -- notices, kept where they were first added ------------------------------------------------


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def insertion_at_end(body: Mapping[str, Any], notice: Notice) -> Insertion | None:
    """Where ``notice`` goes in ``body``: after its last message, when that is the user's
    (tool results or a steer; a system-role message after it does not count); None when it
    cannot go (no conversation, or it ends in the model's turn)."""
    conversation = body.get("messages")
    if not isinstance(conversation, list) or not conversation:
        return None
    at = len(conversation) - 1
    # Claude Code may end a request with a system-role message of its own (its environment,
    # on a session's first request): the notice joins the user's turn before.
    while at > 0 and _role(conversation[at]) == "system":
        at -= 1
    last = conversation[at]
    if _role(last) != "user" or not isinstance(last, Mapping):
        return None
    return Insertion(notice.key, notice.text, at, canonical_digest(last))


def with_insertions(
    body: Mapping[str, Any], insertions: Sequence[Insertion]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``body`` carrying each insertion whose anchor it still holds, each as a text block
    after the content of its message, and the keys of those it carries."""
    conversation = body.get("messages")
    if not isinstance(conversation, list):
        return dict(body), ()
    items, added, carried = insertions_at(conversation, insertions)
    for at, texts in added.items():
        message = items[at]
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        notes = [{"type": "text", "text": t} for t in texts]
        items[at] = {**message, "content": [*blocks, *notes]}
    return ({**body, "messages": items}, carried) if carried else (dict(body), ())


# -- where the prompt cache is read again --------------------------------------------------------

MAX_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` breakpoints a request (prompt caching)."""
BREAKPOINT = {"type": "ephemeral"}


def with_cache_mark(body: Mapping[str, Any], new: set[str]) -> dict[str, Any]:
    """``body`` with a breakpoint before the first result shown anew (``new``, by call id):
    the provider reads its cache only at a breakpoint and up to 20 blocks before it, so one
    there lets it read all that came before."""
    at = first_result(body, new)
    return with_breakpoint(body, at - 1) if at is not None and at > 0 else dict(body)


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


# -- a line for the person, in their CLI's conversation ------------------------------------------


def without_notices(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """``body`` without the lines the gateway put first in earlier replies (the provider never
    sent them); None when it holds none."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    found = False
    out: list[Any] = []
    for message in messages:
        content = message.get("content") if _role(message) == "assistant" else None
        kept = [b for b in content if not _notice_block(b)] if isinstance(content, list) else None
        if kept is not None and content is not None and len(kept) != len(content):
            found = True
            out.append({**message, "content": kept})
        else:
            out.append(message)
    return {**body, "messages": out} if found else None


def _notice_block(block: Any) -> bool:
    return (
        isinstance(block, Mapping)
        and block.get("type") == "text"
        and str(block.get("text") or "").startswith(NOTICE_MARK)
    )


def noticed_reply(reply: Any, text: str) -> Any:
    """A reply (not streamed) with ``text`` as its first block."""
    if not isinstance(reply, dict) or not isinstance(reply.get("content"), list):
        return reply
    return {**reply, "content": [{"type": "text", "text": text}, *reply["content"]]}


@dataclass
class NoticedStream:
    """A streamed reply with a text block put first: after ``message_start``, the block's
    own events at index 0; every later block one index on."""

    text: str
    told: bool = False

    def event(self, raw: bytes) -> bytes:
        if b"content_block_" not in raw:
            out = raw + b"\n\n"
            if not self.told and b"message_start" in raw:
                self.told = True
                out += _notice_events(self.text)
            return out
        name, data = parsed_event(raw)
        if data is None or not isinstance(data.get("index"), int):
            return raw + b"\n\n"
        return sse(name, {**data, "index": data["index"] + 1})


def _notice_events(text: str) -> bytes:
    block = {"type": "text", "text": ""}
    delta = {"type": "text_delta", "text": text}
    return b"".join(
        [
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
    )


def noticed_stream(text: str) -> EventEdits:
    return EventEdits(NoticedStream(text).event)
