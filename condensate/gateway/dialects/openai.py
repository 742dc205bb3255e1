"""The OpenAI Responses API as the gateway reads and changes it: ``POST /responses``, its
``instructions``/``tools``/``input`` body (a string, or items: messages, ``*_call`` and
``*_output`` items, reasoning), its usage (cached and written tokens inside
``input_tokens``), its SSE events and its error shape (developers.openai.com: Responses,
Streaming responses, Error codes)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from condensate.core import clamps
from condensate.core.messages import Block, Message, Text, Thinking, ToolOutput, ToolUse
from condensate.gateway.binding import canonical_digest, keep_valid_reasoning
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

PATHS = frozenset({"responses"})
"""The endpoint whose requests are model calls (the path after ``/gateway/openai/``)."""
ENDPOINTS = frozenset({("POST", "responses"), ("GET", "models")})
ENDPOINTS_TEXT = "POST responses, GET models[/ID]"
MAX_REQUEST = 64 * 1024 * 1024
MAX_REQUEST_TEXT = "the gateway's own limit"
"""No documented limit found for a Responses request: the gateway takes twice Anthropic's."""
MODEL_ID = re.compile(r"models/[A-Za-z0-9][A-Za-z0-9._:@-]*")


SIDE_HEADERS = ("x-openai-subagent", "x-codex-parent-thread-id")
"""What Codex sends on a subagent's request (its kind, its parent thread), whose context is
its own (strings of the pinned CLI's binary, 0.171.0)."""


def side_request(headers: Mapping[str, str]) -> bool:
    return any(headers.get(name) for name in SIDE_HEADERS)


ACCOUNT_HEADER = "chatgpt-account-id"
"""What Codex sends beside a ChatGPT sign-in's token (its built-in provider then goes to the
ChatGPT backend, not the API)."""


def subscription(headers: Mapping[str, str]) -> bool:
    return bool(headers.get(ACCOUNT_HEADER))


def endpoint(method: str, tail: str) -> bool:
    """The endpoints Codex uses (Responses, models); files, admin keys, any other path or a
    ``..`` segment is none of the gateway's."""
    return (method, tail) in ENDPOINTS or (
        method == "GET" and MODEL_ID.fullmatch(tail) is not None and ".." not in tail
    )


REPLY_PREFIX = "resp"
"""How the ids of the replies Condensate writes itself begin, as OpenAI's do."""
keep = keep_valid_reasoning
"""A changed request's reasoning items whose history changed, taken out."""


def binds(model: str) -> bool:
    """Whether ``model`` drops reasoning after a prefix change: "newer frontier models",
    which the gateway takes as GPT-5.6 and later (the page does not name them)."""
    match = re.match(r"gpt-(\d+)(?:\.(\d+))?", model.rsplit("/", 1)[-1])
    return match is not None and (int(match[1]), int(match[2] or 0)) >= (5, 6)


def with_cache_mark(body: Mapping[str, Any], new: set[str]) -> dict[str, Any]:
    """``body`` as it is: OpenAI caches the longest prefix it has seen, with no marks."""
    return dict(body)


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    """An error as OpenAI words one."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _items(body: Mapping[str, Any]) -> list[Any]:
    """The request's input as items (a string input is one user message)."""
    given = body.get("input")
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    return given if isinstance(given, list) else []


def shape(body: Mapping[str, Any]) -> RequestShape:
    listed = _items(body)
    leading = _leading_fixed(listed)
    return RequestShape(
        model=str(body.get("model") or ""),
        fixed_part=[body.get("instructions"), body.get("tools"), *listed[:leading]],
        messages=tuple(listed[leading:]),
        stream=bool(body.get("stream")),
    )


