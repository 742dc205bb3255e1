"""The Anthropic Messages API: ``POST /v1/messages`` (JSON, or SSE in the event order Claude Code
accepted), ``POST /v1/messages/count_tokens`` and the Anthropic shape of ``GET /v1/models``.
Errors use the real body ``{"type":"error","error":{...},"request_id":...}``. What the model
reads of a request is ``_prompt``'s; this module renders the reply: a signed thinking block
first (models that sign them, thinking on), ``input_transformations``, ``context_management``,
``usage.iterations``, and the ``compaction`` block of an on-demand compaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from aiohttp import web

from condensate.testing.fake_model._accounting import Bill, count_text
from condensate.testing.fake_model._context import COMPACT_BETA, Summary, default_summary
from condensate.testing.fake_model._errors import BadRequest
from condensate.testing.fake_model._models import runs_thinking_check
from condensate.testing.fake_model._prompt import Prepared, prepare, price
from condensate.testing.fake_model._script import Fail, Html, Raw, Text, ToolCalls
from condensate.testing.fake_model._state import FakeState, Turn
from condensate.testing.fake_model._thinking import (
    BINDING_BETA,
    Issued,
    default_thinking,
    prefix_of,
)
from condensate.testing.fake_model._wire import (
    STATE,
    EventStream,
    Frame,
    Pace,
    arguments_json,
    arguments_object,
    call_id,
    cut_reply,
    json_reply,
    model_of,
    output_tokens,
    read_json,
    record,
    special_reply,
    special_status,
)

_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 30,000 input tokens "
        "per minute. Please try again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def _request_id() -> str:
    return f"req_fake{uuid.uuid4().hex[:20]}"


def retry_after_header(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def error_response(
    status: int,
    error_type: str | None = None,
    message: str | None = None,
    retry_after: float | None = None,
) -> web.Response:
    """The real Anthropic error body and ``request-id`` header for ``status``."""
    fallback = (
        ("api_error", "Internal server error")
        if status >= 500
        else ("invalid_request_error", "Error")
    )
    default_type, default_message = _ERRORS.get(status, fallback)
    request_id = _request_id()
    body = {
        "type": "error",
        "error": {"type": error_type or default_type, "message": message or default_message},
        "request_id": request_id,
    }
    headers = {"request-id": request_id}
    if retry_after is not None:
        headers["retry-after"] = retry_after_header(retry_after)
    return web.json_response(body, status=status, headers=headers)


def unauthorized(headers: Mapping[str, str]) -> web.Response:
    given = "x-api-key" in headers or "Authorization" in headers
    return error_response(401, message=None if given else "x-api-key header is required")


def _ids(message: Any, kind: str, key: str) -> list[str]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return []
    return [str(b.get(key)) for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def check_pairing(messages: list[Any]) -> None:
    """Raises the real 400 messages for unanswered ``tool_use`` and orphan ``tool_result``
    blocks. ``role: "system"`` messages are skipped when finding the previous/next message."""
    turns = [
        (i, m)
        for i, m in enumerate(messages)
        if isinstance(m, Mapping) and m.get("role") != "system"
    ]
    for pos, (index, message) in enumerate(turns):
        before = turns[pos - 1][1] if pos else None
        after = turns[pos + 1][1] if pos + 1 < len(turns) else None
        if message.get("role") == "assistant":
            answered = _ids(after, "tool_result", "tool_use_id") if _role(after) == "user" else []
            missing = [u for u in _ids(message, "tool_use", "id") if u not in answered]
            if missing:
                msg = (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
                raise BadRequest(msg)
        elif message.get("role") == "user" and isinstance(message.get("content"), list):
            offered = _ids(before, "tool_use", "id") if _role(before) == "assistant" else []
            for j, block in enumerate(message["content"]):
                if not (isinstance(block, Mapping) and block.get("type") == "tool_result"):
                    continue
                if str(block.get("tool_use_id")) not in offered:
                    msg = (
                        f"messages.{index}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous message."
                    )
                    raise BadRequest(msg)


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _validate(body: Mapping[str, Any], *, generation: bool) -> str:
    model = model_of(body)
    if generation and "max_tokens" not in body:
        msg = "max_tokens: Field required"
        raise BadRequest(msg)
    messages = body.get("messages")
    if not isinstance(messages, list):
        msg = "messages: Field required"
        raise BadRequest(msg)
    if not messages:
        msg = "messages: at least one message is required"
        raise BadRequest(msg)
    check_pairing(messages)
    return model


def usage_json(bill: Bill, output: int) -> dict[str, Any]:
    return {
        "input_tokens": bill.uncached,
        "cache_creation_input_tokens": bill.cache_write,
        "cache_read_input_tokens": bill.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": bill.cache_write_5m,
            "ephemeral_1h_input_tokens": bill.cache_write_1h,
        },
        "output_tokens": output,
    }


def _content(turn: Turn, body: Text | ToolCalls) -> list[dict[str, Any]]:
    """The reply's blocks other than thinking: its text, then its tool calls."""
    blocks: list[dict[str, Any]] = []
    if isinstance(body, Text) or body.text:
        blocks.append({"type": "text", "text": body.text})
    for i, call in enumerate(body.calls if isinstance(body, ToolCalls) else []):
        blocks.append(
            {
                "type": "tool_use",
                "id": call_id("toolu", turn, i, call),
                "name": call.name,
                "input": arguments_object(call),
            }
        )
    return blocks


