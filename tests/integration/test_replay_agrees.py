"""``condensate replay`` runs the daemon's own window step: a native thread the runtime ran
against the fake, replayed from its log with the daemon's settings, takes the same windows
before the same model calls."""

from __future__ import annotations

from pathlib import Path

import anyio

from condensate.engine import ThreadSpec
from condensate.replay import ReplayConfig, load, replay
from condensate.replay.report import windows_by_call
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.harness import runtime_on

MODEL = "claude-sonnet-4-5"
CEILING = 24_000
"""Low enough that a dozen large shell outputs cross the line several times."""
SETTINGS: dict[str, object] = {
    "window_ceiling": CEILING,
    "curator_model": "anthropic:claude-haiku-4-5",
}
"""The curator on a model of its own: its calls take nothing from the thread's script."""


async def test_replay_takes_the_windows_the_daemon_took(tmp_path: Path) -> None:
    """The windows in the daemon's log and the replay's, each with the model calls made
    before it, are the same list."""
    work = tmp_path / "work"
    work.mkdir()
    async with FakeModelServer() as fake:
        fake.queue(
            *[
                ToolCalls([Call("shell", {"command": f"seq {i} {i + 900}"})], text=f"Step {i}.")
                for i in range(14)
            ],
            Text("all counted"),
            model=MODEL,
        )
        async with runtime_on(tmp_path / "home", fake, overrides=SETTINGS) as runtime:
            thread = await runtime.create(
                ThreadSpec(
                    engine="api",
                    model=f"anthropic:{MODEL}",
                    cwd=str(work),
                    brief="Count with the shell, one command at a time.",
                )
            )
            with anyio.fail_after(120):
                await thread.turn_done.wait()
            events = await runtime.log.events(thread.thread_id)
            planner = thread.profile.planner
            ceilings = thread.profile.ceilings
            db = runtime.settings.db_path
    daemon = windows_by_call(e.event for e in events)
    assert len(daemon) >= 2, daemon

    config = ReplayConfig(
        window=200_000,
        ceilings=ceilings,
        planner=planner,
        policies=("condensate",),
    )
    report = await replay(load(db), config)
    assert report.results["condensate"].taken == daemon