def _leading_fixed(items: list[Any]) -> int:
    """How many items open a request as its fixed part: the tools Codex sends as an
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


# -- what a reply says ---------------------------------------------------------------------------


def read_usage(into: ReplyUsage, usage: Mapping[str, Any]) -> None:
    """OpenAI counts the cached and the written parts inside ``input_tokens``; Condensate's
    ``input`` is the rest (GPT-5.6 and later report writes)."""
    into.seen = True
    details = usage.get("input_tokens_details")
    if not isinstance(details, Mapping):
        details = {}
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    into.input = max(int(usage.get("input_tokens") or 0) - cached - written, 0)
    into.cache_read = cached
    into.cache_write = written
    into.output = int(usage.get("output_tokens") or 0)


def read_body(into: ReplyUsage, body: Any) -> None:
    """A whole (non-streamed) reply."""
    read_whole(into, body, read_usage)


def read_event(into: ReplyUsage, data: Any) -> None:
    """One SSE event's data: the response's last event carries it whole."""
    if not isinstance(data, Mapping):
        return
    if data.get("type") in {"response.completed", "response.incomplete", "response.failed"}:
        response = data.get("response")
        if isinstance(response, Mapping):
            read_body(into, response)
            into.complete = into.seen


# -- Condensate's own answers --------------------------------------------------------------------


def held_reply(model: str, text: str, reply_id: str) -> dict[str, Any]:
    """A whole reply that ends the CLI's turn with ``text`` and no tool call; it counts no
    tokens."""
    return {
        "id": reply_id,
        "object": "response",
        "status": "completed",
        "model": model,
        "output": [_message(reply_id, text)],
        "usage": {
            "input_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "total_tokens": 0,
        },
    }


def _message(reply_id: str, text: str) -> dict[str, Any]:
    return {
        "id": f"{reply_id}_msg",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def held_stream(model: str, text: str, reply_id: str) -> bytes:
    """The same reply as the SSE events the API streams."""
    whole = held_reply(model, text, reply_id)
    item = _message(reply_id, text)
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
        sse(name, {"type": name, "sequence_number": n, **data})
        for n, (name, data) in enumerate(events)
    )


# -- cheap tiers in flight -----------------------------------------------------------------------


def _is_output(item: Any) -> bool:
    return isinstance(item, Mapping) and str(item.get("type", "")).endswith("_output")


def result_ids(body: Mapping[str, Any]) -> list[str]:
    """The call ids of the tool results a request carries, in order."""
    ids = [str(item.get("call_id") or "") for item in body.get("input") or [] if _is_output(item)]
    return [i for i in ids if i]


def newest_result(body: Mapping[str, Any]) -> NewestResult | None:
    """The request's last tool result (None: it carries none)."""
    tools: dict[str, str] = {}
    newest: tuple[str, Any] | None = None
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
    body: Mapping[str, Any], receipts: Mapping[str, str]
) -> tuple[dict[str, Any], int]:
    """``body`` with every tool output whose call has a receipt replaced by it, and how many
    were replaced; items without one are the same objects."""
    out = dict(body)
    conversation = body.get("input")
    if not receipts or not isinstance(conversation, list):
        return out, 0  # a string input holds no tool result
    replaced = 0
    items = []
    for item in conversation:
        receipt = receipts.get(str(item.get("call_id"))) if _is_output(item) else None
        if receipt is not None and item.get("output") != receipt:
            items.append({**item, "output": receipt})
            replaced += 1
        else:
            items.append(item)
    out["input"] = items
    return out, replaced


# -- clamps in flight ----------------------------------------------------------------------------


def with_clamps(body: Mapping[str, Any], found: Clamps) -> tuple[dict[str, Any], int]:
    """``body`` with each clamped message text and each clamped call's arguments shown as
    the view shows them, and how many were changed; the rest is the same objects."""
    out = dict(body)
    conversation = body.get("input")
    if not found or not isinstance(conversation, list):
        return out, 0
    changed = 0
    items = []
    for item in conversation:
        new = _clamped_item(item, found) if isinstance(item, Mapping) else item
        changed += new is not item
        items.append(new)
    out["input"] = items
    return out, changed


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


