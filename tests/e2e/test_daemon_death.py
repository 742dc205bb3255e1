"""The CLI children die with the daemon: a real daemon with a Claude Code thread and a Codex
thread mid-turn (their replies streaming slowly from the fake model server), and a Claude Code
thread running a long Bash command (which Claude Code starts in a session of its own), is
SIGKILLed; within a few seconds no process it started is left, and the fake gets no further
request."""

from __future__ import annotations

import json
import os
import signal
import time

import aiohttp
import anyio

from condensate.testing.fake_model import Call, FakeModelServer, Slow, Text, ToolCalls
from tests.e2e.conftest import CLAUDE, CODEX
from tests.e2e.log import started_pid, turn_ended
from tests.integration.daemon import DaemonProcess, call
from tests.integration.procs import alive, descendants, environ_of

CLAUDE_MODEL = "claude-opus-5-5"
CODEX_MODEL = "gpt-5.5"
MARKER = "time.sleep(91.25)"


def generations(fake: FakeModelServer) -> int:
    return sum(1 for r in fake.requests if r.model in (CLAUDE_MODEL, CODEX_MODEL))


async def test_a_sigkilled_daemon_leaves_no_cli_running(tmp_path, fake, workdir):
    """With both CLIs mid-stream, a SIGKILL of the daemon ends every process it started
    (checked by parent chain in /proc) within 5 s, and the fake model server receives no
    request afterwards (a surviving CLI would retry its broken stream)."""
    slow = Slow(Text("never finished"), chunk_delay=0.5, chunks=120)
    long_command = ToolCalls([Call("Bash", {"command": f'python3 -c "import time; {MARKER}"'})])
    fake.queue(long_command, slow, slow, model=CLAUDE_MODEL)
    fake.queue(slow, slow, model=CODEX_MODEL)
    daemon = DaemonProcess(
        tmp_path / "home",
        fake.url,
        extra_env={
            "CONDENSATE_CLAUDE_BINARY": str(CLAUDE),
            "CONDENSATE_CODEX_BINARY": str(CODEX),
            "CONDENSATE_MODEL_WINDOWS": json.dumps(
                {f"anthropic:{CLAUDE_MODEL}": 200_000, f"openai:{CODEX_MODEL}": 200_000}
            ),
        },
    )
    daemon.home.mkdir()
    daemon.start()
    try:
        async with aiohttp.ClientSession() as session:
            for engine, model in (
                ("claude", f"anthropic:{CLAUDE_MODEL}"),
                ("claude", f"anthropic:{CLAUDE_MODEL}"),
                ("codex", f"openai:{CODEX_MODEL}"),
            ):
                status, created = await call(
                    session,
                    daemon,
                    "POST",
                    "/threads",
                    {"engine": engine, "model": model, "cwd": str(workdir), "brief": "go slowly"},
                )
                assert status == 201, created
        assert daemon.process is not None
        with anyio.fail_after(60):
            while not (  # noqa: ASYNC110 - procfs and the fake's log have no event
                generations(fake) >= 3
                and any(MARKER in cmd for cmd in descendants(daemon.process.pid).values())
            ):
                await anyio.sleep(0.1)
        started = descendants(daemon.process.pid)
        assert any("claude" in cmd for cmd in started.values()), started
        assert any("codex" in cmd for cmd in started.values()), started
        assert any(MARKER in cmd for cmd in started.values()), started
        os.kill(daemon.process.pid, signal.SIGKILL)
        daemon.process.wait(timeout=10)
        deadline = time.monotonic() + 5
        while alive(started) and time.monotonic() < deadline:  # noqa: ASYNC110 - procfs
            await anyio.sleep(0.05)
        left = alive(started)
        seen = generations(fake)
        await anyio.sleep(3)  # a surviving CLI would retry its stream meanwhile
        later = generations(fake)
    finally:
        daemon.kill()
    assert left == {}, left
    assert later == seen


async def test_a_cli_pass_is_worth_nothing_after_the_daemon_restarts(tmp_path, fake, workdir):
    """A headless CLI's gateway pass is good only while its session is its thread's current
    one, which the daemon knows in memory only: after a SIGKILL and a restart, a request with
    the old pass is refused (401 stale-session, Anthropic's shape) and never reaches the
    provider. (A person's own CLI session is taken up again: its pass is derived from the
    daemon's token, see test_wrapped_clis.)"""
    fake.queue(Text("hello"), model=CLAUDE_MODEL)
    daemon = DaemonProcess(
        tmp_path / "home", fake.url, extra_env={"CONDENSATE_CLAUDE_BINARY": str(CLAUDE)}
    )
    daemon.home.mkdir()
    daemon.start()
    try:
        async with aiohttp.ClientSession() as session:
            status, created = await call(
                session,
                daemon,
                "POST",
                "/threads",
                {
                    "engine": "claude",
                    "model": f"anthropic:{CLAUDE_MODEL}",
                    "cwd": str(workdir),
                    "brief": "say hello",
                },
            )
            assert status == 201, created
            events = await turn_ended(session, daemon, str(created["id"]))
            old = environ_of(started_pid(events))["ANTHROPIC_API_KEY"]
            assert daemon.process is not None
            os.kill(daemon.process.pid, signal.SIGKILL)
            daemon.process.wait(timeout=10)
            daemon.start()
            before = generations(fake)
            body = {
                "model": CLAUDE_MODEL,
                "max_tokens": 16,
                "messages": [{"role": "user", "content": "hi"}],
            }
            async with session.post(
                f"{daemon.url}/gateway/anthropic/v1/messages",
                json=body,
                headers={"x-api-key": old, "anthropic-version": "2023-06-01"},
            ) as answer:
                status, refused = answer.status, await answer.json()
    finally:
        daemon.kill()
    assert status == 401
    assert refused["type"] == "error"
    assert "stale-session" in refused["error"]["message"]
    assert generations(fake) == before
