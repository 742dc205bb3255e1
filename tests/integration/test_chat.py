"""``condensate chat`` in a real pseudo-terminal, its screen read back through a terminal
emulator (pyte): the reply streams as Markdown wrapped at word ends, tool calls show as they
happen, a progress line counts the turn's seconds, a status line on the last row keeps the
thread's usage and cost, typing during a turn is sent as a steer, approvals are answered at
the prompt, Ctrl-C stops the turn, and leaving puts the cursor below the last line. Piped,
it reads a message a line and exits as the last turn ended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from condensate.client import DaemonClient
from condensate.testing.fake_model import Call, Fail, FakeModelServer, Slow, Stall, Text, ToolCalls
from tests.integration.daemon import REPO, DaemonProcess, running_daemon
from tests.integration.terminal import Terminal, condensate

MODEL = "anthropic:claude-sonnet-4-5"


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


def new_thread(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path, permissions: str = "default"
) -> str:
    fake.queue(Text("Ready when you are."))
    client = DaemonClient(daemon.url, daemon.token)
    body = {"model": MODEL, "cwd": str(tmp_path), "brief": "Stand by.", "permissions": permissions}
    thread = str(client.call("POST", "/threads", body)["id"])
    settled(client, thread)
    return thread


def logged(daemon: DaemonProcess, thread: str) -> list[dict[str, Any]]:
    client = DaemonClient(daemon.url, daemon.token)
    return list(client.call("GET", f"/threads/{thread}/tail?after=0&limit=1000")["events"])


@pytest.fixture
def chat(daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path) -> Iterator[Terminal]:
    """A chat with a new thread, at its prompt."""
    terminal = Terminal(daemon.home, condensate("chat", new_thread(daemon, fake, tmp_path)))
    terminal.until(lambda: "you>" in terminal.text(), "the prompt")
    yield terminal
    terminal.kill()


def test_chat_streams_the_reply_shows_tools_and_keeps_a_status_line(
    daemon: DaemonProcess, fake: FakeModelServer, chat: Terminal
):
    """The reply shows as it is written, once; each call and its result show; the last row
    keeps the thread's usage and cost; the message typed shows once, where it was typed."""
    chat.until(lambda: "of the line" in chat.lines()[-1], "the status line")
    assert "tokens" in chat.lines()[-1]
    assert "$" in chat.lines()[-1]
    reply = "Echo ran; its output says chat-works, which is what we wanted to see."
    fake.queue(
        ToolCalls([Call("shell", {"command": "echo chat-works"})]),
        Slow(Text(reply), chunk_delay=0.4, chunks=8),
        model="claude-sonnet-4-5",
    )
    chat.child.sendline("Run the echo, please.")
    chat.until(lambda: '⚙ shell {"command": "echo chat-works"}' in chat.text(), "the call")
    chat.until(lambda: "✓ shell(echo chat-works): chat-works" in chat.text(), "its result")
    chat.until(
        lambda: "Echo ran" in chat.text() and reply not in chat.text(), "a part of the reply"
    )
    chat.until(lambda: reply in chat.text(), "the whole reply")
    chat.until(lambda: "── turn completed" in chat.text(), "the turn's end")
    assert "(3 calls)" in chat.lines()[-1] or "(4 calls)" in chat.lines()[-1]
    assert chat.text().count(reply) == 1
    assert chat.text().count("Run the echo, please.") == 1


def test_a_progress_line_counts_the_turns_seconds(fake: FakeModelServer, chat: Terminal):
    """While the model works, a line above the prompt says so with the seconds taken; it is
    gone once the turn ended."""
    fake.queue(Stall(Text("Took a while."), seconds=3), model="claude-sonnet-4-5")
    chat.child.sendline("Take your time.")
    chat.until(lambda: "Working (2s · Esc or Ctrl-C stops the turn)" in chat.text(), "2s")
    chat.until(lambda: "── turn completed" in chat.text(), "the turn's end")
    chat.until(lambda: "Working" not in chat.text(), "the progress line gone")


