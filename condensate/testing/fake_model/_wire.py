"""Wire helpers the API modules share: reading a JSON body, server-sent events with pacing, a
client that may hang up and the scripted faults (a broken line, a stall, a missing frame),
whole replies with the same faults, output token counts, and request-log entries.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from aiohttp import web

from condensate.core.tokens import counter_for
from condensate.testing.fake_model._errors import BadRequest
from condensate.testing.fake_model._script import Call, Html, Plan, Raw, Text, ToolCalls
from condensate.testing.fake_model._state import (
    Api,
    Details,
    Endpoint,
    FakeState,
    RecordedRequest,
    Turn,
)

STATE = web.AppKey("fake_model_state", FakeState)


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
    details: Details | None = None,
) -> None:
    """Logs one request. With a ``turn`` the model and the counted bill come from it."""
    bill = turn.bill if turn is not None else None
    details = details or Details()
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
            cache_write_1h=bill.cache_write_1h if bill is not None else 0,
            thinking=details.thinking,
            rethink_tokens=details.rethink_tokens,
            applied_edits=details.applied_edits,
            compaction=details.compaction,
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
    """A call's arguments as the text a function call carries (``raw`` as it is)."""
    if call.raw is not None:
        return call.raw
    if isinstance(call.arguments, str):
        return json.dumps({"input": call.arguments})
    return json.dumps(dict(call.arguments))


def arguments_object(call: Call) -> Any:
    """A call's arguments as a decoded ``input``: ``raw`` parsed, or the string when it is not
    JSON (a JSON reply has no arguments text to send it in)."""
    if call.raw is not None:
        try:
            return json.loads(call.raw)
        except ValueError:
            return call.raw
    if isinstance(call.arguments, str):
        return {"input": call.arguments}
    return dict(call.arguments)


def cut_reply(plan: Plan, reply: Text | ToolCalls) -> tuple[Text | ToolCalls, bool]:
    """``reply`` as a ``Cut`` leaves it (the last call's arguments, else the text, shortened)
    and whether it was cut."""
    if plan.cut is None:
        return reply, False
    keep = plan.cut.keep

    def shorten(text: str) -> str:
        return text[: len(text) // 2 if keep is None else keep]

    if isinstance(reply, ToolCalls) and reply.calls:
        *first, last = reply.calls
        if isinstance(last.arguments, str) and last.raw is None:
            last = replace(last, arguments=shorten(last.arguments))
        else:
            last = replace(last, raw=shorten(arguments_json(last)))
        return replace(reply, calls=[*first, last]), True
    return replace(reply, text=shorten(reply.text)), True


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


Frame: TypeAlias = Literal["start", "stop"] | None
Role: TypeAlias = Callable[[Mapping[str, Any] | str], Frame]
"""Says whether an event opens or closes its API's stream (what ``Unframed`` drops)."""


async def pause(request: web.Request, seconds: float) -> bool:
    """Sleeps ``seconds``, ending early when the client hangs up; whether it is still there."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        transport = request.transport
        if transport is None or transport.is_closing():
            return False
        await asyncio.sleep(min(0.05, left))
    return True


class EventStream:
    """An open ``text/event-stream`` response. Once the client hangs up, writes are dropped.
    A plan's faults apply here: ``Stall`` and ``Broken`` before the event they are due at
    (or at the close), ``Unframed`` to the events ``role`` names."""

    def __init__(
        self,
        request: web.Request,
        response: web.StreamResponse,
        plan: Plan | None = None,
        role: Role | None = None,
    ) -> None:
        self.request = request
        self.response = response
        self.plan = plan
        self.role = role
        self.gone = False
        self.sent = 0
        self._stalled = False
        self._broke = False

    @classmethod
    async def open(
        cls,
        request: web.Request,
        headers: Mapping[str, str],
        plan: Plan | None = None,
        role: Role | None = None,
    ) -> EventStream:
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **headers},
        )
        await response.prepare(request)
        return cls(request, response, plan, role)

    async def send(self, data: Mapping[str, Any] | str, event: str | None = None) -> None:
        if self.gone or self._dropped(data):
            return
        await self._faults()
        payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        head = f"event: {event}\n" if event else ""
        await self._write(f"{head}data: {payload}\n\n")
        self.sent += 1

    def _dropped(self, data: Mapping[str, Any] | str) -> bool:
        unframed = self.plan.unframed if self.plan is not None else None
        if unframed is None:
            return False
        return unframed.drop == "all" or (
            self.role is not None and self.role(data) == unframed.drop
        )

    async def _faults(self) -> None:
        plan = self.plan
        if plan is None:
            return
        if plan.stall is not None and not self._stalled and self.sent >= plan.stall.after:
            self._stalled = True
            if not await pause(self.request, plan.stall.seconds):
                self.gone = True
        if plan.broken is not None and not self._broke and self.sent >= plan.broken.after:
            self._broke = True
            await self._write(f"data: {plan.broken.line}\n\n")

    async def _write(self, text: str) -> None:
        if self.gone:
            return
        try:
            await self.response.write(text.encode())
        except ConnectionError:
            self.gone = True

    async def close(self) -> web.StreamResponse:
        await self._faults()
        if not self.gone:
            try:
                await self.response.write_eof()
            except ConnectionError:
                self.gone = True
        return self.response


async def json_reply(
    request: web.Request, plan: Plan | None, data: Any, headers: Mapping[str, str]
) -> web.StreamResponse:
    """A whole JSON reply with the plan's faults: ``Unframed`` sends ``{}``, ``Broken`` cuts
    the body in half, ``Stall`` sends the headers and waits before the body."""
    if plan is not None and plan.unframed is not None:
        data = {}
    text = json.dumps(data)
    if plan is not None and plan.broken is not None:
        text = text[: len(text) // 2]
    if plan is None or plan.stall is None:
        return web.Response(text=text, content_type="application/json", headers=headers)
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "application/json", **headers}
    )
    await response.prepare(request)
    if await pause(request, plan.stall.seconds):
        with suppress(ConnectionError):
            await response.write(text.encode())
            await response.write_eof()
    return response


def special_status(body: Html | Raw) -> int:
    return body.status if isinstance(body, Html) else 200


async def special_reply(
    request: web.Request, plan: Plan, *, streaming: bool, headers: Mapping[str, str]
) -> web.StreamResponse:
    """The reply for an ``Html`` or ``Raw`` body, the same on every API."""
    body = plan.body
    if isinstance(body, Html):
        return web.Response(
            status=body.status,
            body=body.body.encode(),
            headers={"Content-Type": body.content_type, **headers},
        )
    assert isinstance(body, Raw)
    if not streaming:
        return await json_reply(request, plan, body.body, headers)
    stream = await EventStream.open(request, headers, plan)
    for event in body.events:
        kind = event.get("type") if isinstance(event, Mapping) else None
        await stream.send(event if isinstance(event, str | Mapping) else json.dumps(event), kind)
    return await stream.close()
