"""The native loop under ``permissions: "ask"``: an edit, write or shell call waits for an
operator's allow before it runs, a deny comes back to the model as an error with the
reason, and reads never wait. A real runtime, SQLite log and fake model server."""

from __future__ import annotations

from pathlib import Path

import anyio

from condensate.runtime import approvals
from condensate.api import Approval
from condensate.engine import ThreadSpec
from condensate.events import ToolResult
from condensate.runtime import Runtime
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from condensate.runtime.thread import Thread
from tests.integration.harness import runtime_on


async def asking_thread(runtime: Runtime, cwd: Path) -> Thread:
    return await runtime.create(
        ThreadSpec(
            engine="api",
            model="anthropic:claude-sonnet-4-5",
            cwd=str(cwd),
            brief="make the file",
            permissions="ask",
        )
    )


async def first_pending(thread: Thread) -> Approval:
    with anyio.fail_after(10):
        while not approvals.pending(thread):
            await thread.changed.wait()
    return approvals.pending(thread)[0]


def results(thread: Thread) -> list[tuple[str, bool, str]]:
    return [
        (e.event.tool, e.event.is_error, e.event.output)
        for e in thread.projection.entries
        if isinstance(e.event, ToolResult)
    ]


async def test_a_shell_call_runs_only_once_an_operator_allows_it(tmp_path):
    """The call waits, shown with its command; nothing has run until the allow; then it runs."""
    async with FakeModelServer() as fake:
        fake.queue(ToolCalls([Call("shell", {"command": "touch made.txt"})]), Text("made"))
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread = await asking_thread(runtime, tmp_path)
            shown = await first_pending(thread)
            assert shown.tool == "shell"
            assert shown.argument == "touch made.txt"
            assert not (tmp_path / "made.txt").exists()
            await approvals.answer(runtime, thread, shown.id, "allow")
            with anyio.fail_after(30):
                await thread.turn_done.wait()
            assert (tmp_path / "made.txt").exists()
            assert results(thread)[0][:2] == ("shell", False)


async def test_a_denied_write_is_not_run_and_the_model_reads_why(tmp_path):
    """A deny leaves the file untouched and the call's result names the operator's reason."""
    async with FakeModelServer() as fake:
        fake.queue(
            ToolCalls([Call("write", {"path": "notes.txt", "content": "x"})]), Text("understood")
        )
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread = await asking_thread(runtime, tmp_path)
            shown = await first_pending(thread)
            await approvals.answer(runtime, thread, shown.id, "deny", reason="write it under docs/")
            with anyio.fail_after(30):
                await thread.turn_done.wait()
            (tool, is_error, output) = results(thread)[0]
    assert not (tmp_path / "notes.txt").exists()
    assert (tool, is_error) == ("write", True)
    assert "write it under docs/" in output


async def test_reads_never_wait_for_an_operator(tmp_path):
    """Reading changes nothing: under ask a read runs at once and no approval is logged."""
    (tmp_path / "a.txt").write_text("alpha\n")
    async with FakeModelServer() as fake:
        fake.queue(ToolCalls([Call("read", {"path": "a.txt"})]), Text("read"))
        async with runtime_on(tmp_path / "home", fake) as runtime:
            thread = await asking_thread(runtime, tmp_path)
            with anyio.fail_after(30):
                await thread.turn_done.wait()
            kinds = [
                s.event.kind
                for s in (await runtime.log.tail(thread.thread_id, after=0, history=True)).events
            ]
    assert "approval.requested" not in kinds
    assert results(thread)[0][:2] == ("read", False)
