"""Heads on the real ``claude`` CLI: at its line a head is asked to compact, and the ask is
answered by the head's own MCP tool, by an operator over HTTP, or by the deadline (the curator's
summary). Real daemon, fake model server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import (
    Call,
    FakeModelServer,
    RecordedRequest,
    Text,
    ToolCalls,
)
from tests.e2e.conftest import CLAUDE
from tests.e2e.log import check_pairs, ended, kind, notices, until
from tests.e2e.test_claude_code import (
    MODEL,
    bash,
    generations,
    start_claude_thread,
)
from tests.integration.daemon import DaemonProcess, call

WINDOW = 52_000
"""The head's line is the window less the output reserve and one tool result: 35,616 tokens.
Claude Code's own ~12.4k on its default model (claude-opus-5-5) plus four ``seq 1 2500`` (~6.5k
each, as the fake counts, with a turn's signed thinking) crosses it at the fourth, under the
hard limit (43,808). Larger outputs Claude Code would move to a file."""
BRIEF = "Count with the shell; compact when Condensate asks. BRIEF-MARKER-heads"
MCP_TOOL = "mcp__condensate__compact_context"
ASK_TEXT = "Condensate asks you to compact your context now"


def start_daemon(tmp_path: Path, fake: FakeModelServer, deadline_ms: int) -> DaemonProcess:
    process = DaemonProcess(
        tmp_path / "home",
        fake.url,
        extra_env={
            "CONDENSATE_MODEL_WINDOWS": json.dumps({f"anthropic:{MODEL}": WINDOW}),
            "CONDENSATE_CURATOR_MODEL": "anthropic:claude-haiku-5-5",
            "CONDENSATE_WINDOW_DEADLINE_MS": str(deadline_ms),
            "CONDENSATE_CLAUDE_BINARY": str(CLAUDE),
        },
    )
    process.home.mkdir()
    process.start()
    return process


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    """A daemon whose asks wait 60 s: long enough that only the head or an operator answers."""
    process = start_daemon(tmp_path, fake, 60_000)
    yield process
    process.close()


@pytest.fixture
def hasty_daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    """A daemon whose asks expire after 6 s."""
    process = start_daemon(tmp_path, fake, 6_000)
    yield process
    process.close()


async def start_head(session: aiohttp.ClientSession, daemon: DaemonProcess, workdir: Path) -> str:
    return await start_claude_thread(session, daemon, workdir, brief=BRIEF, head=True)


def crossing() -> list[Any]:
    """Four commands; the fourth's output takes the head over its line."""
    return [bash("seq 1 2500", text=f"Counting, step {i}.") for i in range(4)]


def first_window_request(sent: list[RecordedRequest], after: int) -> RecordedRequest:
    """The first request after ``sent[after]`` that does not continue the old session (an
    interrupted session may still send one request before it stops)."""
    for request in sent[after + 1 :]:
        if "<condensate_window>" in json.dumps(request.body["messages"]):
            return request
        assert len(request.body["messages"]) > 1, "a new session started without the window"
    msg = "no request started a session with the window"
    raise AssertionError(msg)


def opens_with_window(request: RecordedRequest) -> str:
    """The new session's last user message is the rendered window; returns its text."""
    messages = [m for m in request.body["messages"] if m["role"] != "system"]
    last = json.dumps(messages[-1]["content"])
    assert "<condensate_window>" in last
    assert all("<condensate_window>" not in json.dumps(m["content"]) for m in messages[:-1])
    return last


