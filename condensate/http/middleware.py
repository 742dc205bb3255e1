"""The HTTP edge's middleware, and the one table that maps an error's code to its status.

Handlers only raise: a ``Refused`` (its ``code`` and sentence; the status is this table's, so
nothing beneath the edge knows HTTP), a validation error, aiohttp's own, or a bug; one
middleware turns each into ``{"error": code, "detail": sentence}``. Another checks the Host
and the bearer token; another, outside both, times each API request by its declared route;
the innermost holds a request until the daemon is ready (its threads recovered).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anyio
import structlog
from aiohttp import web
from pydantic import ValidationError

from condensate import api
from condensate.api.tokens import thread_of
from condensate.errors import CondensateError, Refused
from condensate.gateway.proxy import PREFIX as GATEWAY_PREFIX
from condensate.http import ui
from condensate.runtime import Runtime

log = structlog.get_logger()

RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime", Runtime)
MAX_BODY = 1_048_576

STATUS: dict[str, int] = {
    # The request cannot be read
    "malformed-json": 400,
    "integer-out-of-range": 400,
    "bad-query": 400,
    "bad-header": 400,
    "body-timeout": 408,
    "message-too-large": 413,
    "unsupported-media-type": 415,
    "invalid-body": 422,
    "invalid-arguments": 422,
    # What it names does not exist
    "unknown-thread": 404,
    "unknown-approval": 404,
    "unknown-tool": 404,
    "unknown-child": 400,
    "unknown-seat": 404,
    # What it asks cannot be done
    "unknown-engine": 422,
    "unknown-model": 422,
    "unsupported-permissions": 422,
    "unsupported-tools": 422,
    "unsupported-model": 422,
    "no-such-cwd": 422,
    "no-credential": 422,
    # Not now: the thread's state or another daemon's
    "not-running": 409,
    "not-attached": 409,
    "attached-session": 409,
    "nothing-pending": 409,
    "agent-controlled-condensation": 409,
    "thread-running": 409,
    "thread-not-finished": 409,
    "thread-archived": 409,
    "thread-owned-elsewhere": 409,
    "thread-changing-hands": 409,
    # Who may ask
    "thread-only": 403,
    # Not now, try again
    "too-many-streams": 503,
    "not-ready": 503,
}
"""The status of each refusal's code; a code not listed (an engine's own) is a 400."""


def status_of(code: str) -> int:
    return STATUS.get(code, 400)


@dataclass
class Guard:
    """The bearer token and the Host names a request must carry. ``hosts`` is filled in once
    the port is bound (port 0 picks one)."""

    token: str
    hosts: frozenset[str]


GUARD: web.AppKey[Guard] = web.AppKey("guard", Guard)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def answer(model: api.Answer, status: int = 200) -> web.Response:
    """An answer, built through its model: what the OpenAPI document says it is."""
    return web.json_response(model.dump(), status=status)


def error(status: int, code: str, detail: str) -> web.Response:
    return answer(api.Error(error=code, detail=detail), status)


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """One place turns failures into JSON errors; handlers only raise."""
    try:
        return await handler(request)
    except Refused as exc:
        return error(status_of(exc.code), exc.code, str(exc))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return error(422, "invalid-body", f"Field '{where}': {first['msg']}.")
    except web.HTTPRequestEntityTooLarge:
        return error(413, "body-too-large", f"Request bodies are limited to {MAX_BODY} bytes.")
    except web.HTTPNotFound:
        return error(404, "not-found", f"There is no route {request.method} {request.path}.")
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        response = error(
            405,
            "method-not-allowed",
            f"{request.method} is not allowed on {request.path}; it takes {allowed}.",
        )
        response.headers["Allow"] = allowed
        return response
    except web.HTTPException as exc:
        code = (exc.reason or "http-error").lower().replace(" ", "-")
        return error(exc.status, code, f"{exc.status} {exc.reason}.")
    except CondensateError as exc:
        log.warning("request_failed", path=request.path, error=str(exc))
        return error(500, exc.code, str(exc))
    except Exception:
        # A bug, not the client's fault: logged once with its traceback, answered as JSON.
        log.exception("request_crashed", method=request.method, path=request.path)
        return error(
            500, "internal-error", f"{request.method} {request.path} failed inside the daemon."
        )


UNMATCHED = "unmatched"
"""The route label of a request no route matched (its raw path is never a label)."""


@web.middleware
async def timing_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Time each API request, by method, route as declared (``/threads/{thread_id}``) and
    status. The gateway's requests pass untimed here: they are model calls, timed as such."""
    if request.path.startswith(GATEWAY_PREFIX + "/"):
        return await handler(request)
    started = time.perf_counter()
    response = await handler(request)
    resource = request.match_info.route.resource
    route = UNMATCHED if resource is None else resource.canonical
    request.app[RUNTIME].metrics.http_request(
        request.method, route, response.status, time.perf_counter() - started
    )
    return response