def _thinking_text(state: FakeState, prepared: Prepared, body: Text | ToolCalls) -> str | None:
    """The reasoning the reply carries. A model that signs its blocks thinks whenever the
    request enables thinking (the scripted text, else a default) and never otherwise; other
    models carry the scripted thinking, as the fake always did."""
    if not runs_thinking_check(prepared.model):
        return body.thinking
    if not prepared.thinking_on:
        return None
    return body.thinking or default_thinking(prepared.model, state.config.thinking_tokens)


def _signed(
    state: FakeState, prepared: Prepared, thinking: str, content: list[dict[str, Any]]
) -> dict[str, Any]:
    """Issues the reply's thinking block, bound to the request as sent."""
    shown = "" if prepared.display == "omitted" else thinking
    issued = Issued(
        model=prepared.model,
        text=shown,
        tokens=count_text(prepared.model, thinking),
        predecessor=prepared.outcome.predecessor,
        prefix=prefix_of(prepared.sent),
    )
    signature = state.thinking.issue(issued)
    if runs_thinking_check(prepared.model):
        state.thinking.remember_reply(content, signature)
    return {"type": "thinking", "thinking": shown, "signature": signature}


def _iterations(prepared: Prepared, usage: dict[str, Any]) -> dict[str, Any]:
    """With the compaction beta "every response includes `usage.iterations`" (on-demand
    compaction); one ``message`` entry when no compaction ran."""
    if COMPACT_BETA in prepared.betas and "iterations" not in usage:
        entry = {
            "type": "message",
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
        }
        usage["iterations"] = [entry]
    return usage


def _too_long(turn: Turn) -> web.Response:
    assert turn.refusal is not None
    text = f"prompt is too long: {turn.refusal.tokens} tokens > {turn.refusal.limit} maximum"
    return error_response(400, message=text)


