"""The typed Python client (``condensate.client``) against a real daemon on the fake model
server: each call returns the model the daemon answers with, synchronously and on aiohttp;
an error answer, an unreachable daemon and an answer that is not the model are each a
``DaemonError`` saying so."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from condensate import api
from condensate.api.log import LoggedAssistantMessage, LoggedTurnEnded
from condensate.client import AsyncDaemonClient, DaemonClient, DaemonError, Request
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.daemon import DaemonProcess


def settled(client: DaemonClient, thread: str, turns: int, seconds: float = 30.0) -> api.TailPage:
    """Every event of ``thread`` once ``turns`` turns have ended."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        page = client.tail(thread, limit=1000, history=True)
        ended = [e for e in page.events if isinstance(e, LoggedTurnEnded)]
        if len(ended) >= turns:
            return page
        time.sleep(0.05)
    msg = f"Thread {thread} did not end {turns} turns in {seconds} s."
    raise AssertionError(msg)


async def logged(client: AsyncDaemonClient, thread: str, kind: str) -> None:
    """Returns once ``thread`` has logged an event of ``kind`` (long-polling its tail)."""
    after = 0
    with anyio.fail_after(30):
        while True:
            page = await client.tail(thread, after, wait=5)
            if any(e.kind == kind for e in page.events):
                return
            after = page.next_after


def test_the_client_drives_a_thread_and_reads_each_answer_typed(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """Create, send, tail, pin, compaction, answer, tool, list: each call returns its model,
    the thread's fields and a tail's events typed."""
    client = DaemonClient(daemon.url, daemon.token)
    fake.queue(Text("hello there"), Text("noted"), model="claude-client-1")
    assert client.health().ok is True
    body = api.CreateThread(model="anthropic:claude-client-1", cwd=str(tmp_path), brief="Hi.")
    thread = client.create(body)
    assert isinstance(thread, api.Thread)
    assert (thread.engine, thread.model, thread.head) == ("api", body.model, False)
    assert thread.usage.used > 0
    settled(client, thread.id, turns=1)
    sent = client.send(thread.id, "Thanks.")
    assert (sent.thread, sent.seq > 0) == (thread.id, True)
    page = settled(client, thread.id, turns=2)
    texts = [e.text for e in page.events if isinstance(e, LoggedAssistantMessage)]
    assert texts == ["hello there", "noted"]
    assert page.next_after == page.events[-1].seq
    answer = next(e for e in page.events if e.kind == "message.assistant")
    pinned = client.pin(thread.id, answer.seq)
    assert answer.seq in pinned.pins
    assert pinned.seq is not None
    shown = client.compaction(thread.id)
    assert (shown.ask, shown.requested) == (None, None)
    assert shown.preview.collapse.cost.freed == shown.preview.collapse.freed
    queued = client.answer(thread.id, "microcompact", reason="tidy")
    assert (queued.kind, queued.queued) == ("compaction.requested", True)
    requested = client.compaction(thread.id).requested
    assert requested is not None
    assert (requested.seq, requested.mode, requested.by) == (queued.seq, "microcompact", "operator")
    usage = client.tool(thread.id, "context_usage")
    assert usage.is_error is False
    assert client.approvals(thread.id) == []
    listed = client.threads()
    assert thread.id in [t.id for t in listed]
    again = client.thread(thread.id)
    assert isinstance(again, api.Thread)
    assert again.costs.calls == 2


def test_an_error_answer_is_a_daemon_error_with_its_code_and_status(
    daemon: DaemonProcess,
) -> None:
    """A thread the daemon lacks is DaemonError unknown-thread, 404, with the daemon's
    sentence; an idle thread's interrupt is not-running, 409."""
    client = DaemonClient(daemon.url, daemon.token)
    with pytest.raises(DaemonError) as caught:
        client.thread("t-nobody")
    assert (caught.value.code, caught.value.status) == ("unknown-thread", 404)
    assert "t-nobody" in str(caught.value)
    with pytest.raises(DaemonError) as caught:
        client.tail("t-nobody", limit=5)
    assert caught.value.code == "unknown-thread"


def test_an_answer_that_is_not_the_model_is_an_unexpected_answer(daemon: DaemonProcess) -> None:
    """A real answer read into a model it is not (health as a thread) is refused, naming the
    call and the field, not handed on as a half-filled model."""
    client = DaemonClient(daemon.url, daemon.token)
    wrong = Request("GET", "/health", None, api.Thread.model_validate)
    with pytest.raises(DaemonError) as caught:
        client.send_request(wrong)
    assert caught.value.code == "unexpected-answer"
    assert "GET /health" in str(caught.value)


def test_an_unreachable_daemon_is_said_so() -> None:
    """Nothing listening: DaemonError unreachable, naming the URL, from both clients."""
    url = "http://127.0.0.1:9"
    with pytest.raises(DaemonError) as caught:
        DaemonClient(url, "token", timeout=5).health()
    assert caught.value.code == "unreachable"
    assert url in str(caught.value)

    async def asynchronous() -> None:
        await AsyncDaemonClient(url, "token", timeout=5).health()

    with pytest.raises(DaemonError) as caught:
        anyio.run(asynchronous)
    assert caught.value.code == "unreachable"


async def test_the_async_client_answers_an_approval_and_archives_the_thread(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """On aiohttp: a thread with permissions ask waits on its shell call; the client lists it
    typed, allows it, the turn ends, and the thread is archived; errors are DaemonErrors."""
    fake.queue(
        ToolCalls([Call("shell", {"command": "true"})]), Text("done"), model="claude-client-2"
    )
    async with AsyncDaemonClient(daemon.url, daemon.token) as client:
        body = api.CreateThread(
            model="anthropic:claude-client-2",
            cwd=str(tmp_path),
            brief="Run true.",
            permissions="ask",
        )
        thread = await client.create(body)
        await logged(client, thread.id, "approval.requested")
        waiting = await client.approvals(thread.id)
        (approval,) = waiting
        assert (approval.tool, approval.argument) == ("shell", "true")
        assert approval.deadline > approval.requested_at
        answered = await client.approve(thread.id, approval.id, reason="fine")
        assert (answered.id, answered.decision) == (approval.id, "allow")
        await logged(client, thread.id, "turn.ended")
        page = await client.tail(thread.id, limit=1000)
        assert [e.kind for e in page.events if e.kind.startswith("approval.")] == [
            "approval.requested",
            "approval.answered",
        ]
        interrupted = client.interrupt(thread.id)
        with pytest.raises(DaemonError) as caught:
            await interrupted
        assert (caught.value.code, caught.value.status) == ("not-running", 409)
        archived = await client.archive(thread.id)
        assert archived.thread == thread.id
        assert archived.last_seq >= page.next_after
        assert thread.id not in [t.id for t in await client.threads()]
