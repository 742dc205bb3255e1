"""The operator's usage stream as a webhook (``CONDENSATE_USAGE_WEBHOOK``), through a real
daemon: one report per model call, in order, naming the call's count and the thread's usage
after it; a receiver that refuses or is gone slows no thread down."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from aiohttp import web

from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.daemon import call, running_daemon, wait_for


class Receiver:
    """A webhook receiver on loopback that keeps what it is sent (or refuses it)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.reports: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.reports.append(await request.json())
        return web.json_response({}, status=self.status)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    got = Receiver()
    app = web.Application()
    app.router.add_post("/usage", got.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    got.url = f"http://127.0.0.1:{runner.addresses[0][1]}/usage"
    try:
        yield got
    finally:
        await runner.cleanup()


def nowhere() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/usage"


async def a_turn(
    fake: FakeModelServer, tmp_path: Path, url: str, model: str, heard: Receiver | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """A thread of two model calls on a daemon reporting to ``url``: its id, and its log once
    its turn ended; with ``heard``, once that receiver also got a report of each call (the
    daemon still running: the last call's report may be posted after the turn ended)."""
    home = tmp_path / "home"
    await anyio.Path(home).mkdir(parents=True)
    fake.queue(ToolCalls([Call("read", {"path": "a.txt"})]), Text("done"), model=model)
    await anyio.Path(tmp_path / "a.txt").write_text("hello")
    async with aiohttp.ClientSession() as session:
        with running_daemon(home, fake.url, CONDENSATE_USAGE_WEBHOOK=url) as daemon:
            body = {"model": f"anthropic:{model}", "cwd": str(tmp_path), "brief": "Read a.txt."}
            status, created = await call(session, daemon, "POST", "/threads", body)
            assert status == 201, created
            events = await wait_for(
                session, daemon, created["id"], lambda e: e["kind"] == "turn.ended"
            )
            counts = [e for e in events if e["kind"] == "model.usage"]
            with anyio.fail_after(10):
                while heard is not None and len(heard.reports) < len(counts):  # noqa: ASYNC110
                    await anyio.sleep(0.05)  # posts arrive on their own
            return str(created["id"]), events


async def test_each_model_call_is_reported_in_order(
    fake: FakeModelServer, tmp_path: Path, receiver: Receiver
) -> None:
    """Two calls, two reports, in seq order, each with the call's count (as logged) and the
    thread's usage against its line, ceiling and window; the model named as the thread names
    it (and the metrics do)."""
    thread, events = await a_turn(fake, tmp_path, receiver.url, "claude-hook-1", receiver)
    counts = [e for e in events if e["kind"] == "model.usage"]
    assert [r["seq"] for r in receiver.reports] == [e["seq"] for e in counts]
    for report, count in zip(receiver.reports, counts, strict=True):
        assert report["call"]["input"] == count["input"]
        assert report["call"]["cacheWrite"] == count["cache_write"]
        assert report["model"] == "anthropic:claude-hook-1"
        usage = report["usage"]
        assert 0 < usage["used"] <= usage["line"] < usage["ceiling"] <= usage["window"]
    assert {r["thread"] for r in receiver.reports} == {thread}


async def test_a_receiver_that_refuses_or_is_gone_slows_no_thread(
    fake: FakeModelServer, tmp_path: Path, receiver: Receiver
) -> None:
    """A receiver answering 500, and an address nothing listens on: the turn completes as
    it would, every report offered."""
    receiver.status = 500
    _, events = await a_turn(fake, tmp_path / "refused", receiver.url, "claude-hook-2", receiver)
    assert events[-1]["outcome"] == "completed"
    assert len(receiver.reports) == 2
    _, events = await a_turn(fake, tmp_path / "gone", nowhere(), "claude-hook-3")
    assert events[-1]["outcome"] == "completed"
