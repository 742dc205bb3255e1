"""``condensate chat`` in a real pseudo-terminal, its screen read back through a terminal
emulator (pyte): the reply streams as the model writes it, tool calls show as they happen, a
status line on the last row keeps the thread's usage and cost, and a new message is taken at
the prompt. Piped, it reads a message a line and exits as the last turn ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pyte
import pytest

from condensate.client import DaemonClient
from condensate.testing.fake_model import Call, Fail, FakeModelServer, Slow, Text, ToolCalls
from tests.integration.daemon import REPO, DaemonProcess, running_daemon

MODEL = "anthropic:claude-sonnet-4-5"
ROWS, COLUMNS = 30, 120


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    with running_daemon(tmp_path_factory.mktemp("chat"), fake.url) as process:
        yield process


def settled(client: DaemonClient, thread: str) -> None:
    deadline = time.monotonic() + 30
    while client.call("GET", f"/threads/{thread}")["status"] != "idle":
        assert time.monotonic() < deadline, "the thread never settled"
        time.sleep(0.05)


def new_thread(daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path) -> str:
    fake.queue(Text("Ready when you are."))
    client = DaemonClient(daemon.url, daemon.token)
    body = {"model": MODEL, "cwd": str(tmp_path), "brief": "Stand by."}
    thread = str(client.call("POST", "/threads", body)["id"])
    settled(client, thread)
    return thread


class Terminal:
    """``condensate chat`` on a pseudo-terminal, and the screen it draws."""

    def __init__(self, daemon: DaemonProcess, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
        env |= {"CONDENSATE_HOME": str(daemon.home), "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "condensate", "chat", *args],
            cwd=str(REPO),
            env=env,
            dimensions=(ROWS, COLUMNS),
        )

    def pump(self) -> None:
        while True:
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

    def status(self) -> str:
        return self.lines()[-1]

    def close(self) -> int:
        self.child.sendeof()
        self.child.expect(pexpect.EOF, timeout=15)
        self.child.close()
        return int(self.child.exitstatus or 0)


def test_chat_streams_the_reply_shows_tools_and_keeps_a_status_line(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    thread = new_thread(daemon, fake, tmp_path)
    terminal = Terminal(daemon, thread)
    try:
        terminal.until(lambda: "you>" in terminal.text(), "the prompt")
        terminal.until(lambda: thread in terminal.status(), "the status line")
        assert "tokens" in terminal.status()
        assert "of the line" in terminal.status()
        assert "$" in terminal.status()
        reply = "Echo ran; its output says chat-works, which is what we wanted to see."
        fake.queue(
            ToolCalls([Call("shell", {"command": "echo chat-works"})]),
            Slow(Text(reply), chunk_delay=0.4, chunks=8),
            model="claude-sonnet-4-5",
        )
        terminal.child.sendline("Run the echo, please.")
        terminal.until(
            lambda: '⚙ shell {"command": "echo chat-works"}' in terminal.text(), "the call"
        )
        terminal.until(
            lambda: "✓ shell(echo chat-works): chat-works" in terminal.text(), "its result"
        )
        # Written as it streams: a part of the reply shows before all of it.
        terminal.until(
            lambda: "Echo ran" in terminal.text() and reply not in terminal.text(),
            "a part of the reply",
        )
        terminal.until(lambda: reply in terminal.text(), "the whole reply")
        terminal.until(lambda: "── turn completed" in terminal.text(), "the turn's end")
        terminal.until(lambda: terminal.text().count("you>") >= 2, "the next prompt")
        assert "(3 calls)" in terminal.status() or "(4 calls)" in terminal.status()
        assert terminal.text().count(reply) == 1  # streamed once, not printed again
    finally:
        assert terminal.close() == 0


def test_piped_chat_sends_each_line_and_exits_as_the_last_turn_ended(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    thread = new_thread(daemon, fake, tmp_path)
    fake.queue(Text("First answer."), Fail(401), model="claude-sonnet-4-5")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    env["CONDENSATE_HOME"] = str(daemon.home)
    done = subprocess.run(
        [sys.executable, "-m", "condensate", "chat", thread],
        input="One.\nTwo.\n",
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "First answer." in done.stdout
    assert "\033[" not in done.stdout
    assert done.stderr.startswith("condensate: the turn failed: anthropic answered 401")


def test_chat_with_a_thread_the_daemon_lacks_exits_2_naming_it(daemon: DaemonProcess):
    """`chat t-nope`, even with nothing on stdin, says the thread is unknown and exits 2."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    env["CONDENSATE_HOME"] = str(daemon.home)
    done = subprocess.run(
        [sys.executable, "-m", "condensate", "chat", "t-nope"],
        input="",
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "t-nope" in done.stderr
