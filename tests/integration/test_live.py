"""The live channel over HTTP, on a real ``condensate serve``: ``GET /threads/:id/live`` sends
every logged event after ``after`` (or ``Last-Event-ID``) in order, exactly as the tail gives
it, then the thread's items as they come; ``GET /live`` sends a snapshot of every thread, then
a thread's new state when it changes; both need the token, end with ``seconds``, end when
their client goes (the daemon serving on), and end when the daemon stops. A reader that falls
behind is told to resync (the API in process, its hub's queues made small).
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from aiohttp import web

from condensate.engine import ThreadSpec
from condensate.events import SystemLine, now_utc
from condensate.http import live_routes
from condensate.http.middleware import Guard
from condensate.http.server import make_app
from condensate.runtime import Runtime
from condensate.runtime.live import Hub
from condensate.testing.fake_model import Call, FakeModelServer, Slow, Text, ToolCalls
from tests.integration.daemon import DaemonProcess, call, wait_for
from tests.integration.harness import runtime_on
from tests.integration.test_metrics import scrape, value

MODEL = "anthropic:claude-sonnet-4-5"


@dataclass(frozen=True)
class Message:
    kind: str
    data: Any
    id: int | None


class Reader:
    """Server-sent events off an aiohttp response, one message at a time."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.comments = 0

    async def next(self, seconds: float = 15.0) -> Message | None:
        """The next message; None when the stream ended."""
        kind, ident = "message", None
        data: list[str] = []
        with anyio.fail_after(seconds):
            while True:
                raw = await self.response.content.readline()
                if not raw:
                    return None
                line = raw.decode().rstrip("\n")
                if not line:
                    if data:
                        return Message(kind, json.loads("\n".join(data)), ident)
                    continue
                if line.startswith(":"):
                    self.comments += 1
                    continue
                field, _, text = line.partition(": ")
                if field == "event":
                    kind = text
                elif field == "data":
                    data.append(text)
                elif field == "id":
                    ident = int(text)

    async def until(self, predicate: Any, seconds: float = 30.0) -> list[Message]:
        """Every message up to and including the first that satisfies ``predicate``."""
        seen: list[Message] = []
        deadline = time.monotonic() + seconds
        while True:
            message = await self.next(max(deadline - time.monotonic(), 0.01))
            assert message is not None, f"the stream ended; seen: {seen[-5:]}"
            seen.append(message)
            if predicate(message):
                return seen

    async def rest(self, seconds: float = 15.0) -> list[Message]:
        """Every message until the stream ends."""
        seen: list[Message] = []
        while (message := await self.next(seconds)) is not None:
            seen.append(message)
        return seen


async def a_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, cwd: Path
) -> str:
    """A new thread whose first turn is over."""
    fake.queue(Text("First answer."))
    brief = f"Live brief {uuid.uuid4().hex[:8]}."
    status, body = await call(
        session, daemon, "POST", "/threads", {"model": MODEL, "cwd": str(cwd), "brief": brief}
    )
    assert status == 201, body
    await wait_for(session, daemon, body["id"], lambda e: e["kind"] == "turn.ended")
    with anyio.fail_after(10):
        while True:
            _, shown = await call(session, daemon, "GET", f"/threads/{body['id']}")
            if shown["status"] == "idle":
                return str(body["id"])
            await anyio.sleep(0.05)


async def tail_all(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, after: int
) -> list[dict[str, Any]]:
    status, page = await call(
        session, daemon, "GET", f"/threads/{thread}/tail?after={after}&limit=1000"
    )
    assert status == 200, page
    return list(page["events"])


