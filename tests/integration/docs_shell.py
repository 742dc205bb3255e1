"""Running the docs' shell blocks as a person types them: the blocks found by their marker,
split into commands, and run one after another in bash, with state and configuration
directories and ports of the test's own."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.integration.daemon import REPO

DOCS = REPO / "docs"


def block(text: str, marker: str) -> str:
    """The bash block right after ``<!-- MARKER -->``."""
    found = re.search(rf"^<!-- {re.escape(marker)} -->\n```bash\n(.*?)```", text, re.S | re.M)
    assert found is not None, f"no {marker} block"
    return found[1]


def marked(text: str, marker: str) -> Iterator[tuple[int, str]]:
    """Every bash block right after ``<!-- MARKER -->``, with the line its fence opens on."""
    pattern = rf"^<!-- {re.escape(marker)} -->\n```bash\n(.*?)```"
    for found in re.finditer(pattern, text, re.S | re.M):
        yield text.count("\n", 0, found.start()) + 2, found[1]


def commands(text: str) -> list[str]:
    """The block's commands: a line continued by a backslash or an open quote goes on."""
    found: list[str] = []
    current = ""
    for line in text.splitlines():
        current = f"{current}\n{line}" if current else line
        if line.endswith("\\"):
            continue
        try:
            shlex.split(current, comments=True)
        except ValueError:
            continue  # a quote still open
        if current.strip():
            found.append(current)
        current = ""
    assert not current, f"unfinished command: {current!r}"
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def environment(tmp_path: Path) -> dict[str, str]:
    """The environment a block runs in: no CONDENSATE_* of the caller's, the state and
    configuration directories under ``tmp_path``, free ports for the daemon and a fake."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    return env | {
        "CONDENSATE_HOME": str(tmp_path / "state"),
        "CONDENSATE_PORT": str(free_port()),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TEST_FAKE_PORT": str(free_port()),
        "BROWSER": "true",  # ui --open opens nothing here
    }


class Shell:
    """Commands run one after another as a person types them, in one environment, from
    ``cwd`` (the repository root unless given)."""

    def __init__(self, env: dict[str, str], home: Path, cwd: Path = REPO) -> None:
        self.env = env
        self.home = home
        self.cwd = cwd
        self.background: list[subprocess.Popen[bytes]] = []

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        stripped = command.split(" #", 1)[0].rstrip() if "'" not in command else command
        if stripped.endswith("&") or " serve" in stripped.split("\n")[-1]:
            self.start(stripped.rstrip("&").rstrip())
            return subprocess.CompletedProcess(command, 0, "", "")
        return subprocess.run(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def start(self, command: str) -> None:
        """A server in the background, until it answers."""
        with (self.home / f"background-{len(self.background)}.log").open("wb") as log:
            process = subprocess.Popen(  # the child keeps its own copy of the log
                ["bash", "-c", command],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.background.append(process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, (self.home / "background-0.log").read_text()
            if "fake_model" in command and listening(int(self.env["TEST_FAKE_PORT"])):
                return
            if " serve" in command and (self.home / "state" / "daemon.json").exists():
                return
            time.sleep(0.05)
        msg = f"{command!r} did not come up"
        raise AssertionError(msg)

    def stop(self) -> None:
        for process in self.background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