def _message(
    prepared: Prepared,
    turn: Turn,
    content: list[dict[str, Any]],
    stop_reason: str,
    usage: dict[str, Any],
) -> dict[str, Any]:
    """The reply, with the fields the request's betas and context management add."""
    message: dict[str, Any] = {
        "id": f"msg_fake{turn.number:06d}",
        "type": "message",
        "role": "assistant",
        "model": prepared.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    if BINDING_BETA in prepared.betas:
        message["input_transformations"] = [d.to_json() for d in prepared.outcome.dropped]
    if prepared.applied_edits is not None:
        message["context_management"] = {"applied_edits": prepared.applied_edits}
    return message


async def messages(request: web.Request) -> web.StreamResponse:
    body: Any = None
    state = request.app[STATE]
    try:
        body = await read_json(request)
        model = _validate(body, generation=True)
        prepared = prepare(state, body, request.headers)
    except BadRequest as exc:
        record(request, "anthropic", "messages", body, status=400, reply="invalid")
        return error_response(400, message=str(exc))
    log = partial(record, request, "anthropic", "messages", body, details=prepared.details())
    if prepared.refusal is not None:
        log(status=400, reply="invalid", model=model, input_tokens=prepared.tokens)
        return error_response(400, message=prepared.refusal)
    if prepared.summarize:
        return await _compaction(request, state, body, prepared)
    turn = state.begin(model, price(state, body, prepared))
    if turn.refusal is not None:
        log(status=400, reply=turn.kind, turn=turn)
        return _too_long(turn)
    plan = turn.plan
    assert plan is not None
    reply = plan.body
    if isinstance(reply, Fail | Html | Raw):
        status = reply.status if isinstance(reply, Fail) else special_status(reply)
        log(status=status, reply=turn.kind, turn=turn)
        if isinstance(reply, Fail):
            return error_response(reply.status, reply.error_type, reply.message, reply.retry_after)
        headers = {"request-id": _request_id()}
        return await special_reply(
            request, plan, streaming=bool(body.get("stream")), headers=headers
        )
    assert isinstance(reply, Text | ToolCalls)
    reply, cut = cut_reply(plan, reply)
    thinking = _thinking_text(state, prepared, reply)
    reply = replace(reply, thinking=thinking)
    content = _content(turn, reply)
    if thinking is not None:
        content.insert(0, _signed(state, prepared, thinking, content))
    output = output_tokens(turn, reply)
    if plan.output_tokens is None:
        output += prepared.outcome.rethink_tokens
    usage = _iterations(prepared, usage_json(turn.reported(), output))
    log(status=200, reply=turn.kind, turn=turn, usage=usage)
    calls = reply.calls if isinstance(reply, ToolCalls) else []
    stop_reason = "max_tokens" if cut else "tool_use" if calls else "end_turn"
    message = _message(prepared, turn, content, stop_reason, usage)
    if body.get("stream"):
        raw = {call_id("toolu", turn, i, c): arguments_json(c) for i, c in enumerate(calls)}
        return await _stream(request, turn, message, raw)
    await Pace.of(turn).whole(reply)
    return await json_reply(request, plan, message, {"request-id": _request_id()})


async def _compaction(
    request: web.Request, state: FakeState, body: dict[str, Any], prepared: Prepared
) -> web.StreamResponse:
    """One signed ``compaction`` block summarizing every message, ``stop_reason``
    "compaction"; its cost is in ``usage.iterations``, the top-level counts are 0."""
    log = partial(record, request, "anthropic", "messages", body, details=prepared.details())
    turn = state.begin(prepared.model, price(state, body, prepared), summary=default_summary(body))
    if turn.refusal is not None:
        log(status=400, reply=turn.kind, turn=turn)
        return _too_long(turn)
    assert turn.plan is not None
    assert isinstance(turn.plan.body, Text)
    summary = turn.plan.body.text
    covered = tuple(p.digest for p in prepared.sent if not p.is_thinking)
    block = {
        "type": "compaction",
        "content": summary,
        "signature": state.compactions.issue(Summary(summary, covered)),
    }
    usage = usage_json(Bill(0), 0)
    written = count_text(prepared.model, summary)
    usage["iterations"] = [
        {"type": "compaction", "input_tokens": turn.bill.total, "output_tokens": written}
    ]
    log(status=200, reply=turn.kind, turn=turn, usage=usage)
    message = _message(prepared, turn, [block], "compaction", usage)
    if body.get("stream"):
        return await _stream(request, turn, message, {})
    return await json_reply(request, turn.plan, message, {"request-id": _request_id()})


def _frame(data: Mapping[str, Any] | str) -> Frame:
    kind = data.get("type") if isinstance(data, Mapping) else None
    return "start" if kind == "message_start" else "stop" if kind == "message_stop" else None


async def _stream(
    request: web.Request, turn: Turn, message: dict[str, Any], raw: Mapping[str, str]
) -> web.StreamResponse:
    """The message as stream events; a tool_use block's input goes out as the pieces of its
    arguments text ``raw`` (keyed by block id), cut or not JSON as scripted. A thinking block
    whose text is empty gets no ``thinking_delta``, only its ``signature_delta``; a compaction
    block arrives whole in its ``content_block_start``. ``input_transformations`` ride on
    ``message_start``, ``context_management`` on the last ``message_delta``."""
    pace = Pace.of(turn)
    stream = await EventStream.open(request, {"request-id": _request_id()}, turn.plan, _frame)
    usage = dict(message["usage"], output_tokens=1)
    start = {**message, "content": [], "stop_reason": None, "usage": usage}
    start.pop("context_management", None)
    await _send(stream, {"type": "message_start", "message": start})
    await _send(stream, {"type": "ping"})
    for index, block in enumerate(message["content"]):
        opening: dict[str, Any]
        deltas: list[dict[str, Any]]
        tail: list[dict[str, Any]] = []
        if block["type"] == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            text = block["thinking"]
            pieces = pace.pieces(text) if text else []
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces]
            tail = [{"type": "signature_delta", "signature": block["signature"]}]
        elif block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pace.pieces(block["text"])]
        elif block["type"] == "compaction":
            opening, deltas = block, []
        else:
            opening = {**block, "input": {}}
            text = raw[block["id"]]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pace.pieces(text)]
        await _send(
            stream, {"type": "content_block_start", "index": index, "content_block": opening}
        )
        for delta in deltas:
            await pace.wait(stream)
            await _send(stream, {"type": "content_block_delta", "index": index, "delta": delta})
        for delta in tail:
            await _send(stream, {"type": "content_block_delta", "index": index, "delta": delta})
        await _send(stream, {"type": "content_block_stop", "index": index})
    final_usage = {"output_tokens": message["usage"]["output_tokens"]}
    if "iterations" in message["usage"]:
        final_usage["iterations"] = message["usage"]["iterations"]
    final: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": final_usage,
    }
    if "context_management" in message:
        final["context_management"] = message["context_management"]
    await _send(stream, final)
    await _send(stream, {"type": "message_stop"})
    return await stream.close()


