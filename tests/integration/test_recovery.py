"""After a kill: input the daemon acknowledged (201 for a brief, 202 for a steer) but no turn
took up before the kill is answered once the daemon starts again; input a finished turn
already read is not answered twice. A real SQLite log, the real native engine, the fake
model server over HTTP."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio

from condensate.events import (
    AssistantMessage,
    Event,
    ThreadCreated,
    TurnEnded,
    TurnStarted,
    UserMessage,
    now_utc,
)
from condensate.runtime import Runtime
from condensate.eventlog.sqlite_sync import EventLog
from condensate.testing.fake_model import FakeModelServer, Text
from tests.integration.harness import runtime_on

MODEL = "anthropic:claude-sonnet-4-5"


def write_log(path: Path, thread_id: str, events: Sequence[Event]) -> None:
    """The log a killed daemon left: these events, and nothing after them."""
    with EventLog.open(path) as log:
        log.append(thread_id, list(events))


def created(cwd: Path) -> ThreadCreated:
    return ThreadCreated(at=now_utc(), engine="api", model=MODEL, cwd=str(cwd))


def restarted(home: Path, fake: FakeModelServer) -> AbstractAsyncContextManager[Runtime]:
    """A runtime started on ``home`` after the kill, and recovered."""
    return runtime_on(home, fake, recovered=True)


async def answered(runtime: Runtime, thread_id: str) -> list[str]:
    """The thread's replies once its recovered turn has ended."""
    thread = runtime.get(thread_id)
    with anyio.fail_after(30):
        while thread.running or not thread.turn_done.is_set():
            await thread.turn_done.wait()
    return [
        e.event.text for e in thread.projection.entries if isinstance(e.event, AssistantMessage)
    ]


async def test_a_brief_acknowledged_before_its_turn_started_is_answered_after_restart(tmp_path):
    """A kill between the 201 and the turn's start leaves a brief no turn read; the restart
    starts a turn that answers it."""
    home = tmp_path / "home"
    home.mkdir()
    write_log(
        home / "condensate.db",
        "t-brief",
        [created(tmp_path), UserMessage(at=now_utc(), text="write the parser")],
    )
    async with FakeModelServer() as fake, restarted(home, fake) as runtime:
        fake.queue(Text("parser written"))
        assert await answered(runtime, "t-brief") == ["parser written"]
    assert "write the parser" in json.dumps(fake.requests[-1].body)


async def test_a_steer_acknowledged_before_its_turn_started_is_answered_after_restart(tmp_path):
    """A steer logged after a finished turn (202) whose turn the kill prevented is answered
    after the restart."""
    home = tmp_path / "home"
    home.mkdir()
    write_log(
        home / "condensate.db",
        "t-steer",
        [
            created(tmp_path),
            UserMessage(at=now_utc(), text="brief"),
            TurnStarted(at=now_utc(), cause="human"),
            AssistantMessage(at=now_utc(), text="first answer"),
            TurnEnded(at=now_utc(), outcome="completed"),
            UserMessage(at=now_utc(), text="now add tests"),
        ],
    )
    async with FakeModelServer() as fake, restarted(home, fake) as runtime:
        fake.queue(Text("tests added"))
        assert await answered(runtime, "t-steer") == ["first answer", "tests added"]


async def test_input_a_failed_turn_already_read_is_not_retried_at_restart(tmp_path):
    """A turn that read the steer and failed waits for new input: a restart does not send
    the same input again."""
    home = tmp_path / "home"
    home.mkdir()
    write_log(
        home / "condensate.db",
        "t-failed",
        [
            created(tmp_path),
            UserMessage(at=now_utc(), text="brief"),
            TurnStarted(at=now_utc(), cause="human"),
            TurnEnded(at=now_utc(), outcome="failed", reason="authentication-failed"),
        ],
    )
    async with FakeModelServer() as fake, restarted(home, fake) as runtime:
        await anyio.sleep(0.3)
        assert not runtime.get("t-failed").running
    assert fake.requests == []


async def test_a_steer_the_turn_answered_before_it_ended_is_not_answered_again(tmp_path):
    """A steer logged while a turn ran and answered in that turn is not taken up again by
    a restart."""
    home = tmp_path / "home"
    home.mkdir()
    write_log(
        home / "condensate.db",
        "t-done",
        [
            created(tmp_path),
            UserMessage(at=now_utc(), text="brief"),
            TurnStarted(at=now_utc(), cause="human"),
            UserMessage(at=now_utc(), text="also fix the docs"),
            AssistantMessage(at=now_utc(), text="done, docs fixed too"),
            TurnEnded(at=now_utc(), outcome="completed"),
        ],
    )
    async with FakeModelServer() as fake, restarted(home, fake) as runtime:
        await anyio.sleep(0.3)
        assert not runtime.get("t-done").running
    assert fake.requests == []


async def test_a_thread_its_engine_now_refuses_does_not_keep_the_others_down(tmp_path):
    """A stored thread whose engine refuses it today (permissions it no longer accepts) is
    left in the log and skipped; the other threads recover and answer."""
    home = tmp_path / "home"
    home.mkdir()
    refused = ThreadCreated(
        at=now_utc(), engine="api", model=MODEL, cwd=str(tmp_path), permissions="sudo"
    )
    write_log(home / "condensate.db", "t-refused", [refused, UserMessage(at=now_utc(), text="x")])
    write_log(
        home / "condensate.db",
        "t-fine",
        [created(tmp_path), UserMessage(at=now_utc(), text="still here?")],
    )
    async with FakeModelServer() as fake, restarted(home, fake) as runtime:
        fake.queue(Text("yes"))
        assert await answered(runtime, "t-fine") == ["yes"]
        assert "t-refused" not in runtime.threads
    with EventLog.open(home / "condensate.db") as log:
        assert log.tail("t-refused", after=0, history=True).events[-1].seq == 2
