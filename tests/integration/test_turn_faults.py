"""Faults inside one thread's turn, in process on a real SQLite log and the fake model server:
an unexpected exception ends that turn only, and an operator's interrupt ends a native turn
(its provider call, or its running shell command) within 2 s; and a thread its engine cannot
enforce is refused before anything is logged."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.native.engine import NativeEngine
from condensate.engine import (
    INTERRUPTED_BY_OPERATOR,
    EngineEnv,
    ThreadSpec,
    TurnContext,
    TurnOutcome,
)
from condensate.engine.registry import installed
from condensate.errors import Refused
from condensate.events import TurnEnded
from condensate.runtime import Runtime
from condensate.runtime.thread import Thread
from condensate.testing.fake_model import Call, FakeModelServer, Overflow, Slow, Text, ToolCalls
from tests.integration.test_runtime import running

MODEL = "anthropic:claude-sonnet-4-5"


class Crashing(NativeEngine):
    """The native loop, except that a thread whose brief is "crash" raises a KeyError, as a
    bug in an engine or an unforeseen provider reply would."""

    def __init__(self, spec: ThreadSpec, env: EngineEnv | None = None) -> None:
        super().__init__(spec, env)

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        if ctx.spec.brief == "crash":
            missing = "no-such-key"
            raise KeyError(missing)
        return await super().run_turn(ctx)


async def events(runtime: Runtime, thread: Thread) -> list[Any]:
    return [s.event for s in (await runtime.log.events(thread.thread_id))]


async def ended(runtime: Runtime, thread: Thread) -> list[Any]:
    return [e for e in await events(runtime, thread) if e.kind == "turn.ended"]


async def start(runtime: Runtime, tmp_path: Path, brief: str) -> Thread:
    return await runtime.create(
        ThreadSpec(engine="api", model=MODEL, cwd=str(tmp_path), brief=brief)
    )


async def done(thread: Thread, seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        await thread.turn_done.wait()


async def until_logged(runtime: Runtime, thread: Thread, kind: str) -> None:
    with anyio.fail_after(30):
        while not any(e.kind == kind for e in await events(runtime, thread)):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def test_an_exception_in_one_turn_ends_that_turn_and_no_other(tmp_path):
    """A KeyError in one thread's turn ends that turn failed with a turn-crashed line naming
    it; a thread whose turn was running meanwhile completes, and a thread started after it
    is answered: the runtime is still up."""
    async with FakeModelServer() as fake:
        fake.queue(Slow(Text("slow one done"), chunk_delay=0.05, chunks=10), Text("later done"))
        crashing = {"api": replace(installed()["api"], make=Crashing)}
        async with running(tmp_path, crashing, fake) as runtime:
            slow = await start(runtime, tmp_path, "take your time")
            crashed = await start(runtime, tmp_path, "crash")
            await done(crashed)
            await done(slow)
            later = await start(runtime, tmp_path, "and now")
            await done(later)
            lines = [e for e in await events(runtime, crashed) if e.kind == "system.line"]
            crash_end = await ended(runtime, crashed)
            slow_end, later_end = await ended(runtime, slow), await ended(runtime, later)
    assert [line.code for line in lines] == ["turn-crashed"]
    assert "KeyError" in lines[0].text
    assert "no-such-key" in lines[0].text
    assert crash_end[-1].outcome == "failed"
    assert "KeyError" in crash_end[-1].reason
    assert slow_end[-1].outcome == "completed"
    assert later_end[-1].outcome == "completed"


async def test_interrupting_an_idle_thread_says_so(tmp_path):
    """interrupt on a thread with no running turn returns False and logs nothing."""
    async with running(tmp_path) as runtime:
        thread = await start(runtime, tmp_path, "hello")
        await done(thread)
        before = len(await events(runtime, thread))
        answer = await runtime.interrupt(thread)
        after = len(await events(runtime, thread))
    assert answer is False
    assert after == before


async def test_an_interrupt_ends_a_streaming_native_turn_and_the_next_message_is_answered(
    tmp_path,
):
    """A native turn in a slow provider stream is interrupted within 2 s, logged as
    interrupted by the operator; a message sent after it starts a new turn that completes."""
    async with FakeModelServer() as fake:
        fake.queue(Slow(Text("never finished"), chunk_delay=1.0, chunks=30), Text("answered"))
        async with running(tmp_path, fake=fake) as runtime:
            thread = await start(runtime, tmp_path, "write slowly")
            with anyio.fail_after(10):
                while not fake.requests:  # noqa: ASYNC110 - the fake has no event for it
                    await anyio.sleep(0.05)
            began = time.monotonic()
            answer = await runtime.interrupt(thread)
            took = time.monotonic() - began
            interrupted = await ended(runtime, thread)
            running_after = thread.running
            await runtime.steer(thread, "are you there?")
            await done(thread)
            final = await ended(runtime, thread)
            replies = [
                e.text for e in await events(runtime, thread) if e.kind == "message.assistant"
            ]
    assert answer is True
    assert took < 2.0
    assert running_after is False
    assert (interrupted[-1].outcome, interrupted[-1].reason) == (
        "interrupted",
        INTERRUPTED_BY_OPERATOR,
    )
    assert final[-1].outcome == "completed"
    assert replies == ["answered"]


def running_sleeps(marker: str) -> list[int]:
    """Pids of processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline and entry.name != str(os.getpid()):
            found.append(int(entry.name))
    return found


