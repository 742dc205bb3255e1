"""A CLI child killed between turns is known to have exited before the daemon's event loop
has reaped it (``adapters._child.exit_status``): the next turn notes the exit and starts a new
process instead of writing its message to a dead one. Run on uvloop, the daemon's loop, which
reaps a child only when the loop runs."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import uvloop

from adapters import _child


def _zombie(pid: int) -> bool:
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state == "Z"


async def _sleeper(folder: Path) -> asyncio.subprocess.Process:
    return await _child.spawn(["sleep", "30"], cwd=str(folder), state_dir=folder, env={})


def test_a_running_child_has_no_exit_status(tmp_path: Path) -> None:
    """A child that runs has no exit status, and asking does not stop it."""

    async def scenario() -> tuple[int | None, int | None]:
        process = await _sleeper(tmp_path)
        try:
            return await _child.exit_status(process), process.returncode
        finally:
            await _child.stop(process, grace=1.0)

    assert uvloop.run(scenario()) == (None, None)


def test_a_child_killed_a_moment_ago_has_its_status_before_the_loop_reaps_it(
    tmp_path: Path,
) -> None:
    """SIGKILL, then the child is a zombie the loop has not collected (it does not run
    between): its exit status is -9 all the same, and the loop's own wait still has it."""

    async def scenario() -> tuple[int | None, int | None, int]:
        process = await _sleeper(tmp_path)
        os.kill(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not _zombie(process.pid):
            assert time.monotonic() < deadline
            time.sleep(0.01)  # noqa: ASYNC251 - the loop must not run (and reap) here
        unreaped = process.returncode
        status = await _child.exit_status(process)
        return unreaped, status, await asyncio.wait_for(process.wait(), 5)

    assert uvloop.run(scenario()) == (None, -signal.SIGKILL, -signal.SIGKILL)
