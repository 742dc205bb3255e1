"""``adapters/_reaper.py`` as a real process: what a CLI under it leaves running (even in a
session of its own, as Claude Code's Bash commands are) dies when the reaper's parent dies,
and when the CLI exits."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from adapters._child import REAPER

PARENT = """
import subprocess, sys
reaper = subprocess.Popen([sys.executable, "-I", "-S", sys.argv[1], str(__import__("os").getpid()),
                           "bash", "-c", sys.argv[2]])
print(reaper.pid, flush=True)
reaper.wait()
"""


def alive(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in ("Z", "X") and "bash -c" not in cmdline:
            found.append(int(entry.name))
    return found


def wait_until(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_a_detached_grandchild_dies_when_the_reapers_parent_is_killed():
    """A command the CLI started with setsid outlives a SIGKILLed CLI parent unless reaped:
    under the reaper, SIGKILLing the reaper's parent ends the CLI and that command too."""
    marker = "66.125"
    script = f"setsid sleep {marker} & sleep 55.125"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(REAPER), script], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    parent.stdout.readline()
    assert wait_until(lambda: bool(alive(f"sleep {marker}")))
    parent.kill()
    parent.wait(timeout=10)
    parent.stdout.close()
    assert wait_until(lambda: not alive(f"sleep {marker}") and not alive("sleep 55.125"))


def test_what_the_cli_leaves_running_dies_when_it_exits_and_its_status_is_kept():
    """When the CLI exits (here with status 3), the reaper kills what it left behind in a
    session of its own and exits with the CLI's status."""
    marker = "67.125"
    script = f"setsid sleep {marker} & sleep 0.2; exit 3"
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "bash", "-c", script],
        timeout=30,
        check=False,
    )
    assert done.returncode == 3
    assert wait_until(lambda: not alive(f"sleep {marker}"))