def with_reset(body: Mapping[str, Any], cut: ResetCut) -> tuple[dict[str, Any], bool]:
    """``body`` starting again from the reset, and whether it did: the fixed items, the
    reset's notice, then the response holding the agent's ``condense`` call and all after."""
    items = body.get("input")
    if not isinstance(items, list):
        return dict(body), False
    at = _response_at(items, cut.call_id) if cut.at is None else _item_start(items, cut.at)
    if at is None:
        return dict(body), False
    fixed = [item for item in items[:at] if _fixed_item(item, cut.own_context)]
    notice_item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": cut.notice}],
    }
    return {**body, "input": [*fixed, notice_item, *items[at:]]}, True


def _item_start(items: list[Any], at: int) -> int | None:
    """``at``, or the start of the response before it when the item at ``at`` is an output
    of that response's calls: a result is never sent without its call."""
    if not 0 < at <= len(items):
        return None
    if at == len(items):
        return at if at > _leading_fixed(items) else None  # all of it summarized
    start = at
    while start > 0 and (_is_output(items[start]) or _same_response(items[start - 1])):
        start -= 1
    return start if start > _leading_fixed(items) else None


def conversation(body: Mapping[str, Any]) -> list[tuple[int, Message]]:
    """The request's conversation, provider-neutral, each message with the position of its
    first item in ``input``: a response's reasoning, text and calls are one assistant
    message; a run of call outputs, or a user message, one user message."""
    items = _items(body)
    out: list[tuple[int, Message]] = []
    for i in range(_leading_fixed(items), len(items)):
        item = items[i]
        if not isinstance(item, Mapping):
            continue
        role: Literal["user", "assistant"] = (
            "user" if _is_output(item) or item.get("role") == "user" else "assistant"
        )
        if item.get("type", "message") == "message" and item.get("role") not in (
            "user",
            "assistant",
        ):
            continue
        block = _neutral(item)
        if block is None:
            continue
        last = out[-1][1] if out else None
        joins = (
            last is not None
            and last.role == role
            and not (
                role == "user"
                and isinstance(block, Text)
                and not isinstance(last.content[-1], Text)
            )
        )
        if joins and last is not None:
            out[-1] = (out[-1][0], Message(role, (*last.content, *block_list(block))))
        else:
            out.append((i, Message(role, tuple(block_list(block)))))
    return out


def block_list(block: Block | list[Block]) -> list[Block]:
    return block if isinstance(block, list) else [block]


def _neutral(item: Mapping[str, Any]) -> Block | list[Block] | None:
    kind = str(item.get("type", "message"))
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            return Text(content)
        texts = (
            [
                str(b.get("text") or "")
                for b in content
                if isinstance(b, Mapping) and isinstance(b.get("text"), str)
            ]
            if isinstance(content, list)
            else []
        )
        return [Text(t) for t in texts] or None
    if kind == "reasoning":
        summary = item.get("summary")
        text = text_of(summary) if isinstance(summary, list) else ""
        return Thinking(text, str(item.get("encrypted_content") or ""))
    call_id = str(item.get("call_id") or "")
    if kind.endswith("_output"):
        return ToolOutput(call_id, text_of(item.get("output")))
    if kind.endswith("_call"):
        return ToolUse(
            call_id, str(item.get("name") or kind.removesuffix("_call")), _arguments(item)
        )
    return None


def _arguments(item: Mapping[str, Any]) -> dict[str, Any]:
    raw = item.get("arguments")
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        return dict(parsed) if isinstance(parsed, Mapping) else {"arguments": raw}
    for key in ("input", "action"):
        if key in item:
            value = item[key]
            return dict(value) if isinstance(value, Mapping) else {key: value}
    return {}


def _response_at(items: list[Any], call_id: str) -> int | None:
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
    return all(opens_with(block, marks) for block in content)


# -- notices, kept where they were first added ------------------------------------------------


def insertion_at_end(body: Mapping[str, Any], notice: Notice) -> Insertion | None:
    """Where ``notice`` goes in ``body``: after its last item; None when there is none."""
    conversation = body.get("input")
    if not isinstance(conversation, list) or not conversation:
        return None
    at = len(conversation) - 1
    last = conversation[at]
    if not isinstance(last, Mapping):
        return None
    return Insertion(notice.key, notice.text, at, canonical_digest(last))


