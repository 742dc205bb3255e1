"""The README's quickstart, run as written: each command of its marked blocks in bash from the
repository root, a server started with ``&`` (or ``condensate serve``, which a person leaves
running in its own terminal) in the background until it answers. The test's environment only
gives the state and configuration directories and free ports; the key path's provider is the
fake server, which accepts nothing but the key the README writes."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import REPO

README = (REPO / "README.md").read_text()
FAKE_PORT = "18080"


def block(name: str) -> str:
    """The bash block after ``<!-- quickstart:NAME -->``."""
    found = re.search(rf"<!-- quickstart:{name} -->\n```bash\n(.*?)```", README, re.S)
    assert found is not None, f"README has no quickstart:{name} block"
    return found[1]


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


class Shell:
    """Commands run one after another as a person types them, in one environment."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.env = env
        self.home = home
        self.background: list[subprocess.Popen[bytes]] = []

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        stripped = command.split(" #", 1)[0].rstrip() if "'" not in command else command
        if stripped.endswith("&") or " serve" in stripped.split("\n")[-1]:
            self.start(stripped.rstrip("&").rstrip())
            return subprocess.CompletedProcess(command, 0, "", "")
        return subprocess.run(
            ["bash", "-c", command],
            cwd=REPO,
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
                cwd=REPO,
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


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    env |= {
        "CONDENSATE_HOME": str(tmp_path / "state"),
        "CONDENSATE_PORT": str(free_port()),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TEST_FAKE_PORT": str(free_port()),
        "BROWSER": "true",  # ui --open opens nothing here
    }
    runner = Shell(env, tmp_path)
    try:
        yield runner
    finally:
        runner.stop()


def test_the_no_api_path_runs_a_thread_that_uses_a_tool(shell: Shell):
    """The fake server, the daemon pointed at it, a scripted tool call and answer, a run:
    the run shows the call, its result and the answer, and exits 0."""
    port = shell.env["TEST_FAKE_PORT"]
    steps = [c.replace(FAKE_PORT, port) for c in commands(block("fake"))]
    assert len(steps) == 4
    *setup, run = steps
    for step in setup:
        done = shell.run(step)
        assert done.returncode == 0, done.stderr
    queued = json.loads(done.stdout)
    assert queued["queued"] == 2
    done = shell.run(run)
    assert done.returncode == 0, done.stderr
    assert "> List the files here." in done.stdout
    assert '⚙ shell {"command": "ls"}' in done.stdout
    # The result line shows the first line of `ls` in the repository: its first file.
    first = subprocess.run(
        ["ls"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    name = re.escape(first.stdout.splitlines()[0])
    assert re.search(rf"✓ shell\(ls\): {name} \(\+\d+ lines\)", done.stdout), done.stdout
    assert "Those are the files here." in done.stdout
    assert "── turn completed" in done.stdout


async def test_the_key_path_works_on_the_first_try(shell: Shell, tmp_path: Path):
    """The key written with ``config set`` reaches the daemon, which then answers the run;
    ``status`` shows the thread. The provider here is the fake, keyed with the README's key."""
    key = re.search(r"config set CONDENSATE_ANTHROPIC_API_KEY (\S+)", block("key"))
    assert key is not None
    async with FakeModelServer(api_key=key[1]) as fake:
        shell.env["CONDENSATE_ANTHROPIC_BASE_URL"] = fake.url
        outputs = []
        for step in [*commands(block("key")), *commands(block("run"))]:
            done = await _in_thread(shell, step)
            assert done.returncode == 0, (step, done.stdout, done.stderr)
            outputs.append(done.stdout)
        assert fake.requests[-1].status == 200
    _, _, run, status, page = outputs
    assert "── turn completed" in run
    assert "idle" in status
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/ui#token=\S+\n", page)


async def _in_thread(shell: Shell, step: str) -> subprocess.CompletedProcess[str]:
    import anyio

    return await anyio.to_thread.run_sync(shell.run, step)
