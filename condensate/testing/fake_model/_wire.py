"""Wire helpers the API modules share: reading a JSON body, server-sent events with pacing and
a client that may hang up, output token counts, and request-log entries.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from condensate.testing.fake_model._script import Call, Text, ToolCalls
from condensate.testing.fake_model._state import (
    Api,
    Endpoint,
    FakeState,
    RecordedRequest,
    Turn,
)
from condensate.tokens import counter_for

STATE = web.AppKey("fake_model_state", FakeState)


class BadRequest(Exception):
    """A body the real API would reject with 400; each API renders it in its own shape."""


async def read_json(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.read() or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        msg = f"There was an error parsing the body: {exc}"
        raise BadRequest(msg) from exc
    if not isinstance(body, dict):
        msg = "The request body must be a JSON object."
        raise BadRequest(msg)
    return body


def model_of(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        msg = "model: Field required"
        raise BadRequest(msg)
    return model


def record(
    request: web.Request,
    api: Api,
    endpoint: Endpoint,
    body: Any,
    *,
    status: int,
    reply: str,
    turn: Turn | None = None,
    model: str = "",
    input_tokens: int = 0,
    usage: dict[str, Any] | None = None,
) -> None:
    """Logs one request. With a ``turn`` the model and the counted bill come from it."""
    bill = turn.bill if turn is not None else None
    request.app[STATE].record(
        RecordedRequest(
            number=0,
            api=api,
            endpoint=endpoint,
            method=request.method,
            path=request.path_qs,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
            model=turn.model if turn is not None else model,
            input_tokens=bill.total if bill is not None else input_tokens,
            cache_read=bill.cache_read if bill is not None else 0,
            cache_write=bill.cache_write if bill is not None else 0,
            reply=reply,
            status=status,
            usage=usage,
        )
    )


@dataclass(frozen=True)
class Pace:
    """How a streamed string is cut: ``chunks`` pieces, each after ``delay`` seconds."""

    chunks: int = 1
    delay: float = 0.0

    @classmethod
    def of(cls, turn: Turn) -> Pace:
        plan = turn.plan
        return cls(plan.chunks, plan.chunk_delay) if plan is not None else cls()

    def pieces(self, text: str) -> Iterator[str]:
        size = max(1, -(-len(text) // self.chunks))
        parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
        yield from parts

    async def wait(self, stream: EventStream) -> None:
        """Sleeps before the next piece, unless the client has already hung up."""
        if self.delay > 0 and not stream.gone:
            await asyncio.sleep(self.delay)

    async def whole(self, body: Text | ToolCalls) -> None:
        """A non-streaming answer waits as long as its stream would have taken."""
        if self.delay > 0:
            strings = [body.thinking, body.text, *_call_strings(body)]
            await asyncio.sleep(self.delay * self.chunks * sum(1 for s in strings if s))


def _call_strings(body: Text | ToolCalls) -> list[str]:
    return [arguments_json(c) for c in body.calls] if isinstance(body, ToolCalls) else []


def arguments_json(call: Call) -> str:
    """A call's arguments as the JSON text a function call carries."""
    if isinstance(call.arguments, str):
        return json.dumps({"input": call.arguments})
    return json.dumps(dict(call.arguments))


def arguments_object(call: Call) -> dict[str, Any]:
    if isinstance(call.arguments, str):
        return {"input": call.arguments}
    return dict(call.arguments)


def output_tokens(turn: Turn, body: Text | ToolCalls) -> int:
    """The reply's counted tokens (at least 1), unless a ``Usage`` reply says otherwise."""
    if turn.plan is not None and turn.plan.output_tokens is not None:
        return turn.plan.output_tokens
    counter = counter_for(turn.model)
    strings = [body.thinking or "", body.text, *_call_strings(body)]
    return max(1, sum(counter.count(s) for s in strings if s))


def reasoning_tokens(model: str, body: Text | ToolCalls) -> int:
    return counter_for(model).count(body.thinking) if body.thinking else 0


def call_id(prefix: str, turn: Turn, index: int, call: Call) -> str:
    return call.id or f"{prefix}_fake{turn.number:04d}x{index}"


class EventStream:
    """An open ``text/event-stream`` response. Once the client hangs up, writes are dropped."""

    def __init__(self, response: web.StreamResponse) -> None:
        self.response = response
        self.gone = False

    @classmethod
    async def open(cls, request: web.Request, headers: Mapping[str, str]) -> EventStream:
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **headers},
        )
        await response.prepare(request)
        return cls(response)

    async def send(self, data: Mapping[str, Any] | str, event: str | None = None) -> None:
        if self.gone:
            return
        payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        head = f"event: {event}\n" if event else ""
        try:
            await self.response.write(f"{head}data: {payload}\n\n".encode())
        except ConnectionError:
            self.gone = True

    async def close(self) -> web.StreamResponse:
        if not self.gone:
            try:
                await self.response.write_eof()
            except ConnectionError:
                self.gone = True
        return self.response
