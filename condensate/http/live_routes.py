"""The live routes: the live channel (``condensate.runtime.live``) as server-sent event streams.

``GET /threads/:id/live?after=N`` sends every logged event after seq N from the log, then
each item of the thread as it is published: ``id: <seq>`` on a logged event (a client that
reconnects with ``Last-Event-ID`` resumes after it), ``event: <kind>``, ``data: <json>``.
``GET /live`` sends a snapshot of this daemon's threads, then a thread's new state whenever
it changes, at most every ``THROTTLE_SECONDS`` per thread. Both send a comment every
``HEARTBEAT_SECONDS``, end when the client goes (noticed within ``POLL_SECONDS``), when the
daemon stops, or after ``seconds`` when asked; a client that fell behind is told
``event: resync`` before its stream ends. The server registers these routes and hands them
what they read (``SOURCE``): they do not import it.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from aiohttp import web

from condensate.errors import Refused
from condensate.eventlog import MAX_LIMIT
from condensate.http.middleware import error
from condensate.runtime import Runtime
from condensate.runtime.live import GONE, Item, Subscription, event_json
from condensate.runtime.thread import Thread

HEARTBEAT_SECONDS = 15.0
"""A comment line this often keeps proxies and clients from closing an idle stream."""
POLL_SECONDS = 1.0
"""How often an idle stream looks whether its client has gone."""
THROTTLE_SECONDS = 0.25
"""``GET /live`` sends one thread's state at most this often: a busy thread cannot flood a
browser (the last change is always sent)."""
RESYNC = "resync"
"""The last message of a stream whose client fell a queue behind: reconnect (a thread's
stream with ``after`` at the ``after`` it names; ``/live`` for a new snapshot)."""
SNAPSHOT = "snapshot"
THREAD = "thread"
GONE_EVENT = "gone"
INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True)
class Source:
    """What the live routes read: the runtime, the path's thread resolved as every route
    resolves it (404 unknown, 409 owned by another daemon of a fleet), and a thread as
    ``GET /threads`` describes it."""

    runtime: Runtime
    thread: Callable[[web.Request], Awaitable[Thread]]
    describe: Callable[[Runtime, Thread], dict[str, Any]]


SOURCE: web.AppKey[Source] = web.AppKey("live-source", Source)

MAX_STREAMS = 128
"""At most this many live streams at once: each holds a connection for as long as it runs,
and the edge sheds only idle connections, so without a cap of their own streams could take
every connection the daemon accepts (512) and lock every other client out."""
STREAM_RETRY_SECONDS = 5


@dataclass
class StreamSlots:
    """The live streams open now, against their cap."""

    cap: int = MAX_STREAMS
    taken: int = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        """A stream's slot for its life."""
        self.taken += 1
        try:
            yield
        finally:
            self.taken -= 1

    def refusal(self) -> web.Response | None:
        """503 too-many-streams with Retry-After when every slot is taken, else None."""
        if self.taken < self.cap:
            return None
        detail = (
            f"{self.cap} live streams are open, this daemon's most at once; try again in "
            f"{STREAM_RETRY_SECONDS} s."
        )
        refused = error(503, "too-many-streams", detail)
        refused.headers["Retry-After"] = str(STREAM_RETRY_SECONDS)
        return refused


SLOTS: web.AppKey[StreamSlots] = web.AppKey("live-slots", StreamSlots)


def frame(kind: str, data: Any, seq: int | None = None) -> bytes:
    """One server-sent event; the JSON is one line (ASCII, so no byte can end a line)."""
    head = "" if seq is None else f"id: {seq}\n"
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _integer(raw: str, what: str, code: str) -> int:
    try:
        value = int(raw) if len(raw) <= 20 else None
    except ValueError:
        value = None
    if value is None or value not in INT64:
        raise Refused(code=code, detail=f"{what} must be a 64-bit integer, not {raw[:40]!r}.")
    return value


def _after(request: web.Request) -> int:
    """Where the stream starts: ``Last-Event-ID`` (a reconnecting client's) over ``after``."""
    resumed = request.headers.get("Last-Event-ID")
    if resumed is not None and resumed.strip():
        return max(_integer(resumed.strip(), "Last-Event-ID", "bad-header"), 0)
    return max(_integer(request.query.get("after", "0"), "'after'", "bad-query"), 0)


def _seconds(request: web.Request) -> float:
    raw = request.query.get("seconds")
    if raw is None:
        return math.inf
    return float(max(_integer(raw, "'seconds'", "bad-query"), 0))


