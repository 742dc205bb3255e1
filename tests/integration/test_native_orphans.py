"""A native thread's shell commands die with the daemon: SIGKILL a real daemon while the
model's `sleep` runs (in a process group of its own, which the daemon's death alone would
not reach), and within a few seconds nothing it started is left."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import aiohttp
import anyio

from condensate.testing.fake_model import Call, FakeModelServer, ToolCalls
from tests.integration.daemon import DaemonProcess, call
from tests.integration.procs import alive, descendants

MARKER = "sleep 97.5"


async def test_a_sigkilled_daemon_leaves_no_shell_command_running(
    tmp_path: Path, fake: FakeModelServer
) -> None:
    """The shell tool's command, and the bash around it, are gone within 5 s of the kill."""
    fake.queue(ToolCalls([Call("shell", {"command": f"{MARKER}; echo never"})]))
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
            while not any(  # noqa: ASYNC110 - procfs has no event
                MARKER in cmd for cmd in descendants(daemon.process.pid).values()
            ):
                await anyio.sleep(0.05)
        started = descendants(daemon.process.pid)
        os.kill(daemon.process.pid, signal.SIGKILL)
        daemon.process.wait(timeout=10)
        deadline = time.monotonic() + 5
        while alive(started) and time.monotonic() < deadline:  # noqa: ASYNC110 - procfs
            await anyio.sleep(0.05)
    finally:
        daemon.kill()
    assert alive(started) == {}


async def test_a_killed_daemons_commands_get_to_run_their_exit_traps(
    tmp_path: Path, fake: FakeModelServer
) -> None:
    """Commands are ended with SIGTERM before SIGKILL, so one holding a lock (as a login
    profile's `pyenv rehash` does) removes it: a lock left behind would stall every later
    shell."""
    lock = tmp_path / "held.lock"
    script = f"trap 'rm -f {lock}' EXIT; touch {lock}; {MARKER}"
    fake.queue(ToolCalls([Call("shell", {"command": f'bash -c "{script}"'})]))
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
                {"model": "anthropic:claude-sonnet-4-5", "cwd": str(tmp_path), "brief": "hold"},
            )
            assert status == 201, body
        assert daemon.process is not None
        with anyio.fail_after(30):
            while not lock.exists():  # noqa: ASYNC110 - the file system has no event
                await anyio.sleep(0.05)
        started = descendants(daemon.process.pid)
        os.kill(daemon.process.pid, signal.SIGKILL)
        daemon.process.wait(timeout=10)
        deadline = time.monotonic() + 5
        while alive(started) and time.monotonic() < deadline:  # noqa: ASYNC110 - procfs
            await anyio.sleep(0.05)
    finally:
        daemon.kill()
    assert alive(started) == {}
    assert not lock.exists()
