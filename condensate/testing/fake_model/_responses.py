"""The OpenAI Responses API: ``POST /v1/responses`` as JSON or SSE in the event order Codex
accepted, every event numbered by ``sequence_number``. A context refusal is an HTTP 400 or an
HTTP 200 stream ending in ``response.failed``, as configured.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from aiohttp import web

from condensate.testing.fake_model._accounting import count_text, responses_blocks
from condensate.testing.fake_model._errors import BadRequest
from condensate.testing.fake_model._openai import (
    CONTEXT_WINDOW_MESSAGE,
    cache_details,
    context_exceeded,
    error_response,
    fail_response,
    priced,
    request_id,
)
from condensate.testing.fake_model._reasoning import Reasoned, ReasoningOutcome
from condensate.testing.fake_model._reasoning import check as check_reasoning
from condensate.testing.fake_model._reasoning import prefix as reasoning_prefix
from condensate.testing.fake_model._script import Fail, Html, Raw, Text, ToolCalls
from condensate.testing.fake_model._state import Details, FakeState, Priced, ThinkingOutcome, Turn
from condensate.testing.fake_model._wire import (
    STATE,
    EventStream,
    Frame,
    Pace,
    arguments_json,
    call_id,
    cut_reply,
    json_reply,
    model_of,
    output_tokens,
    read_json,
    reasoning_tokens,
    record,
    special_reply,
    special_status,
)


def _response(turn: Turn, body: dict[str, Any], status: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"resp_fake{turn.number:06d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": turn.model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": body.get("reasoning"),
        "store": body.get("store", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "usage": None,
        "metadata": body.get("metadata") or {},
        **fields,
    }


def _items(turn: Turn, body: dict[str, Any], reply: Text | ToolCalls) -> list[dict[str, Any]]:
    """The finished output items: reasoning, message, then one item per tool call."""
    n = turn.number
    items: list[dict[str, Any]] = []
    if reply.thinking is not None:
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_fake{n:06d}",
            "summary": [{"type": "summary_text", "text": reply.thinking}],
        }
        if "reasoning.encrypted_content" in (body.get("include") or []):
            item["encrypted_content"] = f"fake-encrypted-{n:06d}"
        items.append(item)
    if isinstance(reply, Text) or reply.text:
        part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        items.append(
            {
                "type": "message",
                "id": f"msg_fake{n:06d}",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for i, call in enumerate(reply.calls if isinstance(reply, ToolCalls) else []):
        ident = {
            "call_id": call_id("call", turn, i, call),
            "name": call.name,
            "status": "completed",
        }
        if isinstance(call.arguments, str):
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_fake{n:06d}x{i}",
                    **ident,
                    "input": call.arguments,
                }
            )
        else:
            item = {
                "type": "function_call",
                "id": f"fc_fake{n:06d}x{i}",
                **ident,
                "arguments": arguments_json(call),
            }
            if call.namespace is not None:
                item["namespace"] = call.namespace
            items.append(item)
    return items


def _usage(turn: Turn, reply: Text | ToolCalls, rethink: int) -> dict[str, Any]:
    """The usage; reasoning re-created for dropped items (``rethink``) is reasoning output."""
    bill = turn.reported()
    overridden = turn.plan is not None and turn.plan.output_tokens is not None
    extra = 0 if overridden else rethink
    output = output_tokens(turn, reply) + extra
    return {
        "input_tokens": bill.total,
        "input_tokens_details": cache_details(turn.model, bill),
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens(turn.model, reply) + extra},
        "total_tokens": bill.total + output,
    }


def _paying(state: FakeState, cost: Priced, outcome: ReasoningOutcome) -> Priced:
    """``cost`` whose commit also marks the re-created reasoning as paid."""
    names = list(outcome.rethink)

    def commit() -> None:
        cost.commit()
        state.reasoning.charge(names)

    return replace(cost, commit=commit)


def _details(outcome: ReasoningOutcome) -> Details:
    thinking = ThinkingOutcome(outcome.checked, outcome.dropped) if outcome.checked else None
    return Details(thinking=thinking, rethink_tokens=outcome.rethink_tokens)


def _remember(state: FakeState, body: dict[str, Any], items: list[dict[str, Any]]) -> None:
    """Records the reply's reasoning item with the prefix it follows (the whole request)."""
    for item in items:
        if item["type"] != "reasoning":
            continue
        keys = [item["id"]]
        if "encrypted_content" in item:
            keys.append(item["encrypted_content"])
        tokens = count_text(str(body["model"]), item["summary"][0]["text"])
        calls = [
            str(i["call_id"]) for i in items if i["type"] in ("function_call", "custom_tool_call")
        ]
        state.reasoning.issue(keys, Reasoned(reasoning_prefix(body), tokens), calls)


