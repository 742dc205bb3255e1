"""The daemon's HTTP API, conformance-tested on a real ``condensate serve`` on loopback: the
token and Host guards, every route's success and error shapes, tail paging and long-polls,
compaction answers and queued compactions, the OpenAPI document, and SIGTERM with a restart.

One daemon serves the module (each test makes its own threads); the tests that stop or restart
a daemon start their own. The fake model server runs on its own thread, so it keeps answering
whatever the test's event loop is doing.
"""

from __future__ import annotations

import io
import json
import re
import stat
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.api.tokens import thread_token
from condensate.client import DaemonClient
from condensate.http.middleware import MAX_BODY
from condensate.http.server import ROUTES
from condensate.testing.fake_model import Call, FakeModelServer, Slow, Text, ToolCalls
from tests.integration.daemon import DaemonProcess, call, wait_for

MODEL = "anthropic:claude-sonnet-4-5"
THREAD_KEYS = {"id", "usage", "ceiling", "line", "pendingAsk", "owner"}
USAGE_KEYS = {"used", "window", "ceiling", "line", "fraction", "anchored", "resolved"}
MEDIUM_READS = 250
BIG_READS = 1_000


# -- fixtures and helpers ----------------------------------------------------------------------


def _marker() -> str:
    return uuid.uuid4().hex[:10]


def _body(cwd: Path, brief: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "cwd": str(cwd), "brief": brief, **extra}


def assert_error(status: int, body: Any, expected: int, code: str) -> None:
    """An error response: the status, and a body of exactly ``error`` and ``detail``."""
    assert status == expected, body
    assert isinstance(body, dict)
    assert set(body) == {"error", "detail"}, body
    assert isinstance(body["error"], str)
    assert isinstance(body["detail"], str)
    assert body["detail"]
    assert body["error"] == code, body


async def settled(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, seconds: float = 30.0
) -> dict[str, Any]:
    """The thread once no turn of it runs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, body = await call(session, daemon, "GET", f"/threads/{thread}")
        assert status == 200, body
        if body["status"] == "idle":
            return dict(body)
        await anyio.sleep(0.05)
    msg = f"Thread {thread} still runs after {seconds} s."
    raise AssertionError(msg)


async def started(
    session: aiohttp.ClientSession, daemon: DaemonProcess, cwd: Path, brief: str
) -> str:
    """A new thread, its first turn over."""
    status, body = await call(session, daemon, "POST", "/threads", _body(cwd, brief))
    assert status == 201, body
    await settled(session, daemon, body["id"])
    return str(body["id"])


async def everything(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str
) -> list[dict[str, Any]]:
    """Every event of the thread, snapshots or not."""
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        status, page = await call(
            session, daemon, "GET", f"/threads/{thread}/tail?after={after}&limit=1000&history=1"
        )
        assert status == 200, page
        events += page["events"]
        after = page["nextAfter"]
        if not page["hasMore"]:
            return events


def requests_with(fake: FakeModelServer, *texts: str) -> list[str]:
    """The bodies of the fake's generation requests that contain every one of ``texts``."""
    bodies = [json.dumps(r.body) for r in fake.requests if r.endpoint == "messages"]
    return [b for b in bodies if all(t in b for t in texts)]


