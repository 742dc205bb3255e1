"""What the real CLI children run with: started by a runtime in process whose own environment
holds every provider's key and Condensate settings, each child's /proc/<pid>/environ has its
session's gateway pass and nothing else of the kind."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from condensate.engine import ThreadSpec
from condensate.events import Engine
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.procs import environ_of
from tests.integration.test_runtime import running

FOREIGN = {
    "ANTHROPIC_API_KEY": "leaked-anthropic",
    "OPENAI_API_KEY": "leaked-openai",
    "GEMINI_API_KEY": "leaked-gemini",
    "CONDENSATE_EXTRA_SECRET": "leaked-setting",
    "GITHUB_TOKEN": "leaked-github",
    "AWS_SECRET_ACCESS_KEY": "leaked-aws",
    "PGPASSWORD": "leaked-pg",
    "DATABASE_URL": "postgresql://me:leaked-pw@db/app",
    "SENTRY_DSN": "https://leaked-dsn@sentry.example/1",
}
CASES = [
    ("claude", "anthropic:claude-opus-5-5", "ANTHROPIC_API_KEY"),
    ("codex", "openai:gpt-5.5", "CODEX_PROVIDER_API_KEY"),
]


@pytest.mark.parametrize(("engine", "model", "own"), CASES)
async def test_a_cli_child_holds_only_its_own_providers_credential(
    tmp_path: Path,
    fake: FakeModelServer,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    engine: Engine,
    model: str,
    own: str,
) -> None:
    """The child's environment has a gateway pass (never the runtime's key, "k") under the
    name the CLI reads, no other provider's key, none of the daemon's inherited keys or
    secrets (the native shell's rule: tokens, passwords, a URL with a password) and no
    CONDENSATE_ variable."""
    for name, value in FOREIGN.items():
        monkeypatch.setenv(name, value)
    fake.queue(Text("hello"), model=model.split(":", 1)[1])
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(
            ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="say hello")
        )
        with anyio.fail_after(60):
            await thread.turn_done.wait()
        started = [
            s.event
            for s in (await runtime.log.events(thread.thread_id))
            if s.event.kind == "engine.notice" and s.event.notice == "session-started"
        ]
        pid = int(next(w for w in started[0].detail.split() if w.startswith("pid="))[4:])
        child = environ_of(pid)
    assert child[own].startswith(f"cgw1.{thread.thread_id}.")
    assert "k" not in child.values()
    assert not [k for k in child if k.startswith("CONDENSATE_")]
    assert not [v for v in child.values() if "leaked-" in v]
    keys = {k for k in child if k.endswith("_API_KEY")}
    assert keys == {own}


async def test_the_commands_codex_runs_do_not_see_its_providers_key(
    tmp_path: Path, fake: FakeModelServer, workdir: Path
) -> None:
    """A command Codex runs (``env``) sees no CODEX_PROVIDER_API_KEY: the config excludes it
    from the commands' environment."""
    fake.queue(
        ToolCalls([Call("exec_command", {"cmd": "env"}, id="env")]), Text("done"), model="gpt-5.5"
    )
    async with running(tmp_path / "home", fake=fake) as runtime:
        thread = await runtime.create(
            ThreadSpec(engine="codex", model="openai:gpt-5.5", cwd=str(workdir), brief="b")
        )
        with anyio.fail_after(60):
            await thread.turn_done.wait()
        results = [
            s.event
            for s in (await runtime.log.events(thread.thread_id))
            if s.event.kind == "tool.result"
        ]
    assert "CODEX_HOME=" in results[0].output  # the command's environment was printed
    assert "CODEX_PROVIDER_API_KEY" not in results[0].output