async def responses(request: web.Request) -> web.StreamResponse:
    body: Any = None
    try:
        body = await read_json(request)
        model = model_of(body)
        if "input" not in body:
            msg = "Missing required parameter: 'input'."
            raise BadRequest(msg)
    except BadRequest as exc:
        record(request, "openai", "responses", body, status=400, reply="invalid")
        return error_response(400, message=str(exc))
    state = request.app[STATE]
    outcome = check_reasoning(state.reasoning, model, body)
    details = _details(outcome)
    cost = priced(state, model, body, responses_blocks(body))
    turn = state.begin(model, _paying(state, cost, outcome))
    streaming = bool(body.get("stream"))

    def logged(status: int, usage: dict[str, Any] | None = None) -> None:
        record(
            request,
            "openai",
            "responses",
            body,
            status=status,
            reply=turn.kind,
            turn=turn,
            usage=usage,
            details=details,
        )

    if turn.refusal is not None:
        status = 200 if streaming and turn.refusal.mode == "stream" else 400
        logged(status)
        if status == 200:
            return await _stream_failed(request, turn, body)
        return context_exceeded(CONTEXT_WINDOW_MESSAGE, "input")
    plan = turn.plan
    assert plan is not None
    reply = plan.body
    if isinstance(reply, Fail | Html | Raw):
        logged(reply.status if isinstance(reply, Fail) else special_status(reply))
        if isinstance(reply, Fail):
            return fail_response(reply)
        return await special_reply(request, plan, streaming=streaming, headers=request_id())
    assert isinstance(reply, Text | ToolCalls)
    reply, cut = cut_reply(plan, reply)
    usage = _usage(turn, reply, outcome.rethink_tokens)
    logged(200, usage)
    items = _items(turn, body, reply)
    _remember(state, body, items)
    if cut:
        items[-1]["status"] = "incomplete"
        done = _response(
            turn,
            body,
            "incomplete",
            output=items,
            usage=usage,
            incomplete_details={"reason": "max_output_tokens"},
        )
    else:
        done = _response(turn, body, "completed", output=items, usage=usage)
    if streaming:
        return await _stream(request, turn, body, items, done)
    await Pace.of(turn).whole(reply)
    return await json_reply(request, plan, done, request_id())


class _Events:
    """Numbers every event, as the real stream does."""

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream
        self.sequence = 0

    async def send(self, kind: str, **fields: Any) -> None:
        await self.stream.send(
            {"type": kind, "sequence_number": self.sequence, **fields}, event=kind
        )
        self.sequence += 1


_START = ("response.created", "response.in_progress")
_STOP = ("response.completed", "response.incomplete")


def _frame(data: Mapping[str, Any] | str) -> Frame:
    kind = data.get("type") if isinstance(data, Mapping) else None
    return "start" if kind in _START else "stop" if kind in _STOP else None


async def _open(request: web.Request, turn: Turn, body: dict[str, Any]) -> _Events:
    stream = await EventStream.open(request, request_id(), turn.plan, _frame)
    events = _Events(stream)
    started = _response(turn, body, "in_progress")
    await events.send("response.created", response=started)
    await events.send("response.in_progress", response=started)
    return events


async def _stream_failed(
    request: web.Request, turn: Turn, body: dict[str, Any]
) -> web.StreamResponse:
    events = await _open(request, turn, body)
    error = {"code": "context_length_exceeded", "message": CONTEXT_WINDOW_MESSAGE}
    await events.send("response.failed", response=_response(turn, body, "failed", error=error))
    return await events.stream.close()


async def _stream(
    request: web.Request,
    turn: Turn,
    body: dict[str, Any],
    items: list[dict[str, Any]],
    done: dict[str, Any],
) -> web.StreamResponse:
    pace = Pace.of(turn)
    events = await _open(request, turn, body)
    for index, item in enumerate(items):
        at = {"item_id": item["id"], "output_index": index}
        kind = item["type"]
        opening: dict[str, Any]
        part: dict[str, Any]
        if kind == "reasoning":
            await events.send(
                "response.output_item.added", output_index=index, item={**item, "summary": []}
            )
            text = item["summary"][0]["text"]
            part = {"type": "summary_text", "text": ""}
            await events.send(
                "response.reasoning_summary_part.added", **at, summary_index=0, part=part
            )
            for piece in pace.pieces(text):
                await pace.wait(events.stream)
                await events.send(
                    "response.reasoning_summary_text.delta", **at, summary_index=0, delta=piece
                )
            await events.send(
                "response.reasoning_summary_text.done", **at, summary_index=0, text=text
            )
            part = {"type": "summary_text", "text": text}
            await events.send(
                "response.reasoning_summary_part.done", **at, summary_index=0, part=part
            )
        elif kind == "message":
            opening = {**item, "status": "in_progress", "content": []}
            await events.send("response.output_item.added", output_index=index, item=opening)
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            await events.send("response.content_part.added", **at, content_index=0, part=part)
            for piece in pace.pieces(text):
                await pace.wait(events.stream)
                await events.send(
                    "response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[]
                )
            await events.send(
                "response.output_text.done", **at, content_index=0, text=text, logprobs=[]
            )
            await events.send(
                "response.content_part.done", **at, content_index=0, part=item["content"][0]
            )
        else:
            field = "arguments" if kind == "function_call" else "input"
            prefix = (
                "response.function_call_arguments"
                if kind == "function_call"
                else "response.custom_tool_call_input"
            )
            opening = {**item, field: "", "status": "in_progress"}
            await events.send("response.output_item.added", output_index=index, item=opening)
            for piece in pace.pieces(item[field]):
                await pace.wait(events.stream)
                await events.send(f"{prefix}.delta", **at, delta=piece)
            await events.send(f"{prefix}.done", **at, **{field: item[field]})
        await events.send("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if done["status"] == "incomplete" else "response.completed"
    await events.send(final, response=done)
    return await events.stream.close()
