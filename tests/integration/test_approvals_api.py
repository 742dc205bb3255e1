"""Approvals over HTTP and the command line, on a real daemon: a native thread with
``permissions: "ask"`` shows its waiting shell call at ``GET /threads/:id/approvals``, and its
status says it waits (``GET /threads``, ``condensate threads``, ``condensate status``); it is
answered by ``POST`` or by ``condensate approve``; an id that is not pending is 404; and
``condensate stop`` ends a running turn."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from condensate.testing.fake_model import Call, FakeModelServer, Slow, Text, ToolCalls
from tests.integration.daemon import DaemonProcess, call, wait_for
from tests.integration.test_cli import condensate

MODEL = "anthropic:claude-sonnet-4-5"


async def asking(
    session: aiohttp.ClientSession, daemon: DaemonProcess, cwd: Path, brief: str
) -> str:
    status, body = await call(
        session,
        daemon,
        "POST",
        "/threads",
        {"model": MODEL, "cwd": str(cwd), "brief": brief, "permissions": "ask"},
    )
    assert status == 201, body
    return str(body["id"])


async def pending(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, body = await call(session, daemon, "GET", f"/threads/{thread}/approvals")
        assert status == 200, body
        if body["approvals"]:
            return list(body["approvals"])
        await anyio.sleep(0.05)
    msg = f"Thread {thread} never asked for an approval."
    raise AssertionError(msg)


def ended(event: dict[str, Any]) -> bool:
    return bool(event["kind"] == "turn.ended")


async def test_a_call_allowed_over_http_runs(
    session: aiohttp.ClientSession, fake: FakeModelServer, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """The waiting call is listed with its command; POST allow runs it and the turn ends."""
    fake.queue(ToolCalls([Call("shell", {"command": "touch allowed.txt"})]), Text("done"))
    thread = await asking(session, daemon, tmp_path, "touch allowed.txt")
    (shown,) = await pending(session, daemon, thread)
    assert (shown["tool"], shown["argument"]) == ("shell", "touch allowed.txt")
    assert not (tmp_path / "allowed.txt").exists()
    status, body = await call(
        session,
        daemon,
        "POST",
        f"/threads/{thread}/approvals",
        {"id": shown["id"], "decision": "allow"},
    )
    assert status == 200, body
    assert body["decision"] == "allow"
    events = await wait_for(session, daemon, thread, ended)
    assert events[-1]["outcome"] == "completed"
    assert (tmp_path / "allowed.txt").exists()


async def test_a_call_denied_from_the_command_line_does_not_run(
    session: aiohttp.ClientSession, fake: FakeModelServer, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """`condensate approvals` lists it; `condensate approve --deny --reason` refuses it and the
    agent reads the reason."""
    fake.queue(ToolCalls([Call("shell", {"command": "rm -rf build"})]), Text("ok, I won't"))
    thread = await asking(session, daemon, tmp_path, "clean the build")
    (shown,) = await pending(session, daemon, thread)
    code, out, err = await condensate(daemon.home, "approvals", thread)
    assert code == 0, err
    assert shown["id"] in out
    assert "rm -rf build" in out
    code, out, err = await condensate(
        daemon.home, "approve", thread, shown["id"], "--deny", "--reason", "keep the build"
    )
    assert code == 0, err
    assert out.strip() == f"denied {shown['id']}"
    events = await wait_for(session, daemon, thread, ended)
    (result,) = [e for e in events if e["kind"] == "tool.result"]
    assert result["is_error"]
    assert "keep the build" in result["output"]


async def status_of(session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str) -> str:
    """The thread's status as ``GET /threads/:id`` and ``GET /threads`` both say it."""
    status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
    assert status == 200, shown
    status, listed = await call(session, daemon, "GET", "/threads")
    assert status == 200, listed
    (in_list,) = [t["status"] for t in listed["threads"] if t["id"] == thread]
    assert in_list == shown["status"]
    return str(shown["status"])


async def test_a_thread_waiting_on_an_approval_says_so_until_it_is_answered(
    session: aiohttp.ClientSession, fake: FakeModelServer, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """While its shell call waits on the operator the thread's status is
    waiting-for-approval; once allowed, the turn goes on and the status is running again."""
    fake.queue(
        ToolCalls([Call("shell", {"command": "true"})]),
        Slow(Text("done at last"), chunk_delay=0.25, chunks=20),
    )
    thread = await asking(session, daemon, tmp_path, "run true")
    (shown,) = await pending(session, daemon, thread)
    assert await status_of(session, daemon, thread) == "waiting-for-approval"
    status, body = await call(
        session,
        daemon,
        "POST",
        f"/threads/{thread}/approvals",
        {"id": shown["id"], "decision": "allow"},
    )
    assert status == 200, body
    assert await status_of(session, daemon, thread) == "running"
    await wait_for(session, daemon, thread, ended)


async def test_the_command_line_shows_a_thread_waiting_on_an_approval(
    session: aiohttp.ClientSession, fake: FakeModelServer, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """`condensate threads` and `condensate status` show waiting-for-approval on the row of
    a thread whose tool call waits on the operator."""
    fake.queue(ToolCalls([Call("shell", {"command": "true"})]), Text("ok"))
    thread = await asking(session, daemon, tmp_path, "run true, once allowed")
    (shown,) = await pending(session, daemon, thread)
    for command in ("threads", "status"):
        code, out, err = await condensate(daemon.home, command)
        assert code == 0, err
        (row,) = [line for line in out.splitlines() if line.startswith(thread)]
        assert "waiting-for-approval" in row, (command, out)
    code, _, err = await condensate(daemon.home, "approve", thread, shown["id"], "--deny")
    assert code == 0, err
    await wait_for(session, daemon, thread, ended)


async def test_answering_an_approval_that_is_not_pending_is_404(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path, fake: FakeModelServer
) -> None:
    """An id nobody asked for is refused with unknown-approval, as JSON."""
    fake.queue(Text("hello"))
    thread = await asking(session, daemon, tmp_path, "say hello")
    await wait_for(session, daemon, thread, ended)
    status, body = await call(
        session,
        daemon,
        "POST",
        f"/threads/{thread}/approvals",
        {"id": "ap-nothing", "decision": "allow"},
    )
    assert (status, body["error"]) == (404, "unknown-approval")


async def test_stop_ends_a_running_turn(
    session: aiohttp.ClientSession, fake: FakeModelServer, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """`condensate stop THREAD` interrupts the running turn; the log says the operator did."""
    fake.queue(Slow(Text("a very long answer"), chunk_delay=0.5, chunks=40))
    status, body = await call(
        session, daemon, "POST", "/threads", {"model": MODEL, "cwd": str(tmp_path), "brief": "go"}
    )
    assert status == 201, body
    thread = body["id"]
    await anyio.sleep(0.5)
    code, out, err = await condensate(daemon.home, "stop", thread, "--json")
    assert code == 0, err
    assert json.loads(out) == {"interrupted": True, "thread": thread}
    events = await wait_for(session, daemon, thread, ended, seconds=5)
    assert events[-1]["outcome"] == "interrupted"
    assert "operator" in events[-1]["reason"]
