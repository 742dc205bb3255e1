"""``condensate claude`` in a real pseudo-terminal, its screen read back: the pinned Claude
Code's own TUI, a person typing, a session that runs past its line and is managed in flight
(windows, never a request over the ceiling, no signed thinking refused), the person's own
``/compact``, and the session's end when the person quits."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio

from condensate.client import DaemonClient
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.e2e.conftest import CLAUDE, refusal
from tests.integration.daemon import running_daemon
from tests.integration.terminal import Terminal, condensate

MODEL = "claude-opus-5-5"
KEY = "sk-person-0123456789abcdefghij"
STEPS = 6
CEILING = 60_000
PROMPT = "\u276f"
"""What Claude Code's input line opens with (a heavy right-pointing angle)."""


def person(tmp_path: Path, workdir: Path) -> dict[str, str]:
    """A person's home where Claude Code was set up before (onboarding done, the folder
    trusted, their key approved) and their shell's environment."""
    home = tmp_path / "person"
    home.mkdir()
    settings = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
        "projects": {str(workdir): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env |= {"HOME": str(home), "ANTHROPIC_API_KEY": KEY, "PATH": f"{CLAUDE.parent}:{env['PATH']}"}
    return env


def typed(term: Terminal, text: str, reply: str, seconds: float = 60.0) -> str:
    """Type ``text`` at Claude Code's prompt, Enter, and wait for ``reply`` on the screen:
    the screen then."""
    term.child.send(text)
    term.until(lambda: text in term.text(), f"{text!r} typed")
    term.child.send("\r")
    term.until(lambda: reply in term.text(), repr(reply), seconds)
    return term.text()


def all_events(client: DaemonClient, thread: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.call("GET", f"/threads/{thread}/tail?after={after}&limit=1000&history=1")
        events += page["events"]
        if not page["hasMore"]:
            return events
        after = page["nextAfter"]


async def test_a_long_interactive_session_is_managed_in_flight(
    tmp_path: Path, workdir: Path
) -> None:
    """Six steps, each reading a long output, run the session past its line: windows are
    taken in flight (the CLI never restarted), no request the provider got was over the
    thread's ceiling, none was refused for its signed thinking, the person saw a line for each
    window; the person's ``/compact`` is the CLI's own (logged as a changed conversation);
    quitting ends the session."""
    # The model's real window (1M), the operator's cap on Claude Code's ceiling at 60,000 so
    # that six long outputs pass the line.
    async with FakeModelServer(window=1_000_000) as fake:
        for step in range(STEPS):
            fake.queue(
                ToolCalls([Call("Bash", {"command": f"seq {step} 6000"})]),
                Text(f"step {step} read"),
                model=MODEL,
            )
        # Claude Code's /compact wants an <analysis> and a <summary> block (else it asks again).
        summary = "<analysis>Six reads.</analysis>\n<summary>Six outputs were read.</summary>"
        fake.queue(Text(summary), Text("after compact"), model=MODEL)
        home = tmp_path / "daemon"
        home.mkdir()
        settings = {
            "CONDENSATE_WINDOW_CEILING_CLAUDE": str(CEILING),
            # The curator on a model of its own: its calls take no reply scripted for the CLI.
            "CONDENSATE_CURATOR_MODEL": "anthropic:claude-haiku-5-5",
        }
        with running_daemon(home, fake.url, **settings) as daemon:
            env = person(tmp_path, workdir)
            argv = condensate("claude", "--allowedTools", "Bash(seq:*)")
            term = Terminal(home, argv, rows=40, columns=120, env=env, cwd=workdir)
            try:
                await anyio.to_thread.run_sync(
                    term.until, lambda: PROMPT in term.text(), "Claude Code's prompt"
                )
                screens = [
                    await anyio.to_thread.run_sync(typed, term, f"step {step}", f"step {step} read")
                    for step in range(STEPS)
                ]
                await anyio.to_thread.run_sync(typed, term, "/compact", "Compacted")
                await anyio.to_thread.run_sync(typed, term, "go on", "after compact")
                term.child.send("/exit")
                await anyio.to_thread.run_sync(term.until, lambda: "/exit" in term.text(), "/exit")
                term.child.send("\r")
                status = await anyio.to_thread.run_sync(term.exit_status)
            finally:
                term.kill()
            client = DaemonClient(daemon.url, daemon.token)
            thread = client.call("GET", "/threads")["threads"][0]
            events = all_events(client, thread["id"])
    assert status == 0
    refused = [refusal(r) for r in fake.requests if r.thinking is not None and r.thinking.refused]
    assert refused == []
    windows = [e for e in events if e["kind"] == "window"]
    assert any(w["window_kind"] in ("microcompact", "collapse", "summary") for w in windows), [
        (e["kind"], e.get("code")) for e in events
    ]
    usages = [e for e in events if e["kind"] == "model.usage" and not e.get("side")]
    ceiling = thread["ceiling"]
    assert ceiling == CEILING
    prompts = [u["input"] + u["cache_read"] + u["cache_write"] for u in usages]
    assert max(prompts) <= ceiling, (prompts, ceiling)
    lines = [e["code"] for e in events if e["kind"] == "system.line"]
    assert "cli-conversation-changed" in lines
    # The person saw each window in their conversation, as one line.
    assert any("[condensate window] summary freed" in screen for screen in screens)
    assert not any(e["kind"] == "engine.notice" for e in events)  # never restarted
    assert events[-1]["kind"] == "turn.ended"
    assert events[-1]["outcome"] == "completed"


async def test_ctrl_c_is_the_clis_own(tmp_path: Path, workdir: Path) -> None:
    """Ctrl-C reaches the person's Claude Code alone, as without Condensate: once at its
    prompt it only warns (the wrapper goes on), twice and the CLI exits; the wrapper exits
    with the CLI's code, and the session's turn ends."""
    async with FakeModelServer(window=1_000_000) as fake:
        home = tmp_path / "daemon"
        home.mkdir()
        with running_daemon(home, fake.url) as daemon:
            env = person(tmp_path, workdir)
            term = Terminal(home, condensate("claude"), rows=40, columns=120, env=env, cwd=workdir)
            try:
                await anyio.to_thread.run_sync(
                    term.until, lambda: PROMPT in term.text(), "Claude Code's prompt"
                )
                term.child.sendcontrol("c")
                await anyio.to_thread.run_sync(
                    term.until, lambda: "again to exit" in term.text(), "Claude Code's warning"
                )
                assert term.child.isalive()
                term.child.sendcontrol("c")
                status = await anyio.to_thread.run_sync(term.exit_status)
            finally:
                term.kill()
            client = DaemonClient(daemon.url, daemon.token)
            thread = client.call("GET", "/threads")["threads"][0]
            events = all_events(client, thread["id"])
    assert status in (0, 130)
    assert events[-1]["kind"] == "turn.ended"