class Stream:
    """An open event stream: writes, heartbeats, and when it is over (the client gone, its
    time up)."""

    def __init__(self, request: web.Request, response: web.StreamResponse, seconds: float) -> None:
        self.request = request
        self.response = response
        self.ends_at = anyio.current_time() + seconds
        self.written_at = anyio.current_time()

    @classmethod
    async def open(cls, request: web.Request, seconds: float) -> Stream:
        """Send the stream's head: from here on nothing can be refused."""
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await response.prepare(request)
        return cls(request, response, seconds)

    async def send(self, kind: str, data: Any, seq: int | None = None) -> None:
        await self._write(frame(kind, data, seq))

    async def _write(self, data: bytes) -> None:
        await self.response.write(data)
        self.written_at = anyio.current_time()

    @property
    def gone(self) -> bool:
        """The client hung up."""
        transport = self.request.transport
        return transport is None or transport.is_closing()

    @property
    def over(self) -> bool:
        """The client hung up, or the stream's time is up."""
        return self.gone or anyio.current_time() >= self.ends_at

    async def next(self, subscription: Subscription, wake_at: float = math.inf) -> Item | None:
        """The next item, or None at ``wake_at``, a heartbeat, or a look at the client; see
        ``over`` after a None. Raises ``anyio.EndOfStream`` once the subscription ended."""
        now = anyio.current_time()
        beat_at = self.written_at + HEARTBEAT_SECONDS
        until = min(wake_at, beat_at, self.ends_at, now + POLL_SECONDS)
        item = await subscription.receive(max(until - now, 0.0))
        if item is None and anyio.current_time() >= beat_at and not self.over:
            await self._write(b": keep-alive\n\n")
        return item


async def thread_live(request: web.Request) -> web.StreamResponse:
    """``GET /threads/:id/live``: the thread's log after ``after``, then its live items."""
    source = request.app[SOURCE]
    thread = await source.thread(request)
    last, seconds = _after(request), _seconds(request)
    slots = request.app[SLOTS]
    if (refused := slots.refusal()) is not None:
        return refused
    with slots.held(), source.runtime.live.subscribe(thread.thread_id) as subscription:
        # Subscribed before the log is read: an event stored meanwhile comes both ways, and
        # its seq tells the copy apart.
        stream = await Stream.open(request, seconds)
        try:
            last = await _backlog(source.runtime, stream, thread.thread_id, last)
            while not stream.over:
                item = await stream.next(subscription)
                if item is None:
                    continue
                if item.seq is not None:
                    if item.seq <= last:
                        continue
                    last = item.seq
                await stream.send(item.kind, item.data, item.seq)
                if item.kind == GONE:
                    break
        except anyio.EndOfStream:
            if subscription.lagged:
                await _resync(stream, {"after": last})
        except ConnectionError:
            pass  # the client went while a message was written
    return stream.response


async def _backlog(runtime: Runtime, stream: Stream, thread_id: str, after: int) -> int:
    """Every logged event after ``after``, page by page; the last seq sent."""
    while True:
        page = await runtime.log.tail(thread_id, after=after, limit=MAX_LIMIT)
        for stored in page.events:
            await stream.send(stored.event.kind, event_json(stored), stored.seq)
        after = page.next_after
        if not page.has_more or stream.gone:
            return after


async def all_live(request: web.Request) -> web.StreamResponse:
    """``GET /live``: every thread of this daemon, then each one's state as it changes."""
    source = request.app[SOURCE]
    runtime = source.runtime
    seconds = _seconds(request)
    slots = request.app[SLOTS]
    if (refused := slots.refusal()) is not None:
        return refused
    with slots.held(), runtime.live.subscribe() as subscription:
        stream = await Stream.open(request, seconds)
        try:
            threads = [source.describe(runtime, t) for t in runtime.threads.values()]
            await stream.send(SNAPSHOT, {"threads": threads})
            sent: dict[str, float] = {}
            changed: dict[str, None] = {}  # ordered: the first to change is sent first
            while not stream.over:
                due = min((sent[t] + THROTTLE_SECONDS for t in changed), default=math.inf)
                item = await stream.next(subscription, wake_at=due)
                if item is not None:
                    changed[item.thread] = None
                now = anyio.current_time()
                ready = [t for t in changed if sent.get(t, -math.inf) <= now - THROTTLE_SECONDS]
                for thread_id in ready:
                    del changed[thread_id]
                    sent[thread_id] = now
                    thread = runtime.threads.get(thread_id)
                    if thread is None:
                        await stream.send(GONE_EVENT, {"id": thread_id})
                    else:
                        await stream.send(THREAD, source.describe(runtime, thread))
        except anyio.EndOfStream:
            if subscription.lagged:
                await _resync(stream, {})
        except ConnectionError:
            pass
    return stream.response


async def _resync(stream: Stream, data: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionError):
        await stream.send(RESYNC, data)


ROUTES = (
    ("GET", "/live", all_live),
    ("GET", "/threads/{thread_id}/live", thread_live),
)
