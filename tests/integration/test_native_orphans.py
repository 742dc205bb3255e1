"""A native thread's shell commands die with the daemon: SIGKILL a real daemon while the
model's command runs (in a process group of its own, which the daemon's death alone would
not reach), and within a few seconds nothing it started is left; what is ended gets SIGTERM
first, so it can let go of what it holds."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import anyio

from condensate.testing.fake_model import Call, FakeModelServer, ToolCalls
from tests.integration.daemon import DaemonProcess, call
from tests.integration.procs import alive, descendants

MARKER = "sleep 97.5"


async def kill_while_running(
    tmp_path: Path, fake: FakeModelServer, command: str, running: Callable[[int], bool]
) -> dict[int, str]:
    """Run ``command`` through a native thread of a real daemon, SIGKILL the daemon once
    ``running(daemon_pid)`` holds, and return what the daemon had started that is still alive
    5 s later."""
    fake.queue(ToolCalls([Call("shell", {"command": command})]))
    daemon = DaemonProcess(tmp_path / "home", fake.url)
    daemon.home.mkdir()
    daemon.start()
    try:
        async with aiohttp.ClientSession() as session:
            status, body = await call(
                session,
                daemon,
                "POST",
                "/threads",
                {"model": "anthropic:claude-sonnet-4-5", "cwd": str(tmp_path), "brief": "wait"},
            )
            assert status == 201, body
        assert daemon.process is not None
        with anyio.fail_after(30):
            while not running(daemon.process.pid):  # noqa: ASYNC110 - procfs has no event
                await anyio.sleep(0.05)
        started = descendants(daemon.process.pid)
        os.kill(daemon.process.pid, signal.SIGKILL)
        daemon.process.wait(timeout=10)
        deadline = time.monotonic() + 5
        while alive(started) and time.monotonic() < deadline:  # noqa: ASYNC110 - procfs
            await anyio.sleep(0.05)
    finally:
        daemon.kill()
    return alive(started)


async def test_a_sigkilled_daemon_leaves_no_shell_command_running(
    tmp_path: Path, fake: FakeModelServer
) -> None:
    """The shell tool's command, and the bash around it, are gone within 5 s of the kill."""

    def sleeping(pid: int) -> bool:
        return any(MARKER in cmd for cmd in descendants(pid).values())

    assert await kill_while_running(tmp_path, fake, f"{MARKER}; echo never", sleeping) == {}


async def test_a_killed_daemons_commands_get_to_run_their_exit_traps(
    tmp_path: Path, fake: FakeModelServer
) -> None:
    """Commands are ended with SIGTERM before SIGKILL, so one holding a lock (as a login
    profile's `pyenv rehash` does) removes it: a lock left behind would stall every later
    shell."""
    lock = tmp_path / "held.lock"
    script = f"trap 'rm -f {lock}' EXIT; touch {lock}; {MARKER}"
    left = await kill_while_running(
        tmp_path, fake, f'bash -c "{script}"', lambda pid: lock.exists()
    )
    assert left == {}
    assert not lock.exists()