async def _send(stream: EventStream, data: dict[str, Any]) -> None:
    await stream.send(data, event=data["type"])


async def count_tokens(request: web.Request) -> web.Response:
    """Counts what the model would read; "The token counting endpoint runs the same prefix
    check and returns the same 400" (preserved thinking)."""
    body: Any = None
    try:
        body = await read_json(request)
        model = _validate(body, generation=False)
        prepared = prepare(request.app[STATE], body, request.headers)
    except BadRequest as exc:
        record(request, "anthropic", "count_tokens", body, status=400, reply="invalid")
        return error_response(400, message=str(exc))
    refused = prepared.refusal is not None
    record(
        request,
        "anthropic",
        "count_tokens",
        body,
        status=400 if refused else 200,
        reply="invalid" if refused else "count_tokens",
        model=model,
        input_tokens=prepared.tokens,
        details=prepared.details(),
    )
    if prepared.refusal is not None:
        return error_response(400, message=prepared.refusal)
    return web.json_response(
        {"input_tokens": prepared.tokens}, headers={"request-id": _request_id()}
    )


def models_json(names: list[str]) -> dict[str, Any]:
    """The Anthropic ``GET /v1/models`` page, all on one page."""
    data = [
        {"type": "model", "id": n, "display_name": n, "created_at": "2025-09-29T00:00:00Z"}
        for n in names
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": names[0] if names else None,
        "last_id": names[-1] if names else None,
    }
