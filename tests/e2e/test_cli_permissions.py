"""A thread's tools and permissions hold on the real CLIs, driven by a runtime in process
against the fake model server: Claude Code is offered only the thread's tools, and under
``workspace`` or ``read-only`` it writes nothing outside cwd (nothing at all when read-only)
and has no shell; Codex runs ``read-only``, ``workspace`` and ``ask`` threads in a sandbox
that writes as the value says and reads only cwd, never the daemon's files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from condensate.engine import ThreadSpec
from condensate.runtime import approvals
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.test_runtime import running

CLAUDE = "claude-opus-5-5"
CODEX = "gpt-5.5"


async def run_thread(tmp_path: Path, fake: FakeModelServer, spec: ThreadSpec) -> list[Any]:
    """The events of the thread's first turn, run to its end."""
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(spec)
        with anyio.fail_after(90):
            await thread.turn_done.wait()
        return [s.event for s in (await runtime.log.events(thread.thread_id))]


def offered_tools(fake: FakeModelServer, model: str) -> list[str]:
    """The tools the first request offers the model, less what is never called: Claude Code
    sends ``DeferredToolPlaceholder`` (``defer_loading``: "Reserved placeholder that keeps
    deferred tool loading active; never call this tool") on its default model."""
    first = next(r for r in fake.requests if r.model == model)
    return [str(t.get("name")) for t in first.body.get("tools", []) if not t.get("defer_loading")]


def results(events: list[Any]) -> dict[str, Any]:
    return {e.call_id: e for e in events if e.kind == "tool.result"}


async def test_claude_code_is_offered_only_the_threads_tools(tmp_path, fake, workdir):
    """A thread with tools ["Read"] gets a request whose only tool is Read."""
    fake.queue(Text("done"), model=CLAUDE)
    spec = ThreadSpec(
        engine="claude", model=f"anthropic:{CLAUDE}", cwd=str(workdir), brief="b", tools=("Read",)
    )
    events = await run_thread(tmp_path, fake, spec)
    assert [e for e in events if e.kind == "turn.ended"][-1].outcome == "completed"
    assert offered_tools(fake, CLAUDE) == ["Read"]


