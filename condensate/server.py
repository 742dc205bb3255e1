"""The daemon's HTTP API on aiohttp: parse, call the runtime, serialize.

Every call but ``/health`` needs the bearer token from the state directory; a request whose
Host is not the bound address (or a configured name) is refused; bodies are capped. Every
error is ``{"error": code, "detail": sentence}``, built in one middleware.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import structlog
from aiohttp import web
from pydantic import ValidationError

from condensate import __version__, asks
from condensate.api import CompactAnswer, CreateThread, SendMessage, openapi_document
from condensate.engine import ThreadSpec
from condensate.errors import CondensateError, Refused
from condensate.runtime import Runtime, Thread
from condensate.store import DEFAULT_LIMIT

log = structlog.get_logger()

MAX_BODY = 1_048_576
MAX_WAIT = 30.0
RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime", Runtime)


@dataclass
class Guard:
    """The bearer token and the Host names a request must carry. ``hosts`` is filled in once
    the port is bound (port 0 picks one)."""

    token: str
    hosts: frozenset[str]


GUARD: web.AppKey[Guard] = web.AppKey("guard", Guard)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error(status: int, code: str, detail: str) -> web.Response:
    return web.json_response({"error": code, "detail": detail}, status=status)


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """One place turns failures into JSON errors; handlers only raise."""
    try:
        return await handler(request)
    except Refused as exc:
        return error(exc.status, exc.code, str(exc))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return error(422, "invalid-body", f"Field '{where}': {first['msg']}.")
    except web.HTTPRequestEntityTooLarge:
        return error(413, "body-too-large", f"Request bodies are limited to {MAX_BODY} bytes.")
    except web.HTTPNotFound:
        return error(404, "not-found", f"There is no route {request.method} {request.path}.")
    except web.HTTPMethodNotAllowed:
        return error(
            405, "method-not-allowed", f"{request.method} is not allowed on {request.path}."
        )
    except CondensateError as exc:
        log.warning("request_failed", path=request.path, error=str(exc))
        return error(500, exc.code, str(exc))


@web.middleware
async def guard_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse foreign Host headers (DNS rebinding) and calls without the bearer token."""
    host = (request.host or "").lower()
    if host not in request.app[GUARD].hosts:
        return error(
            421,
            "host-not-allowed",
            f"Host {host!r} is not this daemon's address; requests must use one of "
            f"{', '.join(sorted(request.app[GUARD].hosts))}.",
        )
    if request.path != "/health":
        sent = request.headers.get("Authorization", "")
        expected = f"Bearer {request.app[GUARD].token}"
        if not hmac.compare_digest(sent.encode(), expected.encode()):
            return error(
                401,
                "unauthorized",
                "This call needs 'Authorization: Bearer <token>' with the token from "
                "the daemon's state directory.",
            )
    return await handler(request)


async def _json(request: web.Request) -> Any:
    try:
        return await request.json()
    except json.JSONDecodeError as exc:
        raise Refused(
            code="malformed-json", detail=f"The body is not valid JSON: {exc.msg} at {exc.pos}."
        ) from exc


def _thread(request: web.Request) -> Thread:
    return request.app[RUNTIME].get(request.match_info["thread_id"])


def thread_json(runtime: Runtime, thread: Thread) -> dict[str, Any]:
    usage = runtime.usage(thread)
    view = thread.projection
    return {
        "id": thread.thread_id,
        "engine": thread.spec.engine,
        "model": thread.spec.model,
        "cwd": thread.spec.cwd,
        "head": thread.spec.head,
        "parent": thread.spec.parent,
        "status": "running" if thread.running else "idle",
        "events": view.last_seq,
        "usage": {
            "used": usage.used,
            "window": usage.window,
            "ceiling": usage.ceiling,
            "line": usage.line,
            "fraction": round(usage.fraction, 4),
            "anchored": usage.anchored,
            "resolved": usage.resolved,
        },
        "ceiling": usage.ceiling,
        "line": usage.line,
        "pendingAsk": None if view.ask is None else view.ask.model_dump(mode="json"),
        "seats": [
            {"seat": seat, "session": session or None} for seat, session in thread.seats.items()
        ],
        "children": sorted(view.unjoined),
    }