def test_a_message_typed_during_a_turn_is_sent_as_a_steer(
    daemon: DaemonProcess, fake: FakeModelServer, chat: Terminal
):
    """The prompt stays open during a turn: a line typed then reaches the thread at once
    (logged before the turn ends) and is shown once."""
    fake.queue(Stall(Text("Steered."), seconds=3), Text("Done."), model="claude-sonnet-4-5")
    chat.child.sendline("Start.")
    chat.until(lambda: "Working (" in chat.text(), "the turn running")
    chat.child.sendline("Mind the tests too.")
    chat.until(lambda: "sent as a steer of the running turn" in chat.text(), "the steer's note")
    thread = chat.lines()[-1].split()[0]
    kinds = [
        (e["kind"], e.get("text"))
        for e in logged(daemon, thread)
        if e["kind"] in ("message.user", "turn.ended")
    ]
    assert kinds[-1] == ("message.user", "Mind the tests too."), kinds  # the turn still runs
    chat.until(lambda: "Done." in chat.text(), "the end of the steered turn")
    assert chat.text().count("Mind the tests too.") == 1


def test_an_approval_is_answered_at_the_prompt(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """A thread that asks before running a command: the prompt asks, `y` allows, it runs."""
    thread = new_thread(daemon, fake, tmp_path, permissions="ask")
    terminal = Terminal(daemon.home, condensate("chat", thread))
    try:
        terminal.until(lambda: "you>" in terminal.text(), "the prompt")
        fake.queue(
            ToolCalls([Call("shell", {"command": "echo allowed-here"})]),
            Text("It ran."),
            model="claude-sonnet-4-5",
        )
        terminal.child.sendline("Run it.")
        terminal.until(
            lambda: "allow shell echo allowed-here? [y/n]" in terminal.text(), "the question"
        )
        terminal.child.sendline("y")
        terminal.until(
            lambda: "✓ shell(echo allowed-here): allowed-here" in terminal.text(), "it ran"
        )
        terminal.until(lambda: "── turn completed" in terminal.text(), "the turn's end")
    finally:
        terminal.kill()
    answered = [e for e in logged(daemon, thread) if e["kind"] == "approval.answered"]
    assert [(a["decision"], a["by"]) for a in answered] == [("allow", "operator")]


def test_ctrl_c_stops_the_running_turn_and_the_chat_goes_on(
    daemon: DaemonProcess, fake: FakeModelServer, chat: Terminal
):
    """Ctrl-C during a turn stops it (its reason shown once); the prompt takes the next
    message."""
    fake.queue(Stall(Text("never seen"), seconds=20), Text("Back."), model="claude-sonnet-4-5")
    chat.child.sendline("Go slow.")
    chat.until(lambda: "Working (" in chat.text(), "the turn running")
    chat.child.sendintr()
    chat.until(lambda: "── turn interrupted" in chat.text(), "the turn's end")
    assert chat.text().count("interrupted by the operator") == 1
    chat.child.sendline("Again.")
    chat.until(lambda: "Back." in chat.text(), "the next turn's reply")


def test_esc_stops_the_running_turn(fake: FakeModelServer, chat: Terminal):
    """Esc during a turn stops it as Ctrl-C does; the prompt takes the next message."""
    fake.queue(Stall(Text("never seen"), seconds=20), Text("Back."), model="claude-sonnet-4-5")
    chat.child.sendline("Go slow.")
    chat.until(lambda: "Working (" in chat.text(), "the turn running")
    chat.child.send("\x1b")
    chat.until(lambda: "── turn interrupted" in chat.text(), "the turn's end")
    assert "never seen" not in chat.text()
    chat.child.sendline("Again.")
    chat.until(lambda: "Back." in chat.text(), "the next turn's reply")


def test_an_alt_key_during_a_turn_edits_the_line_and_leaves_the_turn(
    fake: FakeModelServer, chat: Terminal
):
    """Alt-Backspace (Esc and Backspace at once) deletes a word; the turn goes on."""
    fake.queue(Stall(Text("Still here."), seconds=3), model="claude-sonnet-4-5")
    chat.child.sendline("Go on.")
    chat.until(lambda: "Working (" in chat.text(), "the turn running")
    chat.child.send("keep dropped")
    chat.child.send("\x1b\x7f")
    chat.until(lambda: "── turn completed" in chat.text(), "the turn's end")
    assert "Still here." in chat.text()
    assert "keep dropped" not in chat.text()
    assert "you> keep" in chat.text()


def test_a_second_ctrl_c_while_the_turn_stops_detaches(
    daemon: DaemonProcess, fake: FakeModelServer, chat: Terminal
):
    """Ctrl-C twice: the chat leaves with 130, saying how to follow the turn, and the
    daemon still gets the first Ctrl-C's stop."""
    fake.queue(Stall(Text("never seen"), seconds=20), model="claude-sonnet-4-5")
    chat.child.sendline("Go slow.")
    chat.until(lambda: "Working (" in chat.text(), "the turn running")
    thread = chat.lines()[-1].split()[0]
    chat.child.send("\x03\x03")
    assert chat.exit_status() == 130
    assert f"the turn goes on in the daemon; follow it with condensate tail -f {thread}" in (
        " ".join(chat.text().split())
    )
    settled(DaemonClient(daemon.url, daemon.token), thread)
    (ended,) = [e for e in logged(daemon, thread) if e["kind"] == "turn.ended"][-1:]
    assert ended["outcome"] == "interrupted"


def test_an_approval_is_denied_at_the_prompt_with_a_reason(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """`n: REASON` denies the call: it does not run, and the agent reads the reason."""
    thread = new_thread(daemon, fake, tmp_path, permissions="ask")
    terminal = Terminal(daemon.home, condensate("chat", thread))
    try:
        terminal.until(lambda: "you>" in terminal.text(), "the prompt")
        fake.queue(
            ToolCalls([Call("shell", {"command": f"touch {tmp_path / 'made'}"})]),
            Text("I will leave it."),
            model="claude-sonnet-4-5",
        )
        terminal.child.sendline("Make it.")
        terminal.until(lambda: "[y/n]" in terminal.text(), "the question")
        terminal.child.sendline("n: keep the tree clean")
        terminal.until(lambda: "── turn completed" in terminal.text(), "the turn's end")
    finally:
        terminal.kill()
    answered = [e for e in logged(daemon, thread) if e["kind"] == "approval.answered"]
    assert [(a["decision"], a["reason"]) for a in answered] == [("deny", "keep the tree clean")]
    assert not (tmp_path / "made").exists()
    assert "keep the tree clean" in json.dumps(fake.requests[-1].body)


def test_the_reply_is_markdown_wrapped_at_word_ends(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """On a narrow terminal, **bold** shows without its stars, a list as bullets, and a long
    paragraph wraps between words, never inside one."""
    thread = new_thread(daemon, fake, tmp_path)
    words = [f"word{n:02d}x" for n in range(40)]
    reply = "Some **strong** claim.\n\n- first item\n- second item\n\n" + " ".join(words)
    terminal = Terminal(daemon.home, condensate("chat", thread), columns=44)
    try:
        terminal.until(lambda: "you>" in terminal.text(), "the prompt")
        fake.queue(Text(reply), model="claude-sonnet-4-5")
        terminal.child.sendline("Format it.")
        terminal.until(lambda: "── turn completed" in terminal.text(), "the turn's end")
        lines = terminal.lines()
        assert "Some strong claim." in lines
        assert any(line.strip() == "• first item" for line in lines), lines
        shown = " ".join(lines).split()
        assert all(word in shown for word in words), lines
    finally:
        terminal.kill()


def test_leaving_puts_the_cursor_below_the_last_line(fake: FakeModelServer, chat: Terminal):
    """Ctrl-D leaves with 0 and the terminal as it was: no scroll region, the cursor on a
    fresh row below everything printed (where the shell's prompt comes next)."""
    fake.queue(Text("Goodbye then."), model="claude-sonnet-4-5")
    chat.child.sendline("Bye.")
    chat.until(lambda: "── turn completed" in chat.text(), "the turn's end")
    chat.child.sendeof()
    assert chat.exit_status() == 0
    lines = chat.lines()
    last = max(i for i, line in enumerate(lines) if line)
    assert chat.screen.cursor.y > last, (chat.screen.cursor.y, lines)
    assert chat.screen.margins is None
    assert "Goodbye then." in chat.text()


def test_piped_chat_sends_each_line_and_exits_as_the_last_turn_ended(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
):
    """Piped: each line is a message, each turn printed as `run` does, no colours; the last
    turn failed, so it exits 1 with that turn's reason, said once, on stderr."""
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
    assert (done.stdout + done.stderr).count("anthropic answered 401") == 1


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
