"""A ``condensate`` command on a real pseudo-terminal, its screen read back through a terminal
emulator (pyte): what a person at that terminal would see."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte

from tests.integration.daemon import REPO

ROWS, COLUMNS = 30, 120


def condensate(*args: str) -> list[str]:
    """The ``condensate`` command with ``args``, run by this interpreter."""
    return [sys.executable, "-m", "condensate", *args]


def shell_line(line: str) -> list[str]:
    """``line`` run by ``sh`` (for a redirection)."""
    return ["/bin/sh", "-c", line]


class Terminal:
    """``argv`` on a pseudo-terminal of ``rows`` x ``columns`` with the daemon of ``home``,
    and the screen it draws."""

    def __init__(
        self,
        home: Path,
        argv: list[str],
        rows: int = ROWS,
        columns: int = COLUMNS,
        *,
        env: dict[str, str] | None = None,
        cwd: Path = REPO,
    ) -> None:
        """``env``: the environment to start from (default: this process's, without any
        ``CONDENSATE_`` setting)."""
        base = os.environ if env is None else env
        env = {k: v for k, v in base.items() if not k.startswith("CONDENSATE_")}
        env |= {"CONDENSATE_HOME": str(home), "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.child = pexpect.spawn(
            argv[0], argv[1:], cwd=str(cwd), env=env, dimensions=(rows, columns)
        )
        # A terminal answers when asked where its cursor is (prompt_toolkit asks).
        self.screen.write_process_input = self.child.send  # type: ignore[method-assign]

    def pump(self) -> None:
        while not self.child.closed:
            try:
                data = self.child.read_nonblocking(65_536, timeout=0.05)
            except (pexpect.TIMEOUT, pexpect.EOF):
                return
            self.stream.feed(data)

    def lines(self) -> list[str]:
        self.pump()
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.lines())

    def until(self, seen: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while not seen():
            if time.monotonic() > deadline:
                msg = f"never saw {what}; the screen:\n{self.text()}"
                raise AssertionError(msg)
            time.sleep(0.05)

    def exit_status(self, seconds: float = 30.0) -> int:
        """Wait for the command to end (reading the screen meanwhile); its exit status."""
        deadline = time.monotonic() + seconds
        while self.child.isalive():
            assert time.monotonic() < deadline, f"it never ended; the screen:\n{self.text()}"
            self.pump()
        self.pump()
        self.child.close()
        if self.child.signalstatus is not None:
            return 128 + int(self.child.signalstatus)
        return int(self.child.exitstatus or 0)

    def kill(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
