"""A key the provider refuses, on the real CLIs: Claude Code (which would retry a 401 ten
times over minutes) and Codex (five reconnects) are driven by a runtime in process against a
fake model server that wants another key. Each retry the CLI makes is logged, and the turn
fails within seconds naming the setting that holds the key."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from condensate.engine import ThreadSpec
from condensate.events import Engine
from condensate.testing.fake_model import Fail, FakeModelServer, Text
from tests.integration.test_runtime import running

CASES = [
    ("claude", "anthropic:claude-opus-5-5", "CONDENSATE_ANTHROPIC_API_KEY"),
    ("codex", "openai:gpt-5.5", "CONDENSATE_OPENAI_API_KEY"),
]


@pytest.mark.parametrize(("engine", "model", "setting"), CASES)
async def test_a_refused_key_fails_the_cli_turn_within_seconds_naming_the_setting(
    tmp_path: Path, workdir: Path, engine: Engine, model: str, setting: str
) -> None:
    """The CLI's first retry of the 401 is logged as an api-retry notice naming the status;
    the turn then fails within 10 s of its start, with an authentication-failed line and a
    reason naming the setting; the provider saw no more than a few requests."""
    async with FakeModelServer(window=200_000, api_key="the-right-key") as fake:
        async with running(tmp_path / "home", fake=fake) as runtime:
            began = time.monotonic()
            thread = await runtime.create(
                ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="hello")
            )
            with anyio.fail_after(60):
                await thread.turn_done.wait()
            took = time.monotonic() - began
            events = [s.event for s in (await runtime.log.events(thread.thread_id))]
        requests = len(fake.requests)
    retries = [e for e in events if e.kind == "engine.notice" and e.notice == "api-retry"]
    lines = [e for e in events if e.kind == "system.line"]
    end = [e for e in events if e.kind == "turn.ended"][-1]
    assert retries, events
    assert "401" in retries[0].detail
    assert [line.code for line in lines] == ["authentication-failed"]
    assert setting in lines[0].text
    assert end.outcome == "failed"
    assert setting in end.reason
    assert took < 10, took
    assert requests <= 4, requests


async def test_claude_code_retrying_an_overloaded_provider_is_told_once_to_the_operator(
    tmp_path: Path, workdir: Path
) -> None:
    """Three retries Claude Code makes on its own in one turn (the provider answering 529)
    put one provider-retrying system line in the log, naming it; the turn then completes.
    (Codex 0.171 retries a 529 without a word to its client: nothing to count there.)"""
    engine, model = "claude", "anthropic:claude-opus-5-5"
    async with FakeModelServer(window=200_000) as fake:
        bare = model.split(":", 1)[1]
        fake.queue(Fail(529), Fail(529), Fail(529), Text("finally"), model=bare)
        async with running(tmp_path / "home", fake=fake) as runtime:
            thread = await runtime.create(
                ThreadSpec(engine=engine, model=model, cwd=str(workdir), brief="hello")
            )
            with anyio.fail_after(90):
                await thread.turn_done.wait()
            events = [s.event for s in (await runtime.log.events(thread.thread_id))]
    retries = [e for e in events if e.kind == "engine.notice" and e.notice == "api-retry"]
    lines = [e for e in events if e.kind == "system.line"]
    end = [e for e in events if e.kind == "turn.ended"][-1]
    assert len(retries) >= 3, events
    assert [line.code for line in lines] == ["provider-retrying"]
    assert "Claude Code" in lines[0].text
    assert end.outcome == "completed"
