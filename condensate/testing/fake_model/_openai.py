"""OpenAI's shared wire shapes (error bodies, the model list with vLLM's ``max_model_len``) and
the Chat Completions API: ``POST /v1/chat/completions`` as JSON or ``data:`` chunks ending in
``data: [DONE]``, with a usage chunk when ``stream_options.include_usage`` is set.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from condensate.testing.fake_model._accounting import Bill, chat_blocks, count_blocks
from condensate.testing.fake_model._anthropic import retry_after_header
from condensate.testing.fake_model._errors import BadRequest
from condensate.testing.fake_model._models import bills_cache_writes
from condensate.testing.fake_model._script import Fail, Html, Raw, Text, ToolCalls
from condensate.testing.fake_model._state import FakeState, Priced, Turn
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

CONTEXT_WINDOW_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)

_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: ("invalid_request_error", None, "You are not allowed to sample from this model."),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model does not exist or you do not have access to it.",
    ),
    413: ("invalid_request_error", "request_too_large", "Request too large."),
    429: ("tokens", "rate_limit_exceeded", "Rate limit reached for tokens per min (TPM)."),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    529: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def error_response(
    status: int,
    error_type: str | None = None,
    message: str | None = None,
    retry_after: float | None = None,
    *,
    code: str | None = None,
    param: str | None = None,
) -> web.Response:
    """The real OpenAI error body ``{"error": {message, type, param, code}}`` for ``status``."""
    fallback = (
        ("server_error", None, "Internal error.")
        if status >= 500
        else ("invalid_request_error", None, "Error.")
    )
    default_type, default_code, default_message = _ERRORS.get(status, fallback)
    if message is None:
        message = default_message
        if status == 429:
            message += f" Please try again in {retry_after_header(retry_after or 1)}s."
    body = {
        "error": {
            "message": message,
            "type": error_type or default_type,
            "param": param,
            "code": code or default_code,
        }
    }
    headers = {"x-request-id": f"req_fake{uuid.uuid4().hex[:20]}"}
    if retry_after is not None:
        headers["retry-after"] = retry_after_header(retry_after)
    return web.json_response(body, status=status, headers=headers)


def fail_response(fail: Fail) -> web.Response:
    return error_response(fail.status, fail.error_type, fail.message, fail.retry_after)


def unauthorized(headers: Mapping[str, str]) -> web.Response:
    if "Authorization" not in headers and "x-api-key" not in headers:
        message = (
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        )
        return error_response(401, message=message)
    return error_response(401)


def context_exceeded(message: str, param: str) -> web.Response:
    return error_response(400, message=message, code="context_length_exceeded", param=param)


def models_json(names: list[str], limits: Mapping[str, int | None]) -> dict[str, Any]:
    """The OpenAI ``GET /v1/models`` list; ``max_model_len`` (as vLLM sends it) when known."""
    data = []
    for name in names:
        item: dict[str, Any] = {
            "id": name,
            "object": "model",
            "created": 1_759_104_000,
            "owned_by": "fake",
        }
        if limits.get(name) is not None:
            item["max_model_len"] = limits[name]
        data.append(item)
    return {"object": "list", "data": data}


def priced(state: FakeState, model: str, body: Mapping[str, Any], items: list[str]) -> Priced:
    """The prompt's items counted and priced against the automatic prompt cache."""
    counts = count_blocks(model, items)
    bill, commit = state.openai_cache.price(model, body, items, counts, state.clock.now())
    return Priced(bill, sum(map(len, items)), commit)


def cache_details(model: str, bill: Bill) -> dict[str, int]:
    """``cached_tokens``, and from GPT-5.6 on ``cache_write_tokens``: "OpenAI reports writes in
    `cache_write_tokens` and reads in `cached_tokens`" (https://developers.openai.com/api/docs/
    guides/prompt-caching; older models bill no writes and report none)."""
    details = {"cached_tokens": bill.cache_read}
    if bills_cache_writes(model):
        details["cache_write_tokens"] = bill.cache_write
    return details


def _chat_usage(turn: Turn, reply: Text | ToolCalls) -> dict[str, Any]:
    bill = turn.reported()
    output = output_tokens(turn, reply)
    return {
        "prompt_tokens": bill.total,
        "completion_tokens": output,
        "total_tokens": bill.total + output,
        "prompt_tokens_details": cache_details(turn.model, bill),
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens(turn.model, reply)},
    }