def with_insertions(
    body: Mapping[str, Any], insertions: Sequence[Insertion]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``body`` carrying each insertion whose anchor it still holds, each as a user message
    item after its anchor, and the keys of those it carries."""
    conversation = body.get("input")
    if not isinstance(conversation, list):
        return dict(body), ()
    items, added, carried = insertions_at(conversation, insertions)
    # From the end, so that an item inserted after one index leaves the earlier ones in place.
    for at in sorted(added, reverse=True):
        items[at + 1 : at + 1] = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
            for t in added[at]
        ]
    return ({**body, "input": items}, carried) if carried else (dict(body), ())


# -- a line for the person, in their CLI's conversation ------------------------------------------
# A Responses stream numbers its items by output index and its events by sequence number: the
# line goes last, as a message item of its own before ``response.completed`` (nothing before
# it moves; the completion's number moves on by the events put in).


def without_notices(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """``body`` without the message items the gateway put in earlier replies for the person;
    None when it holds none."""
    items = body.get("input")
    if not isinstance(items, list):
        return None
    kept = [item for item in items if not _notice_item(item)]
    return {**body, "input": kept} if len(kept) != len(items) else None


def _notice_item(item: Any) -> bool:
    if not isinstance(item, Mapping) or item.get("type", "message") != "message":
        return False
    if item.get("role") != "assistant":
        return False
    content = item.get("content")
    texts = (
        [b.get("text") for b in content if isinstance(b, Mapping)]
        if isinstance(content, list)
        else []
    )
    return bool(texts) and all(isinstance(t, str) and t.startswith(NOTICE_MARK) for t in texts)


def noticed_reply(reply: Any, text: str) -> Any:
    """A reply (not streamed) with the line as a message item after its own."""
    if not isinstance(reply, dict) or not isinstance(reply.get("output"), list):
        return reply
    return {**reply, "output": [*reply["output"], _message(NOTICE_ID, text)]}


NOTICE_ID = "msg_condensate_notice"


@dataclass
class NoticedStream:
    """A streamed reply with a message item of the line's put last, before the completion."""

    text: str
    items: int = 0
    sequence: int = -1
    told: bool = False

    def event(self, raw: bytes) -> bytes:
        name, data = parsed_event(raw)
        if not isinstance(data, dict):
            return raw + b"\n\n"
        if isinstance(data.get("sequence_number"), int):
            self.sequence = max(self.sequence, data["sequence_number"])
        if name == "response.output_item.added":
            self.items += 1
        if name != "response.completed" or self.told:
            return raw + b"\n\n"
        self.told = True
        added = self._notice_events()
        response = data.get("response")
        if isinstance(response, dict) and isinstance(response.get("output"), list):
            message = _message(NOTICE_ID, self.text)
            data = {**data, "response": {**response, "output": [*response["output"], message]}}
        if "sequence_number" in data:
            data = {**data, "sequence_number": self.sequence + 1}
        return b"".join(added) + sse(name, data)

    def _notice_events(self) -> list[bytes]:
        index, text = self.items, self.text
        message = _message(NOTICE_ID, text)
        opening = {**message, "status": "in_progress", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        at = {"item_id": NOTICE_ID, "output_index": index, "content_index": 0}
        events = [
            ("response.output_item.added", {"output_index": index, "item": opening}),
            ("response.content_part.added", {**at, "part": part}),
            ("response.output_text.delta", {**at, "delta": text}),
            ("response.output_text.done", {**at, "text": text}),
            ("response.content_part.done", {**at, "part": {**part, "text": text}}),
            ("response.output_item.done", {"output_index": index, "item": message}),
        ]
        out = []
        for kind, fields in events:
            self.sequence += 1
            out.append(sse(kind, {"type": kind, "sequence_number": self.sequence, **fields}))
        return out


def noticed_stream(text: str) -> EventEdits:
    return EventEdits(NoticedStream(text).event)
