"""``permissions: "ask"`` on the real CLIs, driven by a runtime in process against the fake
model server: Claude Code's permission prompts and Codex's approval requests become
approvals the operator answers; an allowed call runs, a denied one does not."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from condensate.runtime import approvals
from condensate.api import Approval
from condensate.engine import ThreadSpec
from condensate.events import Engine
from condensate.runtime import Runtime
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from condensate.runtime.thread import Thread
from tests.integration.test_runtime import running


def write_call(engine: Engine, path: Path, call_id: str) -> ToolCalls:
    if engine == "claude":
        return ToolCalls([Call("Write", {"file_path": str(path), "content": "x"}, id=call_id)])
    return ToolCalls([Call("exec_command", {"cmd": f"touch {path}"}, id=call_id)])


async def next_approval(runtime: Runtime, thread: Thread) -> Approval:
    with anyio.fail_after(60):
        while not approvals.pending(thread):
            await thread.changed.wait()
    return approvals.pending(thread)[0]


@pytest.mark.parametrize(
    ("engine", "model"), [("claude", "anthropic:claude-opus-5-5"), ("codex", "openai:gpt-5.5")]
)
async def test_each_write_waits_for_the_operator_who_allows_one_and_denies_the_other(
    tmp_path: Path, fake: FakeModelServer, workdir: Path, engine: Engine, model: str
) -> None:
    """Two writes under ask: each is pending at GET /threads/:id/approvals (its tool and
    argument named) until answered; the allowed one runs, the denied one leaves no file and
    its call gets an error result; the turn completes."""
    allowed, denied = workdir / "allowed.txt", workdir / "denied.txt"
    fake.queue(
        write_call(engine, allowed, "one"),
        write_call(engine, denied, "two"),
        Text("done"),
        model=model.split(":", 1)[1],
    )
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(
            ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="b", permissions="ask")
        )
        first = await next_approval(runtime, thread)
        exists_before = allowed.exists()
        await approvals.answer(runtime, thread, first.id, "allow", reason="fine")
        second = await next_approval(runtime, thread)
        await approvals.answer(runtime, thread, second.id, "deny", reason="not that one")
        with anyio.fail_after(60):
            await thread.turn_done.wait()
        events = [s.event for s in (await runtime.log.events(thread.thread_id))]
    results = {e.call_id: e for e in events if e.kind == "tool.result"}
    assert exists_before is False
    assert str(allowed.name) in first.argument
    assert str(denied.name) in second.argument
    assert allowed.exists()
    assert not denied.exists()
    assert not results["one"].is_error
    assert results["two"].is_error
    assert [e for e in events if e.kind == "turn.ended"][-1].outcome == "completed"
