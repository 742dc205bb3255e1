"""A native thread runs a long scripted task on a real daemon against the fake model server,
until windows of every kind were taken, a child was spawned and joined, and compactions were
asked for by the thread's own tool and by an operator; the daemon is SIGKILLed at several
points (one during a window's summary) and restarted each time. Asserted on what the fake
received and on the log."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.core.projector import project
from condensate.eventlog.rebuild import rebuild
from condensate.eventlog.sqlite_sync import EventLog
from condensate.testing.fake_model import (
    Call,
    Fail,
    FakeModelServer,
    Overflow,
    Slow,
    Text,
    ToolCalls,
)
from tests.integration.daemon import DaemonProcess, call, wait_for

MODEL = "anthropic:claude-sonnet-4-5"
WINDOW = 60_000  # ceiling 48,000 (the floor), line 39,808
CURATOR = "claude-haiku-4-5"
FALLBACK = "gpt-5-mini"
CHILD_MODEL = "anthropic:claude-opus-4-5"
BRIEF = "Refactor the report module; keep the CLI flags stable. BRIEF-MARKER-7c1"


def read(path: str) -> ToolCalls:
    return ToolCalls([Call("read", {"path": path})], text=f"Reading {path}.")


def shell(command: str) -> ToolCalls:
    return ToolCalls([Call("shell", {"command": command})], text=f"Running {command}.")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for i in range(40):
        body = "\n".join(
            f"def report_{i}_{j}(rows, width={j}):  # formats block {j} of module {i}"
            for j in range(120)
        )
        (work / f"mod{i}.py").write_text(body)
    return work


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=WINDOW) as server:
        yield server


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Any:
    process = DaemonProcess(
        tmp_path / "home",
        fake.url,
        extra_env={
            "CONDENSATE_MODEL_WINDOWS": json.dumps({MODEL: WINDOW, CHILD_MODEL: WINDOW}),
            "CONDENSATE_CURATOR_MODEL": f"anthropic:{CURATOR}",
            "CONDENSATE_CURATOR_FALLBACK_MODEL": f"openai:{FALLBACK}",
            "CONDENSATE_WINDOW_DEADLINE_MS": "4000",
        },
    )
    process.home.mkdir()
    process.start()
    yield process
    process.kill()


async def turn(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, text: str
) -> list[dict[str, Any]]:
    """Steer and wait for the turn that follows to end."""
    status, sent = await call(
        session, daemon, "POST", f"/threads/{thread}/messages", {"text": text}
    )
    assert status == 202, sent
    return await wait_for(
        session,
        daemon,
        thread,
        lambda e: e["kind"] == "turn.ended" and e["seq"] > sent["seq"],
        seconds=90,
    )


def events_of(daemon: DaemonProcess, thread: str) -> list[Any]:
    with EventLog.open(daemon.home / "condensate.db") as log:
        return list(log.replay(thread))


def check_log(daemon: DaemonProcess, thread: str) -> None:
    """Seqs are contiguous, every call has exactly one result, and the view rebuilt from the
    snapshot equals a full replay of the same events (the daemon may still be appending)."""
    with EventLog.open(daemon.home / "condensate.db") as log:
        rebuilt = rebuild(log, thread)
        stored = [s for s in log.replay(thread) if s.seq <= rebuilt.last_seq]
    assert [s.seq for s in stored] == list(range(1, len(stored) + 1))
    assert rebuilt == project(stored)
    calls = [
        c.id for s in stored if s.event.kind == "message.assistant" for c in s.event.tool_calls
    ]
    results = Counter(s.event.call_id for s in stored if s.event.kind == "tool.result")
    assert all(results[c] <= 1 for c in calls), "a call has two results"
    assert all(results[c] == 1 for c in calls[:-1]), "an earlier call has no result"


async def kill_and_restart(daemon: DaemonProcess) -> None:
    daemon.kill()
    daemon.start()


async def drained(fake: FakeModelServer, model: str, seconds: float = 90) -> None:
    """Wait until every reply queued for ``model`` was taken by a request."""
    for _ in range(int(seconds * 10)):
        if fake.pending().get(model, 0) == 0:
            return
        await anyio.sleep(0.1)
    msg = f"Replies for {model} were never all taken: {fake.pending()}"
    raise AssertionError(msg)


@dataclass
class Run:
    """One long task: the daemon, the fake, the thread and the steers sent so far."""

    session: aiohttp.ClientSession
    daemon: DaemonProcess
    fake: FakeModelServer
    workdir: Path
    thread: str = ""
    steers: list[str] = field(default_factory=list)

    async def turn(self, text: str) -> list[dict[str, Any]]:
        self.steers.append(text)
        return await turn(self.session, self.daemon, self.thread, text)


async def phase_reads_then_kill_mid_call(run: Run) -> None:
    """Many file reads (a microcompact), then a SIGKILL while a model call streams."""
    run.fake.queue(*[read(f"mod{i}.py") for i in range(30)], model="claude-sonnet")
    run.fake.queue(Slow(Text("still reading"), chunk_delay=0.5, chunks=20), model="claude-sonnet")
    status, created = await call(
        run.session,
        run.daemon,
        "POST",
        "/threads",
        {
            "model": MODEL,
            "cwd": str(run.workdir),
            "brief": BRIEF,
            "head": False,
        },
    )
    assert status == 201, created
    run.thread = created["id"]
    await wait_for(
        run.session,
        run.daemon,
        run.thread,
        lambda e: e["kind"] == "window" and e["window_kind"] == "microcompact",
        seconds=90,
    )
    await drained(run.fake, "claude-sonnet")
    await anyio.sleep(0.5)
    await kill_and_restart(run.daemon)
    await wait_for(
        run.session,
        run.daemon,
        run.thread,
        lambda e: e["kind"] == "turn.started" and e["cause"] == "resume",
    )


async def phase_commands(run: Run) -> None:
    """Command output and failing commands: a collapse, then a curator summary."""
    run.fake.queue(*[shell(f"cat mod{i}.py") for i in range(30)], model="claude-sonnet")
    run.fake.queue(*[shell(f"ls missing_{i}") for i in range(5)], model="claude-sonnet")
    run.fake.queue(*[shell(f"cat mod{i}.py") for i in range(10, 40)], model="claude-sonnet")
    run.fake.queue(Text("phase two done"), model="claude-sonnet")
    events = await run.turn("Now look at the command output too. STEER-2")
    kinds = {e["window_kind"] for e in events if e["kind"] == "window"}
    assert {"collapse", "summary"} <= kinds


async def phase_own_tool(run: Run) -> None:
    """The thread compacts itself with its own tool; its summary is used as written."""
    run.fake.queue(
        ToolCalls([Call("compact_context", {"summary": "OWN-SUMMARY: parser done"})]),
        read("mod1.py"),
        Text("compacted"),
        model="claude-sonnet",
    )
    events = await run.turn("Compact your own context now. STEER-3")
    own = [e for e in events if e["kind"] == "window" and e["author"] == "thread"]
    assert own
    assert own[-1]["summary"] == "OWN-SUMMARY: parser done"


async def phase_operator(run: Run) -> None:
    """An operator queues a summary over HTTP; it is taken at the next turn start."""
    status, queued = await call(
        run.session,
        run.daemon,
        "POST",
        f"/threads/{run.thread}/compact",
        {"mode": "summary", "summary": "OPERATOR-SUMMARY"},
    )
    assert (status, queued["queued"]) == (202, True)
    run.fake.queue(Text("noted"), model="claude-sonnet")
    events = await run.turn("Carry on. STEER-4")
    operator = [e for e in events if e["kind"] == "window" and e["author"] == "operator"]
    assert operator
    assert operator[0]["request"] == queued["seq"]


async def phase_child_then_kill_during_summary(run: Run) -> None:
    """A child is spawned and joined; then a SIGKILL lands while a summary is being written,
    before its window is committed."""
    run.fake.queue(
        ToolCalls([Call("spawn", {"brief": "Check the tests.", "model": CHILD_MODEL})]),
        ToolCalls([Call("join", {})]),
        Text("child joined"),
        model="claude-sonnet",
    )
    events = await run.turn("Delegate the test check. STEER-5")
    assert any(e["kind"] == "child.spawned" for e in events)
    assert any(e["kind"] == "child.joined" for e in events)
    run.fake.queue(Slow(Text("slow summary"), chunk_delay=0.5, chunks=20), model=CURATOR)
    # Enough reads that microcompact and collapse run and the third window is a summary.
    run.fake.queue(
        *[read(f"mod{i % 40}.py") for i in range(60)], Text("reads done"), model="claude-sonnet"
    )
    run.steers.append("Read everything again. STEER-6")
    status, sent = await call(
        run.session, run.daemon, "POST", f"/threads/{run.thread}/messages", {"text": run.steers[-1]}
    )
    assert status == 202
    await drained(run.fake, CURATOR)  # the slow summary was taken...
    await anyio.sleep(1.0)  # ...and is streaming now
    await kill_and_restart(run.daemon)
    await wait_for(
        run.session,
        run.daemon,
        run.thread,
        lambda e: (
            e["kind"] == "turn.ended" and e["seq"] > sent["seq"] and e["outcome"] == "completed"
        ),
        seconds=120,
    )


async def phase_forced_drop(run: Run) -> None:
    """A clean slate, then long notes no clearing can free; the provider refuses and every
    curator fails: a forced drop by the system."""
    notes = "note " * 3_000
    run.fake.queue(Fail(500), model=CURATOR)
    run.fake.queue(Fail(500), model=FALLBACK)
    run.fake.queue(
        ToolCalls([Call("compact_context", {"summary": "CLEAN-SLATE"})]),
        *[ToolCalls([Call("shell", {"command": "true"})], text=notes) for _ in range(8)],
        Overflow(tokens=WINDOW + 1),
        Fail(500),  # the thread's own model, last in the curator chain
        Text("after the drop"),
        model="claude-sonnet",
    )
    events = await run.turn("Continue after the refusal. STEER-7")
    assert any(e["kind"] == "model.refused" for e in events)
    drops = [e for e in events if e["kind"] == "window" and e["window_kind"] == "drop"]
    assert drops, [e for e in events if e["kind"] in ("window", "system.line")]
    assert drops[0]["author"] == "system"
    assert drops[0]["forced"]


PHASES = (
    phase_reads_then_kill_mid_call,
    phase_commands,
    phase_own_tool,
    phase_operator,
    phase_child_then_kill_during_summary,
    phase_forced_drop,
)


async def test_long_task_survives_kills_and_takes_every_window(daemon, fake, workdir):
    """Hundreds of tool calls later: every window kind was taken, no request passed the
    ceiling, the brief and every human message reached the model until the forced drop,
    pairs stayed intact, and each SIGKILL was recovered with nothing lost or doubled."""
    async with aiohttp.ClientSession() as session:
        run = Run(session, daemon, fake, workdir)
        for phase in PHASES:
            await phase(run)
            check_log(daemon, run.thread)

    stored = events_of(daemon, run.thread)
    kinds = {s.event.window_kind for s in stored if s.event.kind == "window"}
    assert kinds == {"microcompact", "collapse", "summary", "drop"}
    tool_calls = sum(len(s.event.tool_calls) for s in stored if s.event.kind == "message.assistant")
    assert tool_calls >= 100

    main = [r for r in fake.requests if r.model.startswith("claude-sonnet") and r.status == 200]
    ceiling = 48_000
    assert all(r.input_tokens <= ceiling for r in main), max(r.input_tokens for r in main)
    assert all(BRIEF in json.dumps(r.body["messages"]) for r in main)
    drop_at = next(i for i, r in enumerate(fake.requests) if r.reply == "overflow")
    before_drop = [
        json.dumps(r.body) for r in fake.requests[:drop_at] if r.model.startswith("claude-sonnet")
    ]
    for steer in run.steers[:-1]:
        assert any(steer in body for body in before_drop), f"{steer} never reached the model"
    malformed = [r for r in fake.requests if r.status == 400 and r.reply != "overflow"]
    assert malformed == [], "a request broke tool pairing"
