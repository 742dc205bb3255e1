"""``GET /ready`` on a real ``condensate serve`` that is still recovering its threads: not
ready (503 ``not-ready``) while it recovers, ready (200) once it is done; ``/health`` answers
throughout, and any other call waits for the recovery rather than miss a thread.

The seam that holds recovery: recovering a thread looks up its model's window in the
provider's model listing (``GET /v1/models``), and the provider here is a loopback server
that answers that request only when the test lets it (the daemon gives the lookup 5 s).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import anyio
from aiohttp import web

from condensate import __version__
from condensate.events import (
    AssistantMessage,
    ThreadCreated,
    TurnEnded,
    TurnStarted,
    UserMessage,
    now_utc,
)
from tests.integration.daemon import DaemonProcess
from tests.integration.test_recovery import write_log

THREAD = "t-recovered"


@dataclass
class HeldListing:
    """A provider whose model listing answers only once ``release`` is set."""

    url: str = ""
    asked: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)

    async def models(self, request: web.Request) -> web.Response:
        self.asked.set()
        await self.release.wait()
        return web.json_response({"data": []})


@asynccontextmanager
async def held_listing() -> AsyncIterator[HeldListing]:
    held = HeldListing()
    app = web.Application()
    app.router.add_get("/v1/models", held.models)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    held.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield held
    finally:
        held.release.set()
        await runner.cleanup()


@asynccontextmanager
async def recovering(tmp_path: Path, held: HeldListing) -> AsyncIterator[DaemonProcess]:
    """A daemon started on a log that holds one finished thread, its recovery held on the
    listing until ``held.release``."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    write_log(
        home / "condensate.db",
        THREAD,
        [
            ThreadCreated(
                at=now_utc(), engine="api", model="anthropic:claude-sonnet-4-5", cwd=str(tmp_path)
            ),
            UserMessage(at=now_utc(), text="brief"),
            TurnStarted(at=now_utc(), cause="human"),
            AssistantMessage(at=now_utc(), text="done"),
            TurnEnded(at=now_utc(), outcome="completed"),
        ],
    )
    daemon = DaemonProcess(home, held.url)
    # Off the loop: the held listing is served on it while the daemon starts.
    await anyio.to_thread.run_sync(daemon.start)
    try:
        with anyio.fail_after(20):
            await held.asked.wait()
        yield daemon
    finally:
        held.release.set()
        await anyio.to_thread.run_sync(daemon.close)


async def test_ready_says_not_ready_until_the_threads_are_recovered(tmp_path: Path) -> None:
    """While the daemon recovers its threads, /ready is 503 not-ready with a Retry-After and
    a sentence saying so (and /health is 200: the process is alive); once recovery is done,
    /ready is 200 with the version."""
    async with (
        held_listing() as held,
        recovering(tmp_path, held) as daemon,
        aiohttp.ClientSession() as session,
    ):
        async with session.get(daemon.url + "/ready") as response:
            assert response.status == 503
            assert response.headers["Retry-After"] == "1"
            body = await response.json()
        assert body["error"] == "not-ready"
        assert "recovering" in body["detail"]
        async with session.get(daemon.url + "/health") as response:
            assert response.status == 200
        held.release.set()
        with anyio.fail_after(10):
            while True:
                async with session.get(daemon.url + "/ready") as response:
                    if response.status == 200:
                        assert await response.json() == {"ready": True, "version": __version__}
                        break
                await anyio.sleep(0.05)


async def test_a_call_made_during_recovery_waits_for_it_and_finds_the_thread(
    tmp_path: Path,
) -> None:
    """GET /threads/:id of a thread not yet recovered is not answered 404: it waits until the
    recovery is done, then answers the thread."""
    async with (
        held_listing() as held,
        recovering(tmp_path, held) as daemon,
        aiohttp.ClientSession() as session,
    ):
        answered: list[tuple[int, str]] = []

        async def get_thread() -> None:
            url = f"{daemon.url}/threads/{THREAD}"
            async with session.get(url, headers=daemon.headers) as response:
                body = await response.json()
                answered.append((response.status, body.get("id", body.get("error"))))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(get_thread)
            await anyio.sleep(0.5)
            assert answered == []
            held.release.set()
        assert answered == [(200, THREAD)]