async def in_flight(fake: FakeModelServer, *texts: str, seconds: float = 10.0) -> None:
    """Returns once the fake has received a generation request containing ``texts``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if requests_with(fake, *texts):
            return
        await anyio.sleep(0.02)
    msg = f"No model request with {texts} arrived within {seconds} s."
    raise AssertionError(msg)


def _sync_settle(client: DaemonClient, thread: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if client.call("GET", f"/threads/{thread}")["status"] == "idle":
            return
        time.sleep(0.05)
    msg = f"Thread {thread} still runs after {seconds} s."
    raise AssertionError(msg)


def _reading_thread(fake: FakeModelServer, daemon: DaemonProcess, reads: int) -> str:
    """A settled thread whose one turn read a file ``reads`` times in one batch."""
    (daemon.home / "note.txt").write_text("a short note\n")
    fake.queue(ToolCalls([Call("read", {"path": "note.txt"})] * reads), Text("read them all"))
    client = DaemonClient(daemon.url, daemon.token)
    thread = client.call("POST", "/threads", _body(daemon.home, f"read {reads} times"))["id"]
    _sync_settle(client, thread)
    return str(thread)


@pytest.fixture(scope="module")
def medium(fake: FakeModelServer, daemon: DaemonProcess) -> str:
    """A thread of a little over 250 events: more than a page, no snapshot yet."""
    return _reading_thread(fake, daemon, MEDIUM_READS)


@pytest.fixture(scope="module")
def big(fake: FakeModelServer, daemon: DaemonProcess) -> str:
    """A thread of over 1,000 events: one snapshot taken."""
    return _reading_thread(fake, daemon, BIG_READS)


# -- the guards ------------------------------------------------------------------------------


async def test_health_needs_no_token(session: aiohttp.ClientSession, daemon: DaemonProcess) -> None:
    """/health answers 200 without a token."""
    async with session.get(daemon.url + "/health") as response:
        assert response.status == 200
        body = await response.json()
    assert body["ok"] is True


async def test_the_daemons_root_sends_a_browser_to_the_status_page(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """``GET /`` without a token is a redirect to the status page, not a JSON 404."""
    async with session.get(daemon.url + "/", allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == "/ui"


def _concrete(path: str) -> str:
    return path.replace("{thread_id}", "t-000000000000")


GUARDED = [(m, p) for m, p, _ in ROUTES if p not in ("/health", "/ready")]


@pytest.mark.parametrize(("method", "path"), GUARDED)
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "wrong-token"])
async def test_calls_without_the_token_are_unauthorized(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    method: str,
    path: str,
    authorization: str | None,
) -> None:
    """Every route but the probes (/health, /ready) answers 401 unauthorized without the
    right bearer token."""
    headers = {} if authorization is None else {"Authorization": authorization}
    async with session.request(
        method, daemon.url + _concrete(path), json={}, headers=headers
    ) as response:
        assert_error(response.status, await response.json(), 401, "unauthorized")


async def test_a_foreign_host_is_refused(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """A request whose Host is not the daemon's address gets 421 host-not-allowed."""
    status, body = await call(
        session, daemon, "GET", "/threads", headers={"Host": "evil.example:80"}
    )
    assert_error(status, body, 421, "host-not-allowed")


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
async def test_loopback_hosts_are_accepted(
    session: aiohttp.ClientSession, daemon: DaemonProcess, name: str
) -> None:
    """Host 127.0.0.1:PORT and localhost:PORT are the daemon's own address."""
    port = daemon.url.rsplit(":", 1)[1]
    status, body = await call(
        session, daemon, "GET", "/threads", headers={"Host": f"{name}:{port}"}
    )
    assert status == 200, body
    assert "threads" in body


def test_token_file_is_private_and_survives_a_restart(
    fake: FakeModelServer, tmp_path: Path
) -> None:
    """The token file is mode 0600 and holds the same token after a restart."""
    process = DaemonProcess(tmp_path, fake.url)
    process.start()
    try:
        token = process.token
        mode = stat.S_IMODE((tmp_path / "token").stat().st_mode)
        assert mode == 0o600, oct(mode)
        assert process.stop() == 0
        process.start()
        assert process.token == token
        assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600
    finally:
        process.close()


# -- POST /threads ---------------------------------------------------------------------------


async def test_create_answers_201_with_the_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """POST /threads answers 201 with the thread's id, usage, ceiling, line, ask and owner
    (none: the SQLite log is this daemon's alone)."""
    brief = f"brief {_marker()}: make the tests pass"
    status, body = await call(session, daemon, "POST", "/threads", _body(tmp_path, brief))
    assert status == 201, body
    assert set(body) >= THREAD_KEYS
    assert re.fullmatch(r"t-[0-9a-f]{12}", body["id"])
    assert set(body["usage"]) == USAGE_KEYS
    assert body["usage"]["window"] == 200_000
    assert body["ceiling"] == body["usage"]["ceiling"]
    assert body["line"] == body["usage"]["line"]
    assert body["pendingAsk"] is None
    assert body["owner"] is None
    await settled(session, daemon, body["id"])


async def test_the_model_receives_the_brief(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A new thread's first model call carries its brief."""
    brief = f"brief {_marker()}: rename the parser"
    await started(session, daemon, tmp_path, brief)
    assert requests_with(fake, brief)


async def test_malformed_json_is_refused(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """A body that is not JSON gets 400 malformed-json."""
    async with session.post(
        daemon.url + "/threads",
        data=b'{"model": ',
        headers={**daemon.headers, "Content-Type": "application/json"},
    ) as response:
        assert_error(response.status, await response.json(), 400, "malformed-json")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": None}, "model"),
        ({"cwd": None}, "cwd"),
        ({"brief": None}, "brief"),
        ({"brief": ""}, "brief"),
        ({"cwd": 5}, "cwd"),
        ({"head": "maybe"}, "head"),
        ({"head": 0}, "head"),
        ({"outputCap": "5000"}, "outputCap"),
        ({"tools": "read"}, "tools"),
        ({"engine": "gpt"}, "engine"),
        ({"colour": "red"}, "colour"),
    ],
)
async def test_invalid_bodies_name_the_field(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    tmp_path: Path,
    change: dict[str, Any],
    field: str,
) -> None:
    """A missing, mistyped or unknown field gets 422 invalid-body naming the field."""
    body = _body(tmp_path, "never started")
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value
    status, answer = await call(session, daemon, "POST", "/threads", body)
    assert_error(status, answer, 422, "invalid-body")
    assert f"'{field}'" in answer["detail"]