async def test_a_workspace_claude_thread_writes_inside_cwd_only_and_has_no_shell(
    tmp_path, fake, workdir
):
    """Under workspace, a Write inside cwd lands, a Write outside cwd (directly or through a
    symlink) is refused with an error result and nothing is written, and Bash is not
    offered."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (workdir / "link").symlink_to(outside)
    fake.queue(
        ToolCalls([Call("Write", {"file_path": str(workdir / "in.txt"), "content": "ok"}, id="a")]),
        ToolCalls([Call("Write", {"file_path": str(outside / "x.txt"), "content": "no"}, id="b")]),
        ToolCalls(
            [Call("Write", {"file_path": str(workdir / "link/y.txt"), "content": "no"}, id="c")]
        ),
        Text("done"),
        model=CLAUDE,
    )
    spec = ThreadSpec(
        engine="claude",
        model=f"anthropic:{CLAUDE}",
        cwd=str(workdir),
        brief="b",
        permissions="workspace",
    )
    events = await run_thread(tmp_path, fake, spec)
    got = results(events)
    assert (workdir / "in.txt").read_text() == "ok"
    assert list(outside.iterdir()) == []
    assert not got["a"].is_error
    assert got["b"].is_error
    assert got["c"].is_error
    assert "Bash" not in offered_tools(fake, CLAUDE)


async def test_a_read_only_claude_thread_reads_but_cannot_write(tmp_path, fake, workdir):
    """Under read-only, only Read, Grep and Glob are offered; a Read inside cwd works and a
    Write the model asks for anyway is refused, writing nothing."""
    (workdir / "notes.txt").write_text("hello notes\n")
    fake.queue(
        ToolCalls([Call("Read", {"file_path": str(workdir / "notes.txt")}, id="r")]),
        ToolCalls([Call("Write", {"file_path": str(workdir / "new.txt"), "content": "x"}, id="w")]),
        Text("done"),
        model=CLAUDE,
    )
    spec = ThreadSpec(
        engine="claude",
        model=f"anthropic:{CLAUDE}",
        cwd=str(workdir),
        brief="b",
        permissions="read-only",
    )
    events = await run_thread(tmp_path, fake, spec)
    got = results(events)
    assert sorted(offered_tools(fake, CLAUDE)) == ["Glob", "Grep", "Read"]
    assert "hello notes" in got["r"].output
    assert got["w"].is_error
    assert not (workdir / "new.txt").exists()


def told(fake: FakeModelServer, call_id: str) -> str:
    """What Codex sent the model as the output of ``call_id``. Read from the request, not the
    log: Codex 0.171.0 sometimes reports a command its sandbox failed with no item at all (a
    gap in the log, known; the model is told either way)."""
    for request in fake.requests:
        for item in request.body.get("input", []):
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                return str(item.get("output"))
    msg = f"No output of {call_id} reached the model."
    raise AssertionError(msg)


def shell(command: str, call_id: str) -> ToolCalls:
    return ToolCalls([Call("exec_command", {"cmd": command}, id=call_id)])


async def test_a_read_only_codex_thread_runs_in_codexs_read_only_sandbox(tmp_path, fake, workdir):
    """Under read-only, a command that writes inside cwd fails in Codex's sandbox and the
    file does not appear; the sandbox Codex reports is read-only."""
    fake.queue(shell(f"touch {workdir / 'made.txt'}", "t"), Text("done"), model=CODEX)
    spec = ThreadSpec(
        engine="codex",
        model=f"openai:{CODEX}",
        cwd=str(workdir),
        brief="b",
        permissions="read-only",
    )
    await run_thread(tmp_path, fake, spec)
    assert "Read-only file system" in told(fake, "t")
    assert not (workdir / "made.txt").exists()
    first = next(r for r in fake.requests if r.model == CODEX)
    metadata = json.loads(first.headers["x-codex-turn-metadata"])
    assert metadata["sandbox_mode"] == "read-only"


async def test_a_workspace_codex_thread_writes_inside_cwd_only(tmp_path, fake, workdir):
    """Under workspace (Codex's workspace-write sandbox) a command may write inside cwd, and
    one writing outside it fails, leaving nothing there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    fake.queue(
        shell(f"touch {workdir / 'in.txt'}", "in"),
        shell(f"touch {outside / 'out.txt'}", "out"),
        Text("done"),
        model=CODEX,
    )
    spec = ThreadSpec(
        engine="codex",
        model=f"openai:{CODEX}",
        cwd=str(workdir),
        brief="b",
        permissions="workspace",
    )
    events = await run_thread(tmp_path, fake, spec)
    got = results(events)
    first = next(r for r in fake.requests if r.model == CODEX)
    assert json.loads(first.headers["x-codex-turn-metadata"])["sandbox_mode"] == "workspace-write"
    assert (workdir / "in.txt").exists()
    assert not got["in"].is_error
    assert "exited with code 1" in told(fake, "out")
    assert list(outside.iterdir()) == []


def codex_spec(cwd: Path, permissions: str) -> ThreadSpec:
    return ThreadSpec(
        engine="codex", model=f"openai:{CODEX}", cwd=str(cwd), brief="b", permissions=permissions
    )


def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A key file outside cwd, the daemon's token file in its state directory and the
    configuration file, each holding a line no command may show the model."""
    home = tmp_path / "home"
    home.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    config = tmp_path / "condensate.env"
    monkeypatch.setenv("CONDENSATE_CONFIG", str(config))
    paths = {"key": outside / "id_key", "token": home / "token", "config": config}
    for name, path in paths.items():
        path.write_text(f"# {name.upper()}-SECRET\n")
    return paths


@pytest.mark.parametrize("permissions", ["read-only", "workspace"])
async def test_a_confined_codex_thread_reads_nothing_outside_cwd(
    tmp_path, fake, workdir, monkeypatch, permissions
):
    """Under read-only and workspace, a command reads a file inside cwd, but reading a key
    file outside cwd, the daemon's token file or the configuration file fails, and the
    model never sees their contents."""
    (workdir / "notes.txt").write_text("hello notes\n")
    paths = secrets(tmp_path, monkeypatch)
    fake.queue(
        shell(f"cat {workdir / 'notes.txt'}", "in"),
        *(shell(f"cat {path}", name) for name, path in paths.items()),
        Text("done"),
        model=CODEX,
    )
    await run_thread(tmp_path, fake, codex_spec(workdir, permissions))
    assert "hello notes" in told(fake, "in")
    for name in paths:
        assert "SECRET" not in told(fake, name)
        assert "exited with code 1" in told(fake, name)


@pytest.mark.parametrize("permissions", ["read-only", "workspace"])
async def test_a_confined_codex_thread_cannot_read_condensates_files_inside_its_cwd(
    tmp_path, fake, monkeypatch, permissions
):
    """With the state directory and the configuration file inside cwd, a command still
    cannot read the daemon's token or the configuration file, though it reads cwd's other
    files."""
    (tmp_path / "notes.txt").write_text("hello notes\n")
    paths = secrets(tmp_path, monkeypatch)
    fake.queue(
        shell("cat notes.txt", "in"),
        shell("cat home/token", "token"),
        shell("cat condensate.env", "config"),
        Text("done"),
        model=CODEX,
    )
    await run_thread(tmp_path, fake, codex_spec(tmp_path, permissions))
    assert "hello notes" in told(fake, "in")
    assert paths["token"].exists()
    for name in ("token", "config"):
        assert "SECRET" not in told(fake, name)


async def test_an_ask_codex_thread_allowed_a_command_still_cannot_read_the_token(
    tmp_path, fake, workdir, monkeypatch
):
    """Under ask, a command the operator allows runs in Codex's sandbox, even one the model
    asked to run outside it: reading the daemon's token fails there, and the model never
    sees it."""
    paths = secrets(tmp_path, monkeypatch)
    escalated = {
        "cmd": f"cat {paths['token']}",
        "sandbox_permissions": "require_escalated",
        "justification": "the token is needed",
    }
    fake.queue(ToolCalls([Call("exec_command", escalated, id="token")]), Text("done"), model=CODEX)
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(codex_spec(workdir, "ask"))
        with anyio.fail_after(60):
            while not approvals.pending(thread):
                await thread.changed.wait()
        (asked,) = approvals.pending(thread)
        await approvals.answer(runtime, thread, asked.id, "allow", reason="a read is fine")
        with anyio.fail_after(60):
            await thread.turn_done.wait()
    assert str(paths["token"]) in asked.argument
    assert "SECRET" not in told(fake, "token")
    assert "exited with code 1" in told(fake, "token")