async def health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "version": __version__})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def create_thread(request: web.Request) -> web.Response:
    body = CreateThread.model_validate(await _json(request))
    runtime = request.app[RUNTIME]
    spec = ThreadSpec(
        engine=body.engine,
        model=body.model,
        cwd=body.cwd,
        brief=body.brief,
        persona=body.persona,
        tools=tuple(body.tools),
        permissions=body.permissions,
        head=body.head,
    )
    thread = await runtime.create(spec)
    return web.json_response(thread_json(runtime, thread), status=201)


async def list_threads(request: web.Request) -> web.Response:
    runtime = request.app[RUNTIME]
    return web.json_response(
        {"threads": [thread_json(runtime, t) for t in runtime.threads.values()]}
    )


async def get_thread(request: web.Request) -> web.Response:
    return web.json_response(thread_json(request.app[RUNTIME], _thread(request)))


async def send_message(request: web.Request) -> web.Response:
    thread = _thread(request)
    body = SendMessage.model_validate(await _json(request))
    stored = await request.app[RUNTIME].steer(thread, body.text, pinned=body.pinned)
    return web.json_response({"seq": stored.seq, "thread": thread.thread_id}, status=202)


def _int(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise Refused(
            code="bad-query", detail=f"'{name}' must be an integer, not {raw!r}."
        ) from exc


async def tail(request: web.Request) -> web.Response:
    """A page of the log; ``wait`` (seconds) long-polls for events after ``after``."""
    runtime = request.app[RUNTIME]
    thread = _thread(request)
    after = _int(request, "after", 0)
    limit = _int(request, "limit", DEFAULT_LIMIT)
    history = request.query.get("history", "0") not in ("0", "false", "")
    wait = min(float(_int(request, "wait", 0)), MAX_WAIT)
    if wait > 0 and thread.projection.last_seq <= after:
        changed = thread.changed
        with anyio.move_on_after(wait):
            await changed.wait()
    page = await anyio.to_thread.run_sync(
        partial(runtime.log.tail, thread.thread_id, after=after, limit=limit, history=history)
    )
    return web.json_response(
        {
            "events": [
                {"seq": s.seq, "tokens": s.tokens, **s.event.model_dump(mode="json")}
                for s in page.events
            ],
            "nextAfter": page.next_after,
            "hasMore": page.has_more,
        }
    )


async def get_compact(request: web.Request) -> web.Response:
    thread = _thread(request)
    return web.json_response(asks.compaction(request.app[RUNTIME], thread))


async def post_compact(request: web.Request) -> web.Response:
    thread = _thread(request)
    body = CompactAnswer.model_validate(await _json(request))
    seat = body.seat or request.query.get("seat")
    stored = await asks.answer(
        request.app[RUNTIME],
        thread,
        mode=body.mode,
        by=body.by,
        keep_from=body.keep_from,
        summary=body.summary,
        reason=body.reason,
        seat=seat,
    )
    queued = stored.event.kind == "compaction.requested"
    return web.json_response(
        {"seq": stored.seq, "kind": stored.event.kind, "queued": queued},
        status=202 if queued else 200,
    )


ROUTES: tuple[tuple[str, str, Handler], ...] = (
    ("GET", "/health", health),
    ("GET", "/openapi.json", openapi),
    ("POST", "/threads", create_thread),
    ("GET", "/threads", list_threads),
    ("GET", "/threads/{thread_id}", get_thread),
    ("POST", "/threads/{thread_id}/messages", send_message),
    ("GET", "/threads/{thread_id}/tail", tail),
    ("GET", "/threads/{thread_id}/compact", get_compact),
    ("POST", "/threads/{thread_id}/compact", post_compact),
)


def make_app(runtime: Runtime, guard: Guard) -> web.Application:
    app = web.Application(
        middlewares=[errors_middleware, guard_middleware], client_max_size=MAX_BODY
    )
    app[RUNTIME] = runtime
    app[GUARD] = guard
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app
