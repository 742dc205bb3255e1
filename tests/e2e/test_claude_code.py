"""The real ``claude`` CLI (the version package.json pins) driven by a real daemon against the
fake model server: the engine contract (``TestClaudeCodeEngine``: a turn windowed in flight,
a refusal that forces a fresh session, a killed CLI resumed, its transcript replayed, …) and
what is Claude Code's own, windows by fork. Asserted on what the fake received and on the
log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import pytest

from condensate.testing import daemon as testing_daemon
from condensate.testing.engines import CliEngineContract, Events, of_kind, uncached
from condensate.testing.fake_model import (
    Call,
    FakeModelServer,
    RecordedRequest,
    Reply,
    Text,
    ToolCalls,
)
from tests.e2e.conftest import CLAUDE
from tests.e2e.log import check_pairs, notices, turn_ended
from tests.integration.daemon import DaemonProcess, call

MODEL = "claude-opus-5-5"
CEILING = 40_000
"""Claude Code 2.1.332 sends ~19.4k tokens of its own to sonnet-4-5 (as the fake counts them):
a 40k ceiling (a 31.8k line) leaves room for a few large tool results before a window."""
BRIEF = "Count things with the shell, one command at a time. BRIEF-MARKER-cc1"


NOTES = "Notes on what I found so far: " + "the parser keeps its state in a table; " * 300
"""A long reply (about 2.7k tokens): cheap tiers never clear what the model said."""


def bash(command: str, text: str = "") -> ToolCalls:
    return ToolCalls([Call("Bash", {"command": command})], text=text)


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    process = DaemonProcess(
        tmp_path / "home",
        fake.url,
        extra_env={
            "CONDENSATE_MODEL_WINDOWS": json.dumps({f"anthropic:{MODEL}": 200_000}),
            "CONDENSATE_WINDOW_CEILING_CLAUDE": str(CEILING),
            "CONDENSATE_CURATOR_MODEL": "anthropic:claude-haiku-5-5",
            "CONDENSATE_WINDOW_DEADLINE_MS": "10000",
            "CONDENSATE_CLAUDE_BINARY": str(CLAUDE),
        },
    )
    process.home.mkdir()
    process.start()
    yield process
    process.close()


async def start_claude_thread(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    workdir: Path,
    *,
    brief: str = BRIEF,
    head: bool = False,
) -> str:
    """A thread on the claude engine, started through the daemon's API."""
    status, created = await call(
        session,
        daemon,
        "POST",
        "/threads",
        {
            "engine": "claude",
            "model": f"anthropic:{MODEL}",
            "cwd": str(workdir),
            "brief": brief,
            "head": head,
        },
    )
    assert status == 201, created
    return str(created["id"])


def generations(fake: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in fake.requests if r.endpoint == "messages" and r.model == MODEL]


def text_of(message: dict[str, Any]) -> str:
    return json.dumps(message["content"])


LINE = CEILING - 8_192
"""The thread's line: the ceiling less the output reserve."""


async def test_failures_past_the_line_are_summarized_and_the_session_forked(daemon, fake, workdir):
    """Failed commands are never cleared by a cheap tier: past the line the curator's summary
    is taken (by the gateway holding the request, whose reply ends the CLI's turn, or by the
    after-tool checkpoint when the view crossed first), and the session is forked at its
    root's first reply with the rendered window, the turn going on there; no request passes
    the ceiling (one past the line says why it went on), and a held reply is not logged as
    the model's."""
    fake.queue(
        *[bash(f"echo {i}", text=NOTES) for i in range(10)],
        Text("all counted"),
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_claude_thread(session, daemon, workdir)
        events = await turn_ended(session, daemon, thread)

    windows = [e for e in events if e["kind"] == "window"]
    assert windows, daemon.log_tail()
    assert {w["window_kind"] for w in windows} == {"summary"}
    # The view (estimated) and the request (counted) cross the line within a few hundred
    # tokens of each other; whichever crosses first takes the window.
    held = [e for e in events if e["kind"] == "system.line" and e["code"] == "gateway-held"]
    assert len(held) <= len(windows)
    assert all("new session" in e["text"] for e in held), held
    forked = notices(events, "session-forked")
    assert forked, [e for e in events if e["kind"] == "engine.notice"]
    started = notices(events, "session-started")[0]
    assert forked[0]["previous_session_id"] == started["session_id"]
    assert started["session_id"] in forked[0]["detail"]  # forked from the root
    said = [e["text"] for e in events if e["kind"] == "message.assistant"]
    assert not [t for t in said if t.startswith("[condensate]")]

    sent = generations(fake)
    assert max(r.input_tokens for r in sent) <= CEILING
    over = [r for r in sent if r.input_tokens > LINE]
    lines = [e["code"] for e in events if e["kind"] == "system.line"]
    assert not over or "over-line" in lines, lines  # held back (paused), and said so
    first = next(i for i, r in enumerate(sent) if "<condensate_window>" in json.dumps(r.body))
    opened = sent[first]
    messages = [m for m in opened.body["messages"] if m["role"] != "system"]
    # The fork keeps the root's first exchange (brief, first reply) and then the window.
    assert len(messages) == 3, [m["role"] for m in messages]
    assert "<condensate_window>" in text_of(messages[-1])
    assert BRIEF in text_of(messages[-1])
    assert sent[-1].reply == "text"
    check_pairs(daemon, thread)


class TestClaudeCodeEngine(CliEngineContract):
    """The engine contract (``condensate.testing.engines``), passed by the real CLI: a turn
    windowed in flight keeps its one session, a refusal restarts it fresh from the window."""

    engine = "claude"
    model = f"anthropic:{MODEL}"
    ceiling = CEILING
    settings: ClassVar[dict[str, str]] = {"CONDENSATE_WINDOW_CEILING_CLAUDE": str(CEILING)}
    endpoint = "messages"
    steps_past_line = 14
    steps_for_two_threads = 16

    def daemon_env(self, tmp_path: Path) -> dict[str, str]:
        return {"CONDENSATE_CLAUDE_BINARY": str(CLAUDE)}

    def bare_model(self) -> str:
        return MODEL

    def command(self, command: str, text: str = "") -> Reply:
        return bash(command, text)

    def conversation(self, request: RecordedRequest) -> list[Any]:
        return list(uncached(request.body["messages"]))

    def check_windowed_in_flight(self, events: Events, sent: list[RecordedRequest]) -> None:
        assert [w["window_kind"] for w in of_kind(events, "window")] == ["collapse"]
        assert len(notices(events, "session-started")) == 1
        assert not notices(events, "session-forked")
        assert not notices(events, "session-fresh")
        assert len(sent) == self.steps_past_line + 1

    def check_refusal_retried(self, retry: RecordedRequest, events: Events) -> None:
        fresh = notices(events, "session-fresh")
        assert fresh
        assert (
            fresh[0]["previous_session_id"] == notices(events, "session-started")[0]["session_id"]
        )
        messages = [m for m in retry.body["messages"] if m["role"] != "system"]
        assert len(messages) == 1  # fresh: nothing but the window
        assert "<condensate_window>" in text_of(messages[0])
        assert "seq 2 400" in text_of(messages[0])  # the kept work is in the window

    def session_record(
        self, daemon: testing_daemon.DaemonProcess, thread: str, events: Events
    ) -> Path:
        session_id = notices(events, "session-started")[0]["session_id"]
        (transcript,) = (daemon.home / "claude" / thread / "projects").rglob(f"{session_id}.jsonl")
        return transcript
