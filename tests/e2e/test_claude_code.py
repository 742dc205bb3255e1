"""The real ``claude`` CLI (the version package.json pins) driven by a real daemon against the
fake model server: windows by fork, a refusal that forces a fresh session, and a killed CLI
resumed. Asserted on what the fake received and on the log."""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.events import ToolResult, UserMessage
from condensate.replay import ReplayConfig, load, replay
from condensate.testing.fake_model import (
    Call,
    FakeModelServer,
    Overflow,
    RecordedRequest,
    Slow,
    Text,
    ToolCalls,
)
from tests.e2e.conftest import CLAUDE
from tests.e2e.log import check_pairs, notices, started_pid, turn_ended
from tests.integration.daemon import DaemonProcess, call, wait_for

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


def uncached(value: Any) -> str:
    """``value`` as JSON without Claude Code's ``cache_control`` markers, which it moves to
    the newest block on every request."""

    def strip(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: strip(v) for k, v in item.items() if k != "cache_control"}
        if isinstance(item, list):
            return [strip(v) for v in item]
        return item

    return json.dumps(strip(value))


def text_of(message: dict[str, Any]) -> str:
    return json.dumps(message["content"])


LINE = CEILING - 8_192
"""The thread's line: the ceiling less the output reserve."""


async def test_a_long_turn_past_the_line_is_collapsed_in_flight_without_a_restart(
    daemon, fake, workdir
):
    """Large shell outputs push the next request past the line; the gateway holds it, the
    runtime takes a collapse, and the request goes on with receipts in place of the cleared
    results: no request over the line, no new session, and every later request of the
    session starts with the one before it, byte for byte."""
    fake.queue(
        *[bash(f"seq {i} {i + 700}", text=f"Step {i}.") for i in range(14)],
        Text("all counted"),
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_claude_thread(session, daemon, workdir)
        events = await turn_ended(session, daemon, thread)

    windows = [e for e in events if e["kind"] == "window"]
    assert [w["window_kind"] for w in windows] == ["collapse"], daemon.log_tail()
    assert len(notices(events, "session-started")) == 1
    assert not notices(events, "session-forked")
    assert not notices(events, "session-fresh")
    sent = generations(fake)
    assert len(sent) == 15
    assert max(r.input_tokens for r in sent) <= LINE
    first = next(i for i, r in enumerate(sent) if "receipt seq" in json.dumps(r.body))
    assert sent[first].input_tokens < sent[first - 1].input_tokens
    for before, after in itertools.pairwise(sent[first:]):
        kept = after.body["messages"][: len(before.body["messages"])]
        assert uncached(kept) == uncached(before.body["messages"])
    check_pairs(daemon, thread)


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


async def test_a_prompt_too_long_forces_a_window_and_a_fresh_session(daemon, fake, workdir):
    """The provider refuses mid-session although the count was under the ceiling; the refusal
    is logged, forces a window, and the turn goes on in a fresh session that opens with it."""
    fake.queue(
        bash("seq 1 400", text="First count."),
        bash("seq 2 400", text="Second count."),
        Overflow(),
        Text("finished after the refusal"),
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_claude_thread(session, daemon, workdir)
        events = await turn_ended(session, daemon, thread)

    assert any(e["kind"] == "model.refused" for e in events)
    windows = [e for e in events if e["kind"] == "window"]
    assert windows
    assert windows[0]["forced"]
    fresh = notices(events, "session-fresh")
    assert fresh
    assert fresh[0]["previous_session_id"] == notices(events, "session-started")[0]["session_id"]
    final = [e for e in events if e["kind"] == "message.assistant"][-1]
    assert final["text"] == "finished after the refusal"

    sent = generations(fake)
    refused = next(i for i, r in enumerate(sent) if r.reply == "overflow")
    retry = sent[refused + 1]
    messages = [m for m in retry.body["messages"] if m["role"] != "system"]
    assert len(messages) == 1  # fresh: nothing but the window
    assert "<condensate_window>" in text_of(messages[0])
    assert "seq 2 400" in text_of(messages[0])  # the kept work is in the window
    check_pairs(daemon, thread)


async def test_a_killed_cli_is_resumed_on_the_same_session(daemon, fake, workdir):
    """SIGKILL of the claude process while the model streams: the engine resumes the same
    Claude session, nothing logged before the kill is lost, and the turn completes."""
    fake.queue(
        bash("echo one-before-the-kill", text="Echoing."),
        Slow(Text("never finished"), chunk_delay=0.5, chunks=20),
        Text("finished after the resume"),
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_claude_thread(session, daemon, workdir)
        events = await wait_for(
            session, daemon, thread, lambda e: e["kind"] == "tool.result", seconds=60
        )
        deadline = time.monotonic() + 60
        while not any(r.reply == "slow:text" for r in fake.requests):
            assert time.monotonic() < deadline, "the slow reply was never asked for"
            await anyio.sleep(0.05)
        await anyio.sleep(0.5)
        os.kill(started_pid(events), signal.SIGKILL)
        events = await turn_ended(session, daemon, thread)

    before = [e for e in events if e["kind"] == "tool.result"]
    assert before[0]["output"].strip() == "one-before-the-kill"
    assert notices(events, "cli-exited")
    resumed = notices(events, "session-resumed")
    assert resumed
    assert resumed[0]["session_id"] == notices(events, "session-started")[0]["session_id"]
    final = [e for e in events if e["kind"] == "message.assistant"][-1]
    assert final["text"] == "finished after the resume"

    sent = generations(fake)
    after = sent[-1]
    assert after.reply == "text"
    body = json.dumps(after.body["messages"])
    assert BRIEF in body
    assert "one-before-the-kill" in body
    check_pairs(daemon, thread)


async def test_the_transcript_claude_code_wrote_replays(daemon, fake, workdir):
    """The session transcript the real CLI wrote for a thread loads into ``condensate
    replay``: the brief, each command with its result (a failing one as an error), and a
    replay whose retention checks pass."""
    fake.queue(
        bash("echo TRANSCRIPT-ONE", text="First."),
        bash("ls /no-such-dir-here", text="Second."),
        Text("done with both"),
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_claude_thread(session, daemon, workdir)
        events = await turn_ended(session, daemon, thread)
    session_id = notices(events, "session-started")[0]["session_id"]
    daemon.close()
    (transcript,) = (daemon.home / "claude" / thread / "projects").rglob(f"{session_id}.jsonl")

    recording = load(transcript)
    assert recording.source == "claude"
    assert any(BRIEF in e.text for e in recording.events if isinstance(e, UserMessage))
    results = [e for e in recording.events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False, True]
    assert "TRANSCRIPT-ONE" in results[0].output
    report = await replay(recording, ReplayConfig(window=200_000, policies=("condensate",)))
    assert report.results["condensate"].retention.passed
    assert report.results["condensate"].calls == recording.model_calls == 3


async def test_two_threads_and_a_slow_curator_stay_under_the_ceiling(daemon, fake, workdir):
    """Two Claude Code threads cross their line at the same time while the curator takes 6 s
    a summary: every request the provider receives stays under the ceiling (the gateway holds
    each over the line until its window is taken), and both turns complete."""
    fake.queue(*[bash(f"echo {i}", text=NOTES) for i in range(16)], model=MODEL)
    fake.queue(Text("all counted"), Text("all counted"), model=MODEL)
    slow = Slow(Text("Summary: notes on the parser were taken."), chunk_delay=0.6, chunks=10)
    fake.queue(slow, slow, slow, slow, model="claude-haiku-5-5")
    async with aiohttp.ClientSession() as session:
        first = await start_claude_thread(session, daemon, workdir)
        second = await start_claude_thread(session, daemon, workdir)
        events = [
            await turn_ended(session, daemon, first),
            await turn_ended(session, daemon, second),
        ]
    windows = [e for log in events for e in log if e["kind"] == "window"]
    assert windows, daemon.log_tail()
    sent = generations(fake)
    assert max(r.input_tokens for r in sent) <= CEILING
    check_pairs(daemon, first)
    check_pairs(daemon, second)