async def test_a_thread_stream_sends_the_log_after_after_then_live_events(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """The stream's first messages are the logged events after ``after``, in seq order and
    exactly as the tail gives them (id the seq, event the kind); then a message sent to the
    thread arrives live, with the next seq."""
    thread = await a_thread(session, daemon, fake, tmp_path)
    logged = await tail_all(session, daemon, thread, after=2)
    assert logged, "the first turn logged events after seq 2"
    url = f"{daemon.url}/threads/{thread}/live?after=2"
    async with session.get(url, headers=daemon.headers) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        reader = Reader(response)
        backlog = [await reader.next() for _ in logged]
        assert [m.data for m in backlog if m] == logged
        assert [m.id for m in backlog if m] == [e["seq"] for e in logged]
        assert [m.kind for m in backlog if m] == [e["kind"] for e in logged]

        fake.queue(Text("Second answer."))
        status, sent = await call(
            session, daemon, "POST", f"/threads/{thread}/messages", {"text": "Go on."}
        )
        assert status == 202, sent
        live = await reader.until(lambda m: m.kind == "turn.ended")
    steered = next(m for m in live if m.kind == "message.user")
    assert steered.id is not None
    assert steered.id == sent["seq"] == logged[-1]["seq"] + 1
    assert steered.data["text"] == "Go on."
    seqs = [m.id for m in live if m.id is not None]
    assert seqs == list(range(steered.id, steered.id + len(seqs)))
    answer = next(m for m in live if m.kind == "message.assistant")
    assert answer.data["text"] == "Second answer."
    assert any(m.kind == "thread.status" and m.data == {"status": "running"} for m in live)


async def test_a_thread_stream_says_when_its_turn_waits_on_an_approval(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """Under ``permissions: "ask"``, ``thread.status`` says waiting-for-approval after the
    request is logged, and running after the operator's answer, before the turn ends."""
    fake.queue(Text("Ready."))
    body = {"model": MODEL, "cwd": str(tmp_path), "brief": "Stand by.", "permissions": "ask"}
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    thread = created["id"]
    last = await wait_for(session, daemon, thread, lambda e: e["kind"] == "turn.ended")
    url = f"{daemon.url}/threads/{thread}/live?after={last[-1]['seq']}"
    async with session.get(url, headers=daemon.headers) as response:
        reader = Reader(response)
        fake.queue(ToolCalls([Call("shell", {"command": "true"})]), Text("Ran it."))
        status, sent = await call(
            session, daemon, "POST", f"/threads/{thread}/messages", {"text": "Run true."}
        )
        assert status == 202, sent
        seen = await reader.until(lambda m: m.kind == "approval.requested")
        seen += await reader.until(lambda m: m.kind == "thread.status")
        assert seen[-1].data == {"status": "waiting-for-approval"}
        approval = next(m for m in seen if m.kind == "approval.requested").data["approval_id"]
        status, answered = await call(
            session,
            daemon,
            "POST",
            f"/threads/{thread}/approvals",
            {"id": approval, "decision": "allow"},
        )
        assert status == 200, answered
        seen += await reader.until(lambda m: m.kind == "turn.ended")
    answer = next(i for i, m in enumerate(seen) if m.kind == "approval.answered")
    statuses = [m.data["status"] for m in seen[answer:] if m.kind == "thread.status"]
    assert statuses[:1] == ["running"]


async def test_last_event_id_resumes_after_it(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A reconnecting client's ``Last-Event-ID`` wins over ``after``: the stream resumes with
    the event after it."""
    thread = await a_thread(session, daemon, fake, tmp_path)
    url = f"{daemon.url}/threads/{thread}/live?after=0&seconds=0"
    headers = {**daemon.headers, "Last-Event-ID": "3"}
    async with session.get(url, headers=headers) as response:
        assert response.status == 200
        messages = await Reader(response).rest()
    logged = await tail_all(session, daemon, thread, after=3)
    assert [m.id for m in messages] == [e["seq"] for e in logged]


async def test_seconds_ends_a_stream_after_its_backlog(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """``seconds=0`` sends the backlog (a thread's log; every thread's snapshot) and ends."""
    thread = await a_thread(session, daemon, fake, tmp_path)
    url = f"{daemon.url}/threads/{thread}/live?seconds=0"
    async with session.get(url, headers=daemon.headers) as response:
        messages = await Reader(response).rest()
    assert [m.data for m in messages] == await tail_all(session, daemon, thread, after=0)
    async with session.get(daemon.url + "/live?seconds=0", headers=daemon.headers) as response:
        messages = await Reader(response).rest()
    assert [m.kind for m in messages] == ["snapshot"]
    assert thread in {t["id"] for t in messages[0].data["threads"]}


async def test_live_sends_a_snapshot_then_each_change(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """``GET /live`` starts with every thread as ``GET /threads`` lists it, then sends a thread's
    new state when it changes (a message sent: its event count grows, it runs, then it is idle
    again)."""
    thread = await a_thread(session, daemon, fake, tmp_path)
    status, listed = await call(session, daemon, "GET", "/threads")
    assert status == 200, listed
    async with session.get(daemon.url + "/live", headers=daemon.headers) as response:
        assert response.status == 200
        reader = Reader(response)
        snapshot = await reader.next()
        assert snapshot is not None
        assert snapshot.kind == "snapshot"
        assert snapshot.id is None
        assert snapshot.data == listed

        fake.queue(Slow(Text("A slower answer."), chunk_delay=0.1, chunks=5))
        status, sent = await call(
            session, daemon, "POST", f"/threads/{thread}/messages", {"text": "Again."}
        )
        assert status == 202, sent
        updates = await reader.until(
            lambda m: m.data.get("id") == thread and m.data["status"] == "idle"
        )
    mine = [m.data for m in updates if m.kind == "thread" and m.data["id"] == thread]
    assert any(t["status"] == "running" for t in mine), mine
    status, now = await call(session, daemon, "GET", f"/threads/{thread}")
    assert mine[-1] == now


async def test_live_throttles_a_busy_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A burst of changes to one thread comes as at most one state every 250 ms, the last
    state included."""
    thread = await a_thread(session, daemon, fake, tmp_path)
    async with session.get(daemon.url + "/live", headers=daemon.headers) as response:
        reader = Reader(response)
        await reader.next()
        fake.queue(*[Text(f"Answer {i}.") for i in range(10)])
        for i in range(10):
            status, body = await call(
                session, daemon, "POST", f"/threads/{thread}/messages", {"text": f"Note {i}."}
            )
            assert status == 202, body
        _, final = await call(session, daemon, "GET", f"/threads/{thread}")
        stamps: list[float] = []
        while True:
            message = await reader.next()
            assert message is not None
            if message.kind == "thread" and message.data["id"] == thread:
                stamps.append(time.monotonic())
                if message.data["events"] >= final["events"] and message.data["status"] == "idle":
                    break
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert all(gap > 0.2 for gap in gaps), gaps


@pytest.mark.parametrize("path", ["/live", "/threads/t-000000000000/live"])
async def test_streams_need_the_token(
    session: aiohttp.ClientSession, daemon: DaemonProcess, path: str
) -> None:
    """Without the bearer token a stream is 401 unauthorized, as JSON, before any event."""
    async with session.get(daemon.url + path) as response:
        assert response.status == 401
        assert (await response.json())["error"] == "unauthorized"


async def test_an_unknown_thread_has_no_stream(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """A stream of a thread the daemon lacks is 404 unknown-thread; a bad ``after`` is 400."""
    status, body = await call(session, daemon, "GET", "/threads/t-nosuchthread/live")
    assert (status, body["error"]) == (404, "unknown-thread")
    status, body = await call(session, daemon, "GET", "/live?seconds=soon")
    assert (status, body["error"]) == (400, "bad-query")


async def test_a_stream_ends_when_its_client_goes(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A client that hangs up ends its stream within seconds (the request is over: the
    metrics time it), and the daemon serves on."""
    thread = await a_thread(session, daemon, fake, tmp_path)
    route = {"method": "GET", "route": "/threads/{thread_id}/live", "status": "200"}
    timed = "condensate_http_request_duration_seconds_count"
    before = value(await scrape(session, daemon), timed, route)
    async with aiohttp.ClientSession() as own:
        url = f"{daemon.url}/threads/{thread}/live"
        async with own.get(url, headers=daemon.headers) as response:
            assert (await Reader(response).next()) is not None
    deadline = time.monotonic() + 10
    while value(await scrape(session, daemon), timed, route) == before:
        assert time.monotonic() < deadline, "the stream's handler still runs"
        await anyio.sleep(0.2)
    status, body = await call(session, daemon, "GET", f"/threads/{thread}")
    assert status == 200, body
    assert "request_crashed" not in daemon.log_tail()


async def test_streams_end_when_the_daemon_stops(fake: FakeModelServer, tmp_path: Path) -> None:
    """SIGTERM ends every open stream at once and the daemon exits 0 within seconds."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    daemon = DaemonProcess(home, fake.url)
    daemon.start()
    try:
        async with aiohttp.ClientSession() as session:
            thread = await a_thread(session, daemon, fake, tmp_path)
            url = f"{daemon.url}/threads/{thread}/live"
            async with (
                session.get(url, headers=daemon.headers) as one,
                session.get(daemon.url + "/live", headers=daemon.headers) as every,
            ):
                threads, everything = Reader(one), Reader(every)
                await threads.next()
                await everything.next()
                started = time.monotonic()
                code = await anyio.to_thread.run_sync(daemon.stop)
                await threads.rest(seconds=5)
                await everything.rest(seconds=5)
            assert code == 0
            assert time.monotonic() - started < 3.0, daemon.log_tail()
    finally:
        daemon.close()


@asynccontextmanager
async def served(
    runtime: Runtime, streams: int | None = None
) -> AsyncIterator[tuple[web.Application, str, dict[str, str]]]:
    """The daemon's app on loopback (at most ``streams`` live streams, when given): the app,
    its base URL and the headers a call needs."""
    guard = Guard("tok", frozenset())
    app = make_app(runtime, guard)
    if streams is not None:
        app[live_routes.SLOTS] = live_routes.StreamSlots(cap=streams)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    guard.hosts = frozenset({f"127.0.0.1:{port}"})
    try:
        yield app, f"http://127.0.0.1:{port}", {"Authorization": "Bearer tok"}
    finally:
        await runner.cleanup()


async def test_a_reader_that_falls_behind_is_told_to_resync(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """Past its queue (4 items here) a stream sends what was queued, then ``resync`` naming
    the last seq it sent, and ends; a stream from that seq gets the rest from the log."""
    fake.queue(Text("Hello."))
    async with (
        runtime_on(tmp_path / "home", fake) as runtime,
        aiohttp.ClientSession() as session,
    ):
        runtime.live = Hub(capacity=4)
        async with served(runtime) as (_, base, headers):
            thread = await runtime.create(ThreadSpec("api", MODEL, str(tmp_path), "Hi."))
            with anyio.fail_after(30):
                while thread.running:
                    await thread.turn_done.wait()
            url = f"{base}/threads/{thread.thread_id}/live?after={thread.projection.last_seq}"
            async with session.get(url, headers=headers) as response:
                reader = Reader(response)
                # One event read live first: the stream is past its backlog, reading its queue.
                await runtime.append(thread, SystemLine(at=now_utc(), code="note", text="first"))
                first = await reader.next()
                assert first is not None
                assert first.data["text"] == "first"
                lines = [SystemLine(at=now_utc(), code="note", text=f"{i}") for i in range(10)]
                await runtime.append(thread, lines)
                messages = await reader.rest()
            *sent, resync = messages
            assert resync.kind == "resync"
            assert first.id is not None
            assert 4 <= len(sent) < 10, [m.kind for m in messages]
            assert [m.id for m in sent] == list(range(first.id + 1, first.id + 1 + len(sent)))
            assert resync.data == {"after": sent[-1].id}
            url = f"{base}/threads/{thread.thread_id}/live?after={sent[-1].id}&seconds=0"
            async with session.get(url, headers=headers) as response:
                rest = await Reader(response).rest()
            texts = [m.data["text"] for m in [*sent, *rest]]
            assert texts == [str(i) for i in range(10)]


async def test_streams_past_their_cap_are_refused_with_a_retry_after(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """Live streams have a cap of their own (two here): a third gets 503 too-many-streams
    with Retry-After, and once one stream ends a new one is served; the API still answers
    while the streams run."""
    async with (
        runtime_on(tmp_path / "home", fake) as runtime,
        aiohttp.ClientSession() as session,
        served(runtime, streams=2) as (app, base, headers),
    ):
        first = await session.get(f"{base}/live?seconds=30", headers=headers)
        second = await session.get(f"{base}/live?seconds=30", headers=headers)
        assert (first.status, second.status) == (200, 200)
        async with session.get(f"{base}/live?seconds=0", headers=headers) as third:
            assert third.status == 503
            assert third.headers["Retry-After"] == "5"
            assert (await third.json())["error"] == "too-many-streams"
        async with session.get(f"{base}/threads", headers=headers) as listed:
            assert listed.status == 200
        first.close()
        for _ in range(200):  # the server sees the hang-up at its next look (a poll)
            if app[live_routes.SLOTS].taken <= 1:
                break
            await anyio.sleep(0.05)
        assert app[live_routes.SLOTS].taken == 1
        async with session.get(f"{base}/live?seconds=0", headers=headers) as again:
            assert again.status == 200
        second.close()