def _tool_calls(turn: Turn, reply: Text | ToolCalls) -> list[dict[str, Any]]:
    calls = reply.calls if isinstance(reply, ToolCalls) else []
    return [
        {
            "id": call_id("call", turn, i, c),
            "type": "function",
            "function": {"name": c.name, "arguments": arguments_json(c)},
        }
        for i, c in enumerate(calls)
    ]


async def chat_completions(request: web.Request) -> web.StreamResponse:
    body: Any = None
    try:
        body = await read_json(request)
        model = model_of(body)
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            msg = "Missing required parameter: 'messages'."
            raise BadRequest(msg)
    except BadRequest as exc:
        record(request, "openai", "chat", body, status=400, reply="invalid")
        return error_response(400, message=str(exc))
    state = request.app[STATE]
    turn = state.begin(model, priced(state, model, body, chat_blocks(body)))
    if turn.refusal is not None:
        record(request, "openai", "chat", body, status=400, reply=turn.kind, turn=turn)
        text = (
            f"This model's maximum context length is {turn.refusal.limit} tokens. However, your "
            f"messages resulted in {turn.refusal.tokens} tokens. Please reduce the length of the "
            "messages."
        )
        return context_exceeded(text, "messages")
    plan = turn.plan
    assert plan is not None
    reply = plan.body
    if isinstance(reply, Fail | Html | Raw):
        status = reply.status if isinstance(reply, Fail) else special_status(reply)
        record(request, "openai", "chat", body, status=status, reply=turn.kind, turn=turn)
        if isinstance(reply, Fail):
            return fail_response(reply)
        return await special_reply(
            request, plan, streaming=bool(body.get("stream")), headers=request_id()
        )
    assert isinstance(reply, Text | ToolCalls)
    reply, cut = cut_reply(plan, reply)
    usage = _chat_usage(turn, reply)
    record(request, "openai", "chat", body, status=200, reply=turn.kind, turn=turn, usage=usage)
    calls = _tool_calls(turn, reply)
    head = {
        "id": f"chatcmpl-fake{turn.number:06d}",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }
    finish = "length" if cut else "tool_calls" if calls else "stop"
    if body.get("stream"):
        options = body.get("stream_options")
        with_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
        chunk_usage = usage if with_usage else None
        return await _stream(
            request, turn, reply, head=head, calls=calls, finish=finish, usage=chunk_usage
        )
    await Pace.of(turn).whole(reply)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if reply.text or not calls else None,
        "refusal": None,
    }
    if reply.thinking is not None:
        message["reasoning_content"] = reply.thinking
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    data = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
    return await json_reply(request, plan, data, request_id())


def request_id() -> dict[str, str]:
    """The ``x-request-id`` header OpenAI sends with every reply."""
    return {"x-request-id": f"req_fake{uuid.uuid4().hex[:20]}"}


def _frame(data: Mapping[str, Any] | str) -> Frame:
    """A chunk that opens the stream (the role) or closes it (the finish reason, usage,
    ``[DONE]``)."""
    if isinstance(data, str):
        return "stop" if data == "[DONE]" else None
    choices = data.get("choices") or []
    if not choices or any(c.get("finish_reason") for c in choices):
        return "stop"
    return "start" if any("role" in (c.get("delta") or {}) for c in choices) else None


async def _stream(
    request: web.Request,
    turn: Turn,
    reply: Text | ToolCalls,
    *,
    head: dict[str, Any],
    calls: list[dict[str, Any]],
    finish: str,
    usage: dict[str, Any] | None,
) -> web.StreamResponse:
    pace = Pace.of(turn)
    stream = await EventStream.open(request, request_id(), turn.plan, _frame)
    extra = {"usage": None} if usage is not None else {}

    async def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        await stream.send({**head, "object": "chat.completion.chunk", "choices": [choice], **extra})

    await chunk({"role": "assistant", "content": ""})
    for piece in pace.pieces(reply.thinking) if reply.thinking else []:
        await pace.wait(stream)
        await chunk({"reasoning_content": piece})
    for piece in pace.pieces(reply.text) if reply.text else []:
        await pace.wait(stream)
        await chunk({"content": piece})
    for index, call in enumerate(calls):
        function = call["function"]
        opening = {"index": index, "id": call["id"], "type": "function"}
        await chunk(
            {"tool_calls": [{**opening, "function": {"name": function["name"], "arguments": ""}}]}
        )
        for piece in pace.pieces(function["arguments"]):
            await pace.wait(stream)
            await chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    await chunk({}, finish)
    if usage is not None:
        await stream.send(
            {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        )
    await stream.send("[DONE]")
    return await stream.close()
