"""``condensate run`` on a real pseudo-terminal, its screen read back: a progress line with
the elapsed time while the model works, Ctrl-C once stops the turn (its reason said once,
exit 130), twice detaches (the turn goes on in the daemon); and the progress line goes to
stderr only when stderr is a terminal, so ``--json`` and piped output stay clean."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from condensate.client import DaemonClient
from condensate.testing.fake_model import FakeModelServer, Stall, Text
from tests.integration.daemon import DaemonProcess, running_daemon
from tests.integration.terminal import Terminal, condensate, shell_line

MODEL = "anthropic:claude-sonnet-4-5"
THREAD = re.compile(r"thread (t-[0-9a-f]{12})")


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    with running_daemon(tmp_path_factory.mktemp("run-tty"), fake.url) as process:
        yield process


def thread_of(terminal: Terminal) -> str:
    terminal.until(lambda: THREAD.search(terminal.text()) is not None, "the thread's id")
    match = THREAD.search(terminal.text())
    assert match is not None
    return match.group(1)


def events(daemon: DaemonProcess, thread: str) -> list[dict[str, Any]]:
    client = DaemonClient(daemon.url, daemon.token)
    page = client.call("GET", f"/threads/{thread}/tail?after=0&limit=1000")
    return list(page["events"])


def idle(daemon: DaemonProcess, thread: str, seconds: float = 30.0) -> None:
    client = DaemonClient(daemon.url, daemon.token)
    deadline = time.monotonic() + seconds
    while client.call("GET", f"/threads/{thread}")["status"] != "idle":
        assert time.monotonic() < deadline, "the thread never settled"
        time.sleep(0.05)


def test_run_shows_a_progress_line_with_the_elapsed_time_while_the_model_works(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """While the model has not answered, the last line says it works, for how long (the
    seconds count up) and what Ctrl-C does; the line is gone once the turn ended."""
    fake.queue(Stall(Text("Done at last."), seconds=3))
    terminal = Terminal(
        daemon.home, condensate("run", "--model", MODEL, "--cwd", str(tmp_path), "wait")
    )
    try:
        terminal.until(lambda: "Working (0s · Ctrl-C stops the turn)" in terminal.text(), "0s")
        terminal.until(lambda: "Working (2s · Ctrl-C stops the turn)" in terminal.text(), "2s")
        assert terminal.exit_status() == 0
        text = terminal.text()
        assert "Done at last." in text
        assert "── turn completed" in text
        assert "Working" not in text
    finally:
        terminal.kill()


def test_ctrl_c_stops_the_turn_says_why_once_and_exits_130(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """The first Ctrl-C asks the daemon to stop the turn and waits for its end: the turn ends
    interrupted in the log, its reason is on the screen once, and `run` exits 130."""
    fake.queue(Stall(Text("never seen"), seconds=20))
    terminal = Terminal(
        daemon.home, condensate("run", "--model", MODEL, "--cwd", str(tmp_path), "stop me")
    )
    try:
        thread = thread_of(terminal)
        terminal.until(lambda: "Working (" in terminal.text(), "the progress line")
        terminal.child.sendintr()
        assert terminal.exit_status() == 130
        text = terminal.text()
        assert text.count("interrupted by the operator") == 1, text
        assert "condensate: the turn interrupted: interrupted by the operator" in text
        assert "never seen" not in text
        ended = [e for e in events(daemon, thread) if e["kind"] == "turn.ended"]
        assert [e["outcome"] for e in ended] == ["interrupted"]
    finally:
        terminal.kill()


def test_a_second_ctrl_c_detaches_without_waiting_for_the_daemon(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """A second Ctrl-C leaves at once (130), saying the turn goes on in the daemon and how to
    follow it, even while the daemon has not answered the first (it is stopped here, so the
    stop the first Ctrl-C asked for cannot have ended the turn)."""
    fake.queue(Stall(Text("finished without you"), seconds=20))
    terminal = Terminal(
        daemon.home, condensate("run", "--model", MODEL, "--cwd", str(tmp_path), "detach")
    )
    assert daemon.process is not None
    try:
        thread = thread_of(terminal)
        terminal.until(lambda: "Working (" in terminal.text(), "the progress line")
        os.kill(daemon.process.pid, signal.SIGSTOP)
        try:
            terminal.child.sendintr()
            terminal.until(lambda: "Stopping the turn" in terminal.text(), "the stopping line")
            terminal.child.sendintr()
            assert terminal.exit_status(seconds=10) == 130
        finally:
            os.kill(daemon.process.pid, signal.SIGCONT)
        text = terminal.text()
        assert (
            "condensate: detached; the turn goes on in the daemon; follow it with "
            f"condensate tail -f {thread}" in text.replace("\n", "")
        )
        assert "── turn" not in text
    finally:
        terminal.kill()
    idle(daemon, thread)


def test_json_on_stdout_stays_clean_while_the_progress_line_is_on_the_terminal(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """stdout to a file with --json, stderr on the terminal: the terminal shows the progress
    line, the file holds only the events as JSON lines."""
    fake.queue(Stall(Text("clean json"), seconds=2))
    out = tmp_path / "out.jsonl"
    line = (
        f"exec {sys.executable} -m condensate --json run --model {MODEL} --cwd {tmp_path} "
        f"'json please' > {out}"
    )
    terminal = Terminal(daemon.home, shell_line(line))
    try:
        terminal.until(lambda: "Working (" in terminal.text(), "the progress line")
        assert terminal.exit_status() == 0
    finally:
        terminal.kill()
    kinds = [json.loads(raw)["kind"] for raw in out.read_text().splitlines()]
    assert kinds[-1] == "turn.ended"
    assert "message.assistant" in kinds


def test_no_progress_line_when_stderr_is_not_a_terminal(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """stdout on the terminal, stderr to a file: the file holds only the thread's id, the
    terminal only the turn's lines; no progress line anywhere."""
    fake.queue(Stall(Text("quiet stderr"), seconds=2))
    err = tmp_path / "err.txt"
    line = f"exec {sys.executable} -m condensate run --model {MODEL} --cwd {tmp_path} q 2> {err}"
    terminal = Terminal(daemon.home, shell_line(line))
    try:
        terminal.until(lambda: "quiet stderr" in terminal.text(), "the reply")
        assert terminal.exit_status() == 0
        assert "Working" not in terminal.text()
    finally:
        terminal.kill()
    assert THREAD.fullmatch(err.read_text().strip()), err.read_text()
