"""The daemon's process keeps its environment to itself: once ``serve`` starts, the process is
not dumpable, so another process of the same (non-root) user, such as a command an agent runs,
cannot read ``/proc/<daemon>/environ``; the commands it starts are dumpable again."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.daemon import REPO

PROBE = """
import ctypes, subprocess, sys
from condensate.app import keep_environment_private
libc = ctypes.CDLL(None)
before = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
keep_environment_private()
after = libc.prctl(3, 0, 0, 0, 0)
child = subprocess.run(
    [sys.executable, "-c", "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"],
    capture_output=True, text=True, check=True,
).stdout.strip()
print(before, after, child)
"""


def test_the_daemon_is_not_dumpable_and_its_children_are() -> None:
    """Dumpable before, not after; a child it starts is dumpable (exec resets it)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["1", "0", "1"]