async def test_a_body_over_1_mib_is_refused(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A body over 1 MiB gets 413 body-too-large."""
    raw = json.dumps(_body(tmp_path, "x" * (MAX_BODY + 1))).encode()
    async with session.post(
        daemon.url + "/threads",
        data=io.BytesIO(raw),
        headers={**daemon.headers, "Content-Type": "application/json"},
    ) as response:
        assert_error(response.status, await response.json(), 413, "body-too-large")


async def test_an_unknown_engine_is_refused(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """An engine Condensate does not have gets 422 invalid-body naming the field and the
    engines it has."""
    status, answer = await call(
        session, daemon, "POST", "/threads", _body(tmp_path, "never started", engine="pi")
    )
    assert_error(status, answer, 422, "invalid-body")
    assert "'engine'" in answer["detail"]
    assert "'codex'" in answer["detail"]


# -- reading threads; unknown things -----------------------------------------------------------


async def test_list_and_get_show_the_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """GET /threads lists a new thread and GET /threads/:id shows it."""
    thread = await started(session, daemon, tmp_path, f"list me {_marker()}")
    status, listed = await call(session, daemon, "GET", "/threads")
    assert status == 200, listed
    assert thread in [t["id"] for t in listed["threads"]]
    status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
    assert status == 200, shown
    assert shown["id"] == thread
    assert set(shown) >= THREAD_KEYS
    assert shown["status"] == "idle"
    assert shown["events"] >= 5


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("GET", "/tail"),
        ("GET", "/compact"),
        ("POST", "/compact"),
        ("POST", "/messages"),
    ],
)
async def test_an_unknown_thread_is_404(
    session: aiohttp.ClientSession, daemon: DaemonProcess, method: str, suffix: str
) -> None:
    """Every thread route answers 404 unknown-thread for an id it does not know."""
    body = {"text": "hi"} if suffix == "/messages" else {"mode": "microcompact"}
    status, answer = await call(
        session,
        daemon,
        method,
        f"/threads/t-nosuchthread{suffix}",
        body if method == "POST" else None,
    )
    assert_error(status, answer, 404, "unknown-thread")


async def test_an_unknown_route_is_404(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """A path no route serves gets 404 not-found."""
    status, answer = await call(session, daemon, "GET", "/nothing/here")
    assert_error(status, answer, 404, "not-found")


@pytest.mark.parametrize(
    ("method", "path"),
    [("DELETE", "/threads/t-000000000000"), ("PUT", "/threads"), ("GET", "/threads/x/messages")],
)
async def test_a_wrong_method_is_405(
    session: aiohttp.ClientSession, daemon: DaemonProcess, method: str, path: str
) -> None:
    """A method a route does not take gets 405 method-not-allowed."""
    status, answer = await call(session, daemon, method, path)
    assert_error(status, answer, 405, "method-not-allowed")


# -- steering --------------------------------------------------------------------------------


async def test_a_message_is_accepted_with_its_seq(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """POST /threads/:id/messages answers 202 with the message's seq."""
    thread = await started(session, daemon, tmp_path, f"steer me {_marker()}")
    before = (await settled(session, daemon, thread))["events"]
    status, body = await call(
        session, daemon, "POST", f"/threads/{thread}/messages", {"text": "also update the docs"}
    )
    assert status == 202, body
    assert body["seq"] == before + 1
    assert body["thread"] == thread
    await settled(session, daemon, thread)


async def test_an_idle_thread_takes_a_steer(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A steer to an idle thread starts a turn whose model call carries it."""
    brief = f"idle brief {_marker()}"
    thread = await started(session, daemon, tmp_path, brief)
    steer = f"idle steer {_marker()}"
    status, body = await call(
        session, daemon, "POST", f"/threads/{thread}/messages", {"text": steer}
    )
    assert status == 202, body
    await settled(session, daemon, thread)
    bodies = requests_with(fake, brief)
    assert len(bodies) == 2
    assert steer not in bodies[0]
    assert steer in bodies[1]


async def _steer_mid_call(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    fake: FakeModelServer,
    tmp_path: Path,
    reply: Text | ToolCalls,
) -> None:
    """Starts a thread whose first model call streams ``reply`` slowly, steers it during that
    call, and checks that the thread's next model call carries the steer."""
    brief = f"running brief {_marker()}"
    fake.queue(Slow(reply, chunk_delay=0.05, chunks=10))
    status, created = await call(session, daemon, "POST", "/threads", _body(tmp_path, brief))
    assert status == 201, created
    thread = created["id"]
    await in_flight(fake, brief)
    status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
    assert shown["status"] == "running"
    steer = f"running steer {_marker()}"
    status, body = await call(
        session, daemon, "POST", f"/threads/{thread}/messages", {"text": steer}
    )
    assert status == 202, body
    await settled(session, daemon, thread)
    bodies = requests_with(fake, brief)
    assert len(bodies) >= 2
    assert steer not in bodies[0]
    assert steer in bodies[1]


async def test_a_running_thread_takes_a_steer_at_its_tool_boundary(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A steer sent while the model is asking for a tool reaches it in the call after the tool."""
    (tmp_path / "notes.txt").write_text("notes\n")
    reply = ToolCalls([Call("read", {"path": "notes.txt"})])
    await _steer_mid_call(session, daemon, fake, tmp_path, reply)


async def test_a_running_thread_takes_a_steer_sent_during_its_last_call(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A steer sent while the model writes the turn's final answer reaches it in a next call."""
    await _steer_mid_call(session, daemon, fake, tmp_path, Text("still thinking"))


# -- tail ------------------------------------------------------------------------------------


async def _pages(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, query: str
) -> list[dict[str, Any]]:
    pages = []
    after = 0
    for _ in range(100):
        status, page = await call(
            session, daemon, "GET", f"/threads/{thread}/tail?after={after}{query}"
        )
        assert status == 200, page
        pages.append(page)
        after = page["nextAfter"]
        if not page["hasMore"]:
            return pages
    msg = "The tail never reported hasMore false."
    raise AssertionError(msg)


async def test_paging_visits_every_event_once(
    session: aiohttp.ClientSession, daemon: DaemonProcess, medium: str
) -> None:
    """Paging through nextAfter while hasMore visits every event exactly once, in order."""
    last = (await settled(session, daemon, medium))["events"]
    assert last > 200
    pages = await _pages(session, daemon, medium, "&limit=100")
    seqs = [e["seq"] for page in pages for e in page["events"]]
    assert seqs == list(range(1, last + 1))
    assert [len(p["events"]) for p in pages[:-1]] == [100] * (len(pages) - 1)
    assert all(p["nextAfter"] == p["events"][-1]["seq"] for p in pages)
    assert pages[-1]["hasMore"] is False


async def test_the_default_limit_is_200(
    session: aiohttp.ClientSession, daemon: DaemonProcess, medium: str
) -> None:
    """A tail without limit answers 200 events and says there are more."""
    status, page = await call(session, daemon, "GET", f"/threads/{medium}/tail")
    assert status == 200, page
    assert [e["seq"] for e in page["events"]] == list(range(1, 201))
    assert page["nextAfter"] == 200
    assert page["hasMore"] is True


async def test_an_empty_page_keeps_the_cursor(
    session: aiohttp.ClientSession, daemon: DaemonProcess, medium: str
) -> None:
    """A tail after the last event answers no events, nextAfter unchanged and no more."""
    last = (await settled(session, daemon, medium))["events"]
    status, page = await call(session, daemon, "GET", f"/threads/{medium}/tail?after={last}")
    assert status == 200, page
    assert page == {"events": [], "nextAfter": last, "hasMore": False}


async def test_a_limit_over_1000_is_clamped(
    session: aiohttp.ClientSession, daemon: DaemonProcess, big: str
) -> None:
    """limit=5000 answers 1,000 events."""
    status, page = await call(session, daemon, "GET", f"/threads/{big}/tail?limit=5000&history=1")
    assert status == 200, page
    assert len(page["events"]) == 1000
    assert page["hasMore"] is True


@pytest.mark.parametrize("query", ["after=abc", "limit=ten", "wait=1.5", "after=", "history=true"])
async def test_bad_integers_are_refused(
    session: aiohttp.ClientSession, daemon: DaemonProcess, medium: str, query: str
) -> None:
    """A query parameter that is not an integer gets 400 bad-query naming it."""
    status, answer = await call(session, daemon, "GET", f"/threads/{medium}/tail?{query}")
    assert_error(status, answer, 400, "bad-query")
    assert f"'{query.split('=', maxsplit=1)[0]}'" in answer["detail"]


async def test_history_adds_nothing_without_a_snapshot(
    session: aiohttp.ClientSession, daemon: DaemonProcess, medium: str
) -> None:
    """Without a snapshot, history=1 answers the same page as an ordinary read."""
    _, plain = await call(session, daemon, "GET", f"/threads/{medium}/tail?limit=1000")
    _, history = await call(session, daemon, "GET", f"/threads/{medium}/tail?limit=1000&history=1")
    assert plain == history
    assert plain["events"][0]["seq"] == 1


async def test_history_returns_events_before_a_snapshot(
    session: aiohttp.ClientSession, daemon: DaemonProcess, big: str
) -> None:
    """An ordinary read starts after the latest snapshot; history=1 pages through all."""
    last = (await settled(session, daemon, big))["events"]
    full = [e for page in await _pages(session, daemon, big, "&history=1") for e in page["events"]]
    assert [e["seq"] for e in full] == list(range(1, last + 1))
    snapshots = [e for e in full if e["kind"] == "snapshot.taken"]
    assert snapshots
    upto = snapshots[-1]["upto"]
    plain = [e for page in await _pages(session, daemon, big, "") for e in page["events"]]
    assert [e["seq"] for e in plain] == list(range(upto + 1, last + 1))


async def test_wait_returns_when_an_event_arrives(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """wait=N long-polls and answers as soon as a new event is logged."""
    thread = await started(session, daemon, tmp_path, f"long-poll {_marker()}")
    last = (await settled(session, daemon, thread))["events"]
    steer = f"wake up {_marker()}"
    answer: dict[str, Any] = {}

    async def poll() -> None:
        status, page = await call(
            session, daemon, "GET", f"/threads/{thread}/tail?after={last}&wait=20"
        )
        assert status == 200, page
        answer.update(page)

    began = time.monotonic()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(poll)
        await anyio.sleep(0.5)
        assert not answer, "the tail answered before any event arrived"
        await call(session, daemon, "POST", f"/threads/{thread}/messages", {"text": steer})
    elapsed = time.monotonic() - began
    assert elapsed < 5, elapsed
    assert answer["events"][0]["seq"] == last + 1
    assert answer["events"][0]["text"] == steer
    await settled(session, daemon, thread)


async def test_wait_times_out_with_no_events(
    session: aiohttp.ClientSession, daemon: DaemonProcess, medium: str
) -> None:
    """wait=1 on an idle thread answers an empty page after about a second."""
    last = (await settled(session, daemon, medium))["events"]
    began = time.monotonic()
    status, page = await call(session, daemon, "GET", f"/threads/{medium}/tail?after={last}&wait=1")
    elapsed = time.monotonic() - began
    assert status == 200, page
    assert page == {"events": [], "nextAfter": last, "hasMore": False}
    assert 0.9 <= elapsed < 5, elapsed


# -- compaction ------------------------------------------------------------------------------


async def test_compact_preview_has_its_shape(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """GET /threads/:id/compact answers ask, requested, a preview of each tier and usage."""
    thread = await started(session, daemon, tmp_path, f"preview {_marker()}")
    status, body = await call(session, daemon, "GET", f"/threads/{thread}/compact")
    assert status == 200, body
    assert set(body) == {"ask", "requested", "preview", "usage"}
    assert body["ask"] is None
    assert body["requested"] is None
    preview = body["preview"]
    assert set(preview) == {"microcompact", "collapse", "summary", "model", "unpriced"}
    assert preview["unpriced"] == []
    assert set(preview["microcompact"]) == {"freed", "receipts", "cost"}
    assert isinstance(preview["microcompact"]["freed"], int)
    assert isinstance(preview["microcompact"]["receipts"], list)
    assert set(preview["collapse"]) == {"freed", "cost"}
    assert set(preview["summary"]) == {"possible", "keepFrom", "removedByKind", "freed", "cost"}
    assert isinstance(preview["summary"]["possible"], bool)
    assert isinstance(preview["summary"]["removedByKind"], dict)
    for tier in ("microcompact", "collapse"):
        cost = preview[tier]["cost"]
        assert cost["freed"] == preview[tier]["freed"]
        # The thread's model is Sonnet 4.5: a cache write is $3.75 a million tokens.
        assert cost["rewriteUsd"] == round(cost["rewrittenTokens"] * 3.75 / 1_000_000, 6)
        # ... on Anthropic, whose cache rules (breakpoints, lookback) say what is read again.
        assert cost["cacheRule"] == "anthropic-breakpoints"
        assert isinstance(cost["readTokens"], int)
        assert {"firstChangeSeq", "rewriteFromSeq"} <= set(cost)
        assert set(cost["thinkingDropped"]) == {"blocks", "tokens"}
        assert set(cost["fetchAgain"]) == {"results", "tokens", "items"}
    assert set(body["usage"]) >= {"used", "line", "ceiling"}


async def test_decline_with_nothing_pending_is_409(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A decline with no pending ask gets 409 nothing-pending and logs nothing."""
    thread = await started(session, daemon, tmp_path, f"decline {_marker()}")
    before = (await settled(session, daemon, thread))["events"]
    status, answer = await call(
        session, daemon, "POST", f"/threads/{thread}/compact", {"mode": "decline"}
    )
    assert_error(status, answer, 409, "nothing-pending")
    assert (await settled(session, daemon, thread))["events"] == before


async def _queue_compaction(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, body: dict[str, Any]
) -> int:
    status, answer = await call(session, daemon, "POST", f"/threads/{thread}/compact", body)
    assert status == 202, answer
    assert answer["kind"] == "compaction.requested"
    assert answer["queued"] is True
    return int(answer["seq"])


async def _window_for(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, request: int
) -> dict[str, Any]:
    """Steers the thread and answers the window that carried out compaction ``request``."""
    status, body = await call(
        session, daemon, "POST", f"/threads/{thread}/messages", {"text": "carry on"}
    )
    assert status == 202, body
    events = await wait_for(
        session, daemon, thread, lambda e: e["kind"] == "turn.ended" and e["seq"] > request, 30
    )
    windows = [e for e in events if e["kind"] == "window" and e["request"] == request]
    assert len(windows) == 1, [e["kind"] for e in events]
    started_at = next(
        e["seq"] for e in events if e["kind"] == "turn.started" and e["seq"] > request
    )
    assert windows[0]["seq"] > started_at
    await settled(session, daemon, thread)
    return windows[0]


async def test_a_microcompact_is_queued_and_taken_at_the_next_turn(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A microcompact with nothing pending is queued (202) and carried out at the next turn."""
    thread = await started(session, daemon, tmp_path, f"micro {_marker()}")
    seq = await _queue_compaction(session, daemon, thread, {"mode": "microcompact"})
    _, shown = await call(session, daemon, "GET", f"/threads/{thread}/compact")
    assert shown["requested"]["seq"] == seq
    assert shown["requested"]["mode"] == "microcompact"
    window = await _window_for(session, daemon, thread, seq)
    assert window["window_kind"] == "microcompact"
    _, after = await call(session, daemon, "GET", f"/threads/{thread}/compact")
    assert after["requested"] is None


async def test_an_operator_summary_is_taken_as_written(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A queued summary with its text becomes a window the operator wrote."""
    thread = await started(session, daemon, tmp_path, f"summary {_marker()}")
    text = f"The operator's summary {_marker()}."
    seq = await _queue_compaction(session, daemon, thread, {"mode": "summary", "summary": text})
    window = await _window_for(session, daemon, thread, seq)
    assert window["window_kind"] == "summary"
    assert window["author"] == "operator"
    assert text in window["summary"]


async def test_a_summary_without_text_is_written_by_the_curator(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A queued summary without text is written by the curator (the thread's model here)."""
    thread = await started(session, daemon, tmp_path, f"curated {_marker()}")
    seq = await _queue_compaction(session, daemon, thread, {"mode": "summary"})
    written = f"The curator's summary {_marker()}."
    fake.queue(Text(written))
    window = await _window_for(session, daemon, thread, seq)
    assert window["window_kind"] == "summary"
    assert window["author"] == "curator"
    assert written in window["summary"]


async def test_a_curator_summary_is_billed_and_records_its_probes(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """The curator's calls are logged as a side call just before the window (billed to the
    thread, no anchor), and the window holds what the probes found: the brief's steer the
    answer forgot was asked for again, then repaired."""
    thread = await started(session, daemon, tmp_path, f"probed {_marker()}")
    steer = f"Keep the lexer as it is {_marker()}."
    status, _ = await call(session, daemon, "POST", f"/threads/{thread}/messages", {"text": steer})
    assert status == 202
    done = await settled(session, daemon, thread)
    # Everything up to now goes into the summary: the steer is among what it replaces.
    body = {"mode": "summary", "keepFrom": done["events"]}
    seq = await _queue_compaction(session, daemon, thread, body)
    fake.queue(Text("A summary that forgets the steer."))
    fake.queue(Text("Still forgetting it."))
    window = await _window_for(session, daemon, thread, seq)
    probes = window["probes"]
    assert probes["retried"] is True
    assert any(label.endswith("human message") for label in probes["missed"])
    assert probes["repaired"] == probes["missed_after_retry"]
    assert probes["failing"] == []
    assert steer in window["summary"]
    _, page = await call(
        session, daemon, "GET", f"/threads/{thread}/tail?after={window['seq'] - 2}&limit=1"
    )
    (spent,) = page["events"]
    assert spent["kind"] == "model.usage"
    assert spent["side"] is True
    assert spent["output"] > 0
    assert spent["usd"] is not None


async def test_the_requester_is_recorded_as_operator(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A compaction queued over HTTP is logged with by = operator."""
    thread = await started(session, daemon, tmp_path, f"by {_marker()}")
    seq = await _queue_compaction(
        session, daemon, thread, {"mode": "microcompact", "reason": "too long"}
    )
    status, page = await call(
        session, daemon, "GET", f"/threads/{thread}/tail?after={seq - 1}&limit=1"
    )
    assert status == 200, page
    (event,) = page["events"]
    assert event["kind"] == "compaction.requested"
    assert event["by"] == "operator"
    assert event["mode"] == "microcompact"
    assert event["reason"] == "too long"
    _, shown = await call(session, daemon, "GET", f"/threads/{thread}/compact")
    assert shown["requested"]["by"] == "operator"


@pytest.mark.parametrize(
    ("body", "field"),
    [({"mode": "shrink"}, "mode"), ({}, "mode"), ({"mode": "summary", "keepFrom": 0}, "keepFrom")],
)
async def test_an_invalid_compact_body_is_422(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    medium: str,
    body: dict[str, Any],
    field: str,
) -> None:
    """An invalid or missing mode (or keepFrom) gets 422 invalid-body naming the field."""
    status, answer = await call(session, daemon, "POST", f"/threads/{medium}/compact", body)
    assert_error(status, answer, 422, "invalid-body")
    assert f"'{field}'" in answer["detail"]


async def test_an_answer_may_name_the_threads_one_seat(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """The spec's ``seat`` body field: ``main`` names the thread's one session and the
    answer is taken; any other seat is 404 unknown-seat and nothing is logged."""
    thread = await started(session, daemon, tmp_path, "a seat")
    before = (await settled(session, daemon, thread))["events"]
    other = {"mode": "microcompact", "seat": "s-elsewhere"}
    status, refused = await call(session, daemon, "POST", f"/threads/{thread}/compact", other)
    assert_error(status, refused, 404, "unknown-seat")
    assert (await settled(session, daemon, thread))["events"] == before
    main = {"mode": "microcompact", "seat": "main"}
    status, taken = await call(session, daemon, "POST", f"/threads/{thread}/compact", main)
    assert status == 202, taken
    assert taken["kind"] == "compaction.requested"


# -- interrupting ------------------------------------------------------------------------------


async def test_interrupt_ends_a_running_turn(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """POST /threads/:id/interrupt on a running turn answers 200 {interrupted, thread} within
    2 s, the turn ends interrupted, and the thread is idle."""
    brief = f"slow brief {_marker()}"
    fake.queue(Slow(Text("a very slow answer"), chunk_delay=0.5, chunks=40))
    status, created = await call(session, daemon, "POST", "/threads", _body(tmp_path, brief))
    assert status == 201, created
    thread = created["id"]
    await in_flight(fake, brief)
    began = time.monotonic()
    status, body = await call(session, daemon, "POST", f"/threads/{thread}/interrupt")
    assert status == 200, body
    assert body == {"interrupted": True, "thread": thread}
    assert time.monotonic() - began < 2.0
    events = await everything(session, daemon, thread)
    assert [e["outcome"] for e in events if e["kind"] == "turn.ended"] == ["interrupted"]
    assert (await settled(session, daemon, thread, seconds=2))["status"] == "idle"


async def test_interrupt_of_an_idle_thread_is_409(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """Interrupting a thread with no running turn answers 409 not-running."""
    thread = await started(session, daemon, tmp_path, f"idle {_marker()}")
    status, body = await call(session, daemon, "POST", f"/threads/{thread}/interrupt", {})
    assert_error(status, body, 409, "not-running")


# -- the OpenAPI document --------------------------------------------------------------------


async def test_openapi_describes_every_route(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """/openapi.json is OpenAPI 3.1, has an Error schema, and lists exactly the routes served."""
    status, document = await call(session, daemon, "GET", "/openapi.json")
    assert status == 200, document
    assert document["openapi"].startswith("3.1")
    error = document["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"error", "detail"}
    documented = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    served = {(method, path) for method, path, _ in ROUTES}
    assert documented == served


# -- SIGTERM and restart ---------------------------------------------------------------------


async def test_sigterm_interrupts_a_turn_that_resumes_after_restart(
    session: aiohttp.ClientSession, fake: FakeModelServer, tmp_path: Path
) -> None:
    """SIGTERM exits 0 within seconds, logs the running turn as interrupted, and a restart
    lists the thread with its events and resumes that turn."""
    process = DaemonProcess(tmp_path / "home", fake.url)
    process.home.mkdir()
    process.start()
    try:
        brief = f"slow brief {_marker()}"
        fake.queue(Slow(Text("a very slow answer"), chunk_delay=0.5, chunks=20))
        status, created = await call(session, process, "POST", "/threads", _body(tmp_path, brief))
        assert status == 201, created
        thread = created["id"]
        await in_flight(fake, brief)
        _, shown = await call(session, process, "GET", f"/threads/{thread}")
        assert shown["status"] == "running"

        began = time.monotonic()
        code = await anyio.to_thread.run_sync(process.stop)
        assert code == 0, process.log_tail()
        assert time.monotonic() - began < 5

        process.start()
        _, listed = await call(session, process, "GET", "/threads")
        (again,) = [t for t in listed["threads"] if t["id"] == thread]
        assert again["events"] >= shown["events"]
        await wait_for(
            session,
            process,
            thread,
            lambda e: e["kind"] == "turn.ended" and e["outcome"] == "completed",
        )
        events = await everything(session, process, thread)
        kinds = [(e["kind"], e.get("outcome") or e.get("cause")) for e in events]
        interrupted = kinds.index(("turn.ended", "interrupted"))
        assert ("turn.started", "resume") in kinds[interrupted:]
        await settled(session, process, thread)
    finally:
        process.close()


# -- a thread's own token -------------------------------------------------------------------------


async def test_a_threads_own_token_reaches_its_tools_and_compaction_only(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """The token a CLI thread's tools hold is good on that thread's tool and compaction
    routes, and refused 401 everywhere else: another thread's tools, the thread list, the
    thread itself, a new thread."""
    mine = await started(session, daemon, tmp_path, "mine")
    other = await started(session, daemon, tmp_path, "other")
    own = {"Authorization": f"Bearer {thread_token(daemon.token, mine)}"}

    usage, _ = await call(
        session, daemon, "POST", f"/threads/{mine}/tools/context_usage", {}, headers=own
    )
    compact, _ = await call(
        session, daemon, "POST", f"/threads/{mine}/compact", {"mode": "decline"}, headers=own
    )
    assert usage != 401
    assert compact == 409  # past the guard: nothing is pending
    for method, path in [
        ("POST", f"/threads/{other}/tools/context_usage"),
        ("POST", f"/threads/{other}/compact"),
        ("GET", "/threads"),
        ("GET", f"/threads/{mine}"),
        ("POST", f"/threads/{mine}/messages"),
        ("POST", "/threads"),
    ]:
        status, body = await call(session, daemon, method, path, {}, headers=own)
        assert_error(status, body, 401, "unauthorized")


async def test_only_the_threads_own_token_compacts_as_the_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A compaction authored by the thread comes from its own tools: the daemon's token
    sending ``by: thread`` is refused 403 thread-only and nothing is logged; the thread's
    own token is taken."""
    thread = await started(session, daemon, tmp_path, "compact as the thread")
    before = (await settled(session, daemon, thread))["events"]
    body = {"mode": "microcompact", "by": "thread"}

    status, refused = await call(session, daemon, "POST", f"/threads/{thread}/compact", body)
    assert_error(status, refused, 403, "thread-only")
    assert (await settled(session, daemon, thread))["events"] == before

    own = {"Authorization": f"Bearer {thread_token(daemon.token, thread)}"}
    status, taken = await call(
        session, daemon, "POST", f"/threads/{thread}/compact", body, headers=own
    )
    assert status in (200, 202), taken


# -- a thread that could only fail later ------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "code", "named"),
    [
        ({"engine": "codex", "model": MODEL}, "unsupported-model", "openai:"),
        ({"cwd": "/nonexistent/condensate-test"}, "no-such-cwd", "/nonexistent/condensate-test"),
    ],
)
async def test_a_thread_that_could_only_fail_later_is_refused_at_creation(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    tmp_path: Path,
    change: dict[str, str],
    code: str,
    named: str,
) -> None:
    """Codex asked to run an anthropic: model, or a cwd that does not exist: 422 with a
    sentence naming the problem, and no thread is made."""
    _, before = await call(session, daemon, "GET", "/threads")
    status, body = await call(
        session, daemon, "POST", "/threads", {**_body(tmp_path, "b"), **change}
    )
    assert_error(status, body, 422, code)
    assert named in body["detail"]
    _, after = await call(session, daemon, "GET", "/threads")
    assert len(after["threads"]) == len(before["threads"])