async def test_a_head_answers_its_ask_with_its_own_mcp_tool(daemon, fake, workdir):
    """Over its line the head is asked in a follow-up line, calls compact_context through the
    MCP server, and the next session opens with a window carrying the head's own summary."""
    fake.queue(
        *crossing(),
        Text("Counted."),
        ToolCalls(
            [Call(MCP_TOOL, {"summary": "HEAD-SUMMARY: counted to 9000 with seq."})],
            text="Compacting as asked.",
        ),
        *[Text(f"after the window {i}") for i in range(4)],
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_head(session, daemon, workdir)
        events = await until(session, daemon, thread, kind("window"))
        events = await until(session, daemon, thread, kind("turn.ended"), events[-1]["seq"])

    ended(events)
    asks = [e for e in events if e["kind"] == "ask.opened"]
    assert len(asks) == 1
    answered = [e for e in events if e["kind"] == "ask.answered"]
    assert answered[0]["by"] == "thread"
    assert answered[0]["mode"] == "summary"
    window = next(e for e in events if e["kind"] == "window")
    assert window["author"] == "thread"
    assert window["summary"].startswith("HEAD-SUMMARY")

    sent = generations(fake)
    told = next(i for i, r in enumerate(sent) if ASK_TEXT in json.dumps(r.body["messages"]))
    # Claude Code 2.1.332 defers MCP tools behind ToolSearch: named in the request, not in tools.
    assert MCP_TOOL in json.dumps(sent[told].body)
    opening = opens_with_window(first_window_request(sent, told))
    assert "HEAD-SUMMARY" in opening
    check_pairs(daemon, thread)


async def asked_and_idle(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, workdir: Path
) -> tuple[str, list[dict[str, Any]]]:
    """A head crosses its line, is told of the ask, replies without compacting; turn over."""
    fake.queue(*crossing(), Text("Counted."), Text("Noted; not compacting myself."), model=MODEL)
    thread = await start_head(session, daemon, workdir)
    events = await until(session, daemon, thread, kind("turn.ended"))
    ended(events)
    assert [e for e in events if e["kind"] == "ask.opened"]
    assert notices(events, "ask-delivered")
    assert not [e for e in events if e["kind"] == "window"]
    return thread, events


async def test_an_operator_answers_a_heads_ask_over_http(daemon, fake, workdir):
    """An operator's summary answers the pending ask; the head's next turn starts a new session
    whose first message is the window with the operator's summary and the new message."""
    async with aiohttp.ClientSession() as session:
        thread, events = await asked_and_idle(session, daemon, fake, workdir)
        status, body = await call(
            session,
            daemon,
            "POST",
            f"/threads/{thread}/compact",
            {"mode": "summary", "summary": "OPERATOR-SUMMARY: counted in four steps."},
        )
        assert status == 200, body
        before = len(generations(fake))
        fake.queue(Text("carrying on"), model=MODEL)
        status, _ = await call(
            session, daemon, "POST", f"/threads/{thread}/messages", {"text": "NEXT-STEP please"}
        )
        assert status == 202
        last = events[-1]["seq"]
        events = await until(session, daemon, thread, kind("turn.ended"), last)

    ended(events, last)
    answered = [e for e in events if e["kind"] == "ask.answered"]
    assert answered[0]["by"] == "operator"
    window = next(e for e in events if e["kind"] == "window")
    assert window["author"] == "operator"
    sent = generations(fake)
    opening = opens_with_window(sent[before])
    assert "OPERATOR-SUMMARY" in opening
    assert "NEXT-STEP please" in opening
    check_pairs(daemon, thread)


async def test_an_unanswered_ask_is_cut_by_the_curator_at_its_deadline(hasty_daemon, fake, workdir):
    """Nobody answers: at the deadline the curator's summary is taken and the idle engine
    restarts its session at once; the next request opens that session with the window."""
    daemon = hasty_daemon
    async with aiohttp.ClientSession() as session:
        thread, events = await asked_and_idle(session, daemon, fake, workdir)
        last = events[-1]["seq"]
        events = await until(
            session,
            daemon,
            thread,
            lambda e: e["kind"] == "engine.notice" and e["notice"].startswith("session-"),
            last,
        )
        restarted = [
            e
            for e in events
            if e["seq"] > last and e["kind"] == "engine.notice" and e["notice"] != "ask-delivered"
        ]
        assert restarted[0]["notice"] in ("session-forked", "session-fresh"), restarted
        before = len(generations(fake))
        fake.queue(Text("carrying on"), model=MODEL)
        status, _ = await call(
            session, daemon, "POST", f"/threads/{thread}/messages", {"text": "NEXT-STEP please"}
        )
        assert status == 202
        last = events[-1]["seq"]
        events = await until(session, daemon, thread, kind("turn.ended"), last)

    window = next(e for e in events if e["kind"] == "window")
    assert window["author"] == "curator"
    assert window["ask"] is not None
    ended(events, last)
    sent = generations(fake)
    opening = opens_with_window(sent[before])
    assert "NEXT-STEP please" in opening
    check_pairs(daemon, thread)