async def test_an_interrupt_kills_a_running_shell_command_and_closes_its_call(tmp_path):
    """A native turn running ``sleep`` is interrupted within 2 s: the command's process is
    gone, its call has an error result, and the turn ends interrupted by the operator."""
    marker = "37.125"
    async with FakeModelServer() as fake:
        fake.queue(ToolCalls([Call("shell", {"command": f"sleep {marker}"})]))
        async with running(tmp_path, fake=fake) as runtime:
            thread = await start(runtime, tmp_path, "sleep a while")
            await until_logged(runtime, thread, "message.assistant")
            with anyio.fail_after(10):
                while not running_sleeps(f"sleep {marker}"):  # noqa: ASYNC110 - procfs
                    await anyio.sleep(0.05)
            began = time.monotonic()
            await runtime.interrupt(thread)
            took = time.monotonic() - began
            logged = await events(runtime, thread)
    results = [e for e in logged if e.kind == "tool.result"]
    assert took < 2.0
    assert running_sleeps(f"sleep {marker}") == []
    assert len(results) == 1
    assert results[0].is_error
    assert logged[-1].kind == "turn.ended"
    assert (logged[-1].outcome, logged[-1].reason) == ("interrupted", INTERRUPTED_BY_OPERATOR)


async def test_a_thread_its_engine_cannot_enforce_is_refused_before_anything_is_logged(tmp_path):
    """A Codex thread with a tools list and a Claude Code thread with permissions it has no
    mapping for are refused (422) at creation: no thread is kept and the log holds none."""
    async with running(tmp_path) as runtime:
        refusals = []
        for spec in (
            ThreadSpec(
                engine="codex", model="openai:gpt-5.5", cwd=str(tmp_path), brief="b", tools=("x",)
            ),
            ThreadSpec(
                engine="claude", model=MODEL, cwd=str(tmp_path), brief="b", permissions="ask-me"
            ),
        ):
            with pytest.raises(Refused) as refused:
                await runtime.create(spec)
            refusals.append(refused.value.code)
        threads = dict(runtime.threads)
        logged = await runtime.log.thread_ids()
    assert refusals == ["unsupported-tools", "unsupported-permissions"]
    assert threads == {}
    assert list(logged) == []


async def test_a_first_call_refused_with_a_false_claim_does_not_stop_the_next_turn(
    tmp_path: Path, fake: FakeModelServer
) -> None:
    """The provider refuses a thread's first call claiming 200,001 tokens (the prompt holds a
    few hundred): that turn ends, and the next message's turn calls the provider again and
    completes, instead of stopping on the old claim."""
    fake.queue(Overflow(tokens=200_001), Text("answered now"), model="claude-sonnet-4-5")
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(
            ThreadSpec(
                engine="api", model="anthropic:claude-sonnet-4-5", cwd=str(tmp_path), brief="hi"
            )
        )
        with anyio.fail_after(30):
            await thread.turn_done.wait()
        await runtime.steer(thread, "try again")
        with anyio.fail_after(30):
            while thread.projection.turn < 2 or thread.running:
                await thread.turn_done.wait()
        events = [s.event for s in (await runtime.log.events(thread.thread_id))]
    ends = [e for e in events if isinstance(e, TurnEnded)]
    assert len(ends) == 2
    assert ends[-1].outcome == "completed"
    assert [r.reply for r in fake.requests][-1] == "text"
