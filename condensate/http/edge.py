"""The daemon's TCP edge: its own accept loop in front of aiohttp, so that a hostile local
user cannot take every file descriptor.

asyncio's accept loop answers EMFILE by logging a traceback and scheduling a retry for every
pending connection in the backlog, which multiplies into a storm that spins a core. Here a
connection past ``OPEN_CONNECTIONS`` closes the oldest one with no request in progress (a
half-open head, an idle keep-alive), or is closed itself when every one is busy; a failing
``accept`` is logged once per ``THROTTLE_SECONDS`` and answered by freeing an idle connection.
Request heads are bounded by aiohttp's keep-alive timer, which runs from the connection's
start (or its last response) until a whole head has arrived; bodies by ``api.bodies.BODY_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import errno
import resource
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import anyio
import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from condensate.api import Error
from condensate.logs import Throttled

log = structlog.get_logger()

OPEN_CONNECTIONS = 512
"""At most this many client connections at once (fewer when the file limit is low)."""
HEAD_TIMEOUT = 20.0
"""Seconds a connection may take to send a whole request head, and may idle between requests
(above aiohttp's client keep-alive of 15 s, so that an idle client closes first)."""
LINGER = 2.0
"""Seconds spent reading an unread body after a response before the connection closes."""
ACCEPT_PAUSE = 0.1
"""How long the accept loop waits when ``accept`` fails and no idle connection can be freed."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def raise_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("file_limit_not_raised", soft=soft, hard=hard, error=str(exc))
            return soft
        log.info("file_limit_raised", soft=soft, to=hard)
        return hard
    return soft


def connection_cap(file_limit: int, wanted: int = OPEN_CONNECTIONS) -> int:
    """Client connections may hold at most half the file descriptors: the log, the engines'
    pipes and the provider connections need the rest."""
    return max(1, min(wanted, file_limit // 2))


class EdgeHandler(RequestHandler):
    """aiohttp's connection handler, but a request it cannot parse (or a failure outside
    the app) is answered as JSON like every other error, and logged as one throttled line
    instead of a traceback per request."""

    bad_requests = Throttled("bad_requests")
    failures = Throttled("connection_failures")

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        reason = (message or (str(exc) if exc else "") or HTTPStatus(status).phrase).strip()
        first_line = reason.splitlines()[0] if reason else HTTPStatus(status).phrase
        if status >= 500:
            self.failures.hit(status=status, error=first_line)
        else:
            self.bad_requests.hit(status=status, error=first_line)
        if request.writer.output_size > 0:
            msg = "Response is sent already, cannot send another response with the error"
            raise ConnectionError(msg)
        code = "internal-error" if status == 500 else HTTPStatus(status).phrase.lower()
        failed = Error(error=code.replace(" ", "-"), detail=f"{status}: {first_line}.")
        response = web.json_response(failed.dump(), status=status)
        response.force_close()
        return response

    def log_exception(self, *args: Any, **kw: Any) -> None:
        exc = kw.get("exc_info")
        self.failures.hit(error=str(args[0]) if args else "", exception=repr(exc))


@dataclass
class Gate:
    """The open connections, in the order they came, and which of them run a request.
    ``server`` is aiohttp's, set once its runner is set up."""

    cap: int
    server: web.Server | None = None
    options: dict[str, Any] = field(
        default_factory=lambda: {
            "keepalive_timeout": HEAD_TIMEOUT,
            "lingering_time": LINGER,
            "access_log": None,
        }
    )
    """What each connection's handler is made with."""
    open: dict[RequestHandler, None] = field(default_factory=dict)
    busy: set[RequestHandler] = field(default_factory=set)
    shed: Throttled = field(default_factory=lambda: Throttled("connections_shed"))
    out_of_files: Throttled = field(default_factory=lambda: Throttled("accept_failed"))

    def protocol(self) -> RequestHandler:
        assert self.server is not None
        handler = EdgeHandler(self.server, loop=asyncio.get_running_loop(), **self.options)
        self.open[handler] = None
        return handler

    def _prune(self) -> None:
        for handler in [h for h in self.open if h.transport is None]:
            del self.open[handler]
            self.busy.discard(handler)

    def free_one(self) -> bool:
        """Close the oldest connection with no request in progress; False when all are busy."""
        self._prune()
        for handler in self.open:
            if handler not in self.busy:
                handler.force_close()
                del self.open[handler]
                return True
        return False

    def room(self) -> bool:
        """Whether one more connection may open, closing an idle one to make room."""
        self._prune()
        if len(self.open) < self.cap:
            return True
        freed = self.free_one()
        self.shed.hit(cap=self.cap, refused=not freed)
        return freed

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Mark the connection busy while its request runs, so that it is never shed."""
        protocol = request.protocol
        self.busy.add(protocol)
        try:
            return await handler(request)
        finally:
            self.busy.discard(protocol)


RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


async def accept_forever(listener: socket.socket, gate: Gate) -> None:
    """Accept connections on ``listener`` and hand each to aiohttp, within the gate's cap."""
    loop = asyncio.get_running_loop()
    listener.setblocking(False)
    while True:
        await anyio.wait_readable(listener)
        while True:
            try:
                connection, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                # The connection that failed stays in the backlog; freeing a descriptor lets
                # the next try take it.
                gate.out_of_files.hit(error=exc.strerror or str(exc), errno=exc.errno)
                if exc.errno not in RESOURCE_ERRORS or not gate.free_one():
                    await anyio.sleep(ACCEPT_PAUSE)
                break
            if not gate.room():
                connection.close()
                continue
            try:
                await loop.connect_accepted_socket(gate.protocol, connection)
            except OSError:
                connection.close()
