"""Approvals (``permissions: "ask"``): a request waits for an operator's allow or deny, no
answer by the deadline denies it, an unknown id is refused, and a restart denies what was
still pending. A real runtime and SQLite log; the engines' own prompts are wired to
``approvals.request`` in their packages."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from condensate.runtime import approvals
from condensate.engine import ThreadSpec, Verdict
from condensate.errors import Refused
from condensate.events import ApprovalAnswered, ApprovalRequested
from condensate.runtime import Runtime
from condensate.testing.fake_model import FakeModelServer, Text
from condensate.runtime.thread import Thread
from tests.integration.harness import runtime_on


async def idle_thread(runtime: Runtime, cwd: Path) -> Thread:
    thread = await runtime.create(
        ThreadSpec(engine="api", model="anthropic:claude-sonnet-4-5", cwd=str(cwd), brief="hi")
    )
    with anyio.fail_after(30):
        await thread.turn_done.wait()
    return thread


async def logged(thread: Thread, runtime: Runtime) -> list[ApprovalRequested | ApprovalAnswered]:
    page = await runtime.log.tail(thread.thread_id, after=0, limit=1000, history=True)
    return [
        s.event for s in page.events if isinstance(s.event, ApprovalRequested | ApprovalAnswered)
    ]


async def ask(runtime: Runtime, thread: Thread, wait: timedelta, verdicts: list[Verdict]) -> None:
    verdicts.append(
        await approvals.request(
            runtime, thread, tool="shell", argument="rm -rf build", call_id="c1", wait=wait
        )
    )


async def test_an_allowed_request_runs_and_both_halves_are_logged(tmp_path):
    """The request shows as pending until an operator allows it; the engine is told to run
    it, and the log holds the request and the answer with its reason."""
    async with FakeModelServer() as fake:
        fake.queue(Text("ready"))
        async with runtime_on(tmp_path, fake) as runtime:
            thread = await idle_thread(runtime, tmp_path)
            verdicts: list[Verdict] = []
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(ask, runtime, thread, timedelta(seconds=30), verdicts)
                with anyio.fail_after(5):
                    while not approvals.pending(thread):
                        await thread.changed.wait()
                (shown,) = approvals.pending(thread)
                assert shown.tool == "shell"
                assert shown.argument == "rm -rf build"
                await approvals.answer(runtime, thread, shown.id, "allow", reason="fine")
            assert approvals.pending(thread) == []
            requested, answered = await logged(thread, runtime)
    assert verdicts == [Verdict(True, "fine", "operator")]
    assert isinstance(requested, ApprovalRequested)
    assert isinstance(answered, ApprovalAnswered)
    assert (answered.decision, answered.by, answered.reason) == ("allow", "operator", "fine")


async def test_a_denied_request_tells_the_engine_why(tmp_path):
    """A deny carries the operator's reason to the engine, which refuses the call with it."""
    async with FakeModelServer() as fake:
        fake.queue(Text("ready"))
        async with runtime_on(tmp_path, fake) as runtime:
            thread = await idle_thread(runtime, tmp_path)
            verdicts: list[Verdict] = []
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(ask, runtime, thread, timedelta(seconds=30), verdicts)
                with anyio.fail_after(5):
                    while not approvals.pending(thread):
                        await thread.changed.wait()
                approval_id = approvals.pending(thread)[0].id
                await approvals.answer(
                    runtime, thread, approval_id, "deny", reason="not the build directory"
                )
    (verdict,) = verdicts
    assert not verdict.allowed
    assert "not the build directory" in verdict.reason


async def test_no_answer_by_the_deadline_denies_the_request(tmp_path):
    """Nobody answering before the deadline denies the call, logged as by the deadline."""
    async with FakeModelServer() as fake:
        fake.queue(Text("ready"))
        async with runtime_on(tmp_path, fake) as runtime:
            thread = await idle_thread(runtime, tmp_path)
            verdicts: list[Verdict] = []
            with anyio.fail_after(5):
                await ask(runtime, thread, timedelta(seconds=0.2), verdicts)
            _, answered = await logged(thread, runtime)
    assert not verdicts[0].allowed
    assert verdicts[0].by == "deadline"
    assert isinstance(answered, ApprovalAnswered)
    assert (answered.decision, answered.by) == ("deny", "deadline")


async def test_answering_an_unknown_approval_is_refused(tmp_path):
    """An id that is not pending (never asked, or answered already) is refused with 404."""
    async with FakeModelServer() as fake:
        fake.queue(Text("ready"))
        async with runtime_on(tmp_path, fake) as runtime:
            thread = await idle_thread(runtime, tmp_path)
            with pytest.raises(Refused) as refused:
                await approvals.answer(runtime, thread, "ap-nope", "allow")
    assert (refused.value.code, refused.value.status) == ("unknown-approval", 404)


async def test_a_restart_denies_what_was_still_pending(tmp_path):
    """After a kill the process that asked is gone: recovery denies its pending requests."""
    async with FakeModelServer() as fake:
        fake.queue(Text("ready"))
        async with runtime_on(tmp_path, fake) as runtime:
            thread = await idle_thread(runtime, tmp_path)
            thread_id = thread.thread_id
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(ask, runtime, thread, timedelta(seconds=30), [])
                with anyio.fail_after(5):
                    while not approvals.pending(thread):
                        await thread.changed.wait()
                tasks.cancel_scope.cancel()  # the daemon dies with the request open
        async with runtime_on(tmp_path, fake, recovered=True) as again:
            recovered = again.get(thread_id)
            assert approvals.pending(recovered) == []
            answers = [e for e in await logged(recovered, again) if isinstance(e, ApprovalAnswered)]
    (denied,) = answers
    assert (denied.decision, denied.by) == ("deny", "runtime")
