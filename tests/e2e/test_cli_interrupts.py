"""The operator's interrupt on the CLI engines: the real ``claude`` and ``codex`` CLIs, driven by
a runtime in process against the fake model server, are stopped mid-stream within 2 s (Claude
Code's ``interrupt`` control request, Codex's ``turn/interrupt``), the turn is logged as
interrupted by the operator, and the next message is answered in the same CLI process; the
same through a real daemon's ``POST /threads/:id/interrupt``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.engine import INTERRUPTED_BY_OPERATOR, ThreadSpec
from condensate.events import Engine
from condensate.runtime import Runtime
from condensate.testing.fake_model import FakeModelServer, Slow, Text
from condensate.runtime.thread import Thread
from tests.e2e.conftest import CLAUDE, CODEX
from tests.integration.daemon import call, running_daemon, wait_for
from tests.integration.test_runtime import running

CASES = [("claude", "anthropic:claude-opus-5-5"), ("codex", "openai:gpt-5.5")]


async def logged(runtime: Runtime, thread: Thread) -> list[Any]:
    return [s.event for s in (await runtime.log.events(thread.thread_id))]


def generations(fake: FakeModelServer, name: str) -> int:
    return sum(1 for r in fake.requests if r.model == name)


@pytest.mark.parametrize(("engine", "model"), CASES)
async def test_an_interrupt_stops_a_streaming_cli_turn_and_the_next_message_is_answered(
    tmp_path: Path, fake: FakeModelServer, workdir: Path, engine: Engine, model: str
) -> None:
    """A turn whose reply streams for 30 s is interrupted within 2 s and ends interrupted by
    the operator; the thread is idle, and a message sent next is answered by the same CLI
    process (no new session)."""
    name = model.split(":", 1)[1]
    fake.queue(Slow(Text("never finished"), chunk_delay=1.0, chunks=30), model=name)
    fake.queue(Text("answered after the interrupt"), model=name)
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(
            ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="stream slowly")
        )
        with anyio.fail_after(60):
            while generations(fake, name) < 1:  # noqa: ASYNC110 - the fake has no event for it
                await anyio.sleep(0.05)
        await anyio.sleep(1.5)  # well inside the stream
        began = time.monotonic()
        answer = await runtime.interrupt(thread)
        took = time.monotonic() - began
        idle = not thread.running
        first = [e for e in await logged(runtime, thread) if e.kind == "turn.ended"]
        await runtime.steer(thread, "are you still there?")
        with anyio.fail_after(60):
            await thread.turn_done.wait()
        events = await logged(runtime, thread)
    ends = [e for e in events if e.kind == "turn.ended"]
    replies = [e.text for e in events if e.kind == "message.assistant"]
    starts = [e for e in events if e.kind == "engine.notice" and e.notice.startswith("session")]
    assert answer is True
    assert took < 2.0, took
    assert idle
    assert (first[-1].outcome, first[-1].reason) == ("interrupted", INTERRUPTED_BY_OPERATOR)
    assert ends[-1].outcome == "completed", ends[-1]
    assert replies[-1] == "answered after the interrupt"
    assert len(starts) == 1, starts  # the CLI honoured the interrupt: no restart was needed


@pytest.mark.parametrize(("engine", "model"), CASES)
async def test_the_interrupt_route_stops_a_cli_turn_of_a_real_daemon(
    tmp_path: Path, fake: FakeModelServer, workdir: Path, engine: Engine, model: str
) -> None:
    """``POST /threads/:id/interrupt`` on a real daemon answers within 2 s while the CLI's
    reply streams; the log shows the turn interrupted by the operator; a second interrupt,
    with nothing running, is refused."""
    name = model.split(":", 1)[1]
    fake.queue(Slow(Text("never finished"), chunk_delay=1.0, chunks=30), model=name)
    (tmp_path / "home").mkdir()
    with running_daemon(
        tmp_path / "home",
        fake.url,
        CONDENSATE_CLAUDE_BINARY=str(CLAUDE),
        CONDENSATE_CODEX_BINARY=str(CODEX),
    ) as daemon:
        async with aiohttp.ClientSession() as session:
            status, created = await call(
                session,
                daemon,
                "POST",
                "/threads",
                {"engine": engine, "model": model, "cwd": str(workdir), "brief": "stream slowly"},
            )
            assert status == 201, created
            with anyio.fail_after(60):
                while generations(fake, name) < 1:  # noqa: ASYNC110 - the fake has no event
                    await anyio.sleep(0.05)
            began = time.monotonic()
            status, answer = await call(
                session, daemon, "POST", f"/threads/{created['id']}/interrupt"
            )
            took = time.monotonic() - began
            events = await wait_for(
                session, daemon, created["id"], lambda e: e["kind"] == "turn.ended"
            )
            again, _ = await call(session, daemon, "POST", f"/threads/{created['id']}/interrupt")
    end = next(e for e in events if e["kind"] == "turn.ended")
    assert (status, answer["interrupted"]) == (200, True)
    assert took < 2.0, took
    assert (end["outcome"], end["reason"]) == ("interrupted", INTERRUPTED_BY_OPERATOR)
    assert again == 409
