"""The runtime in process, on a real SQLite log and the fake model server: appends that keep
the loop running, windows that close an overtaken ask, and checkpoints that wait for counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import anyio

from condensate.runtime import asks
from condensate.core.planner import Ask, Cut
from condensate.engine import Engines, ThreadSpec
from condensate.events import ModelUsage, UserMessage, Window, now_utc
from condensate.runtime import Runtime
from condensate.eventlog.sqlite import SqliteStore
from condensate.testing.fake_model import FakeModelServer, Text
from condensate.runtime.thread import Thread
from tests.integration.harness import runtime_on


@asynccontextmanager
async def running(
    tmp_path: Path,
    engines: Engines | None = None,
    fake: FakeModelServer | None = None,
) -> AsyncIterator[Runtime]:
    """A runtime with its task group (``harness.runtime_on``). ``fake`` is a server the caller
    runs and scripts; by default one of its own answers "done"."""
    async with FakeModelServer() as own:
        if fake is None:
            fake = own
            fake.queue(Text("done"))
        async with runtime_on(tmp_path, fake, engines=engines) as runtime:
            yield runtime


async def idle_thread(runtime: Runtime, tmp_path: Path) -> Thread:
    thread = await runtime.create(
        ThreadSpec(
            engine="api", model="anthropic:claude-sonnet-4-5", cwd=str(tmp_path), brief="hello"
        )
    )
    with anyio.fail_after(30):
        await thread.turn_done.wait()
    return thread


async def test_an_append_while_another_os_thread_holds_the_log_keeps_the_loop_running(tmp_path):
    """A small append that finds the log busy waits on a worker thread, not on the event loop:
    other tasks run meanwhile, and the event is logged and folded once the log is free."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await anyio.sleep(0.01)

        store = runtime.log
        assert isinstance(store, SqliteStore)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(tick)
            store.log._lock.acquire()  # what a worker thread's long read would hold
            try:
                appending = await runtime_append_soon(tasks, runtime, thread)
                await anyio.sleep(0.2)
                assert not appending.is_set()
                assert ticks >= 5
            finally:
                store.log._lock.release()
            with anyio.fail_after(10):
                await appending.wait()
            tasks.cancel_scope.cancel()
        last = (await runtime.log.read(thread.thread_id, thread.projection.last_seq)).event
        assert isinstance(last, UserMessage)
        assert last.text == "steered"
        assert thread.projection.entries[-1].event == last


async def runtime_append_soon(
    tasks: anyio.abc.TaskGroup, runtime: Runtime, thread: Thread
) -> anyio.Event:
    done = anyio.Event()

    async def go() -> None:
        await runtime.append(thread, UserMessage(at=now_utc(), text="steered"))
        done.set()

    tasks.start_soon(go)
    return done


async def test_a_window_that_overtakes_an_open_ask_closes_it(tmp_path):
    """A window the runtime takes while an ask is open (a forced one, or one on the request
    the gateway held) closes that ask: the window names it and the view has no ask left, so
    the next crossing asks anew instead of cutting on the old ask's deadline."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        usage = runtime.usage(thread)
        deadline = now_utc() + timedelta(minutes=5)
        await asks.open_ask(runtime, thread, Ask(usage, deadline))
        opened = thread.projection.ask
        assert opened is not None
        window = await runtime.carry_out(thread, Cut(usage, "microcompact", "test", 0, ()))
    assert isinstance(window, Window)
    assert window.ask == opened.ask_id
    assert thread.projection.ask is None


async def test_a_checkpoint_waits_for_a_count_the_gateway_announced(tmp_path):
    """The gateway logs a call's count just after the reply has gone out; a checkpoint that
    runs in between waits for it, and then measures with it in the view."""
    async with running(tmp_path) as runtime:
        thread = await idle_thread(runtime, tmp_path)
        runtime.usage_coming(thread.thread_id)
        checked = anyio.Event()

        measured: list[int] = []

        async def check() -> None:
            measured.append((await runtime.checkpoint(thread)).usage.used)
            checked.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(check)
            await anyio.sleep(0.3)
            assert not checked.is_set()
            usage = ModelUsage(at=now_utc(), input=1234, output=5, model="claude-sonnet-4-5")
            await runtime.record_usage(thread.thread_id, usage)
            with anyio.fail_after(2):
                await checked.wait()
    assert thread.counting == 0
    assert measured == [runtime.usage(thread).used]
    assert thread.projection.anchor is not None
    assert thread.projection.anchor.count == 1234