PUBLIC = frozenset({"/health", "/ready", *ui.PATHS})
"""What needs no token: liveness, readiness, and the status page (its data comes from the
API)."""


READY_RETRY_SECONDS = 1
"""The ``Retry-After`` of a ``/ready`` that says not yet."""


class Readiness:
    """Whether the daemon serves its threads. ``recovering`` from when it starts serving
    until every thread in its log is back (until then a thread could look unknown);
    ``ready`` after; ``stopping`` once it stops. ``/health`` says only that the process
    answers."""

    def __init__(self, state: Literal["recovering", "ready", "stopping"] = "ready") -> None:
        self.state = state
        self._changed: anyio.Event | None = None

    def become(self, state: Literal["ready", "stopping"]) -> None:
        self.state = state
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def recovered(self) -> None:
        """Return once the daemon is no longer recovering."""
        while self.state == "recovering":
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    @property
    def reason(self) -> str:
        """Why the daemon is not ready, as ``/ready`` says it."""
        if self.state == "recovering":
            return (
                "The daemon is recovering its threads from the event log; it serves them once "
                "that is done."
            )
        return "The daemon is stopping."


READINESS: web.AppKey[Readiness] = web.AppKey("readiness", Readiness)
UNHELD = frozenset({"/health", "/ready", "/metrics"})
"""What answers while the daemon recovers: the probes, and the metrics (a scrape that waited
would read as the daemon down)."""


@web.middleware
async def readiness_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Hold a request (the gateway's too) until the threads are recovered, as the listening
    socket's backlog held it before the daemon served anything: no call finds a thread not
    yet recovered, and a resumed turn's model request waits rather than fails."""
    if request.path not in UNHELD:
        await request.app[READINESS].recovered()
    return await handler(request)


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
    # The gateway's callers carry a pass of their own (checked by the gateway).
    if request.path not in PUBLIC and not request.path.startswith(GATEWAY_PREFIX + "/"):
        sent = request.headers.get("Authorization", "")
        token = request.app[GUARD].token
        if hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return await handler(request)
        own = thread_of(sent.removeprefix("Bearer "), token)
        if own is not None and request.method == "POST" and _own_route(request.path, own):
            request[BY_THREAD] = own
            return await handler(request)
        return error(
            401,
            "unauthorized",
            "This call needs 'Authorization: Bearer <token>' with the token from "
            "the daemon's state directory.",
        )
    return await handler(request)


BY_THREAD = "by_thread"
"""The request key that says a request came with a thread's own token: its thread's id."""


def _own_route(path: str, thread_id: str) -> bool:
    """The routes a thread's own token is good for: its tools and its compaction."""
    own = f"/threads/{thread_id}/"
    rest = path[len(own) :] if path.startswith(own) else ""
    return rest == "compact" or (rest.startswith("tools/") and "/" not in rest[6:])
