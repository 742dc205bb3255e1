"""Heads on the real ``codex`` CLI: at its line a head is asked to compact, and the ask is
answered by the head's own MCP tool, by an operator over HTTP, or by the deadline (the curator's
summary). Real daemon, fake model server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import Call, FakeModelServer, RecordedRequest, Text, ToolCalls
from tests.e2e.log import check_pairs, ended, kind, notices, until
from tests.e2e.test_codex import (
    MODEL,
    WINDOW_TAG,
    generations,
    shell,
    start_codex_thread,
    start_daemon,
    windows_in,
)
from tests.integration.daemon import DaemonProcess, call

WINDOW = 40_000
"""The head's line is the window less the output reserve and one tool result: 23,616 tokens.
Codex's own ~8.4k (with the MCP namespace) plus four ~3.5k-token outputs cross it, under the
hard limit (31,808)."""
BRIEF = "Count with the shell; compact when Condensate asks. BRIEF-MARKER-cxheads"
ASK_TEXT = "Condensate asks you to compact your context now"


def head_daemon(tmp_path: Path, fake: FakeModelServer, deadline_ms: int) -> DaemonProcess:
    return start_daemon(
        tmp_path,
        fake,
        CONDENSATE_MODEL_WINDOWS=json.dumps({f"openai:{MODEL}": WINDOW}),
        CONDENSATE_WINDOW_DEADLINE_MS=str(deadline_ms),
    )


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    """A daemon whose asks wait 60 s: long enough that only the head or an operator answers."""
    process = head_daemon(tmp_path, fake, 60_000)
    yield process
    process.close()


@pytest.fixture
def hasty_daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    """A daemon whose asks expire after 6 s."""
    process = head_daemon(tmp_path, fake, 6_000)
    yield process
    process.close()


def crossing() -> list[Any]:
    """Five commands; the output of the fourth or fifth takes the head over its line."""
    return [shell(f"seq {i} {i + 1500}", text=f"Counting, step {i}.") for i in range(5)]


def first_with_window(sent: list[RecordedRequest], after: int) -> RecordedRequest:
    """The first request after ``sent[after]`` that starts a Codex thread from a window (the
    interrupted thread may still send one request before it stops)."""
    for request in sent[after + 1 :]:
        if windows_in(request):
            return request
    msg = "no request started a Codex thread with the window"
    raise AssertionError(msg)


def window_text(request: RecordedRequest) -> str:
    """The one window message of a fresh thread's request, as text."""
    (window,) = windows_in(request)
    assert window["role"] == "user"
    return json.dumps(window)


async def test_a_head_answers_its_ask_with_its_own_mcp_tool(daemon, fake, workdir):
    """Over its line the head is asked in a follow-up turn, calls compact_context through the
    MCP server, and the next Codex thread starts from a window carrying its own summary."""
    fake.queue(
        *crossing(),
        Text("Counted."),
        ToolCalls(
            [
                Call(
                    "compact_context",
                    {"summary": "HEAD-SUMMARY: counted to 1504 with seq."},
                    namespace="mcp__condensate",
                )
            ],
            text="Compacting as asked.",
        ),
        *[Text(f"after the window {i}") for i in range(4)],
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_codex_thread(session, daemon, workdir, brief=BRIEF, head=True)
        events = await until(session, daemon, thread, kind("window"))
        events = await until(session, daemon, thread, kind("turn.ended"), events[-1]["seq"])

    ended(events)
    assert len([e for e in events if e["kind"] == "ask.opened"]) == 1
    answered = [e for e in events if e["kind"] == "ask.answered"]
    assert answered[0]["by"] == "thread"
    assert answered[0]["mode"] == "summary"
    window = next(e for e in events if e["kind"] == "window")
    assert window["author"] == "thread"
    assert window["summary"].startswith("HEAD-SUMMARY")
    assert notices(events, "session-fresh")

    sent = generations(fake)
    told = next(i for i, r in enumerate(sent) if ASK_TEXT in json.dumps(r.body["input"]))
    assert "mcp__condensate" in json.dumps(sent[told].body["input"])  # the tools are offered
    assert "HEAD-SUMMARY" in window_text(first_with_window(sent, told))
    check_pairs(daemon, thread)


async def asked_and_idle(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, workdir: Path
) -> tuple[str, list[dict[str, Any]]]:
    """A head crosses its line, is told of the ask, replies without compacting; turn over."""
    fake.queue(*crossing(), Text("Counted."), Text("Noted; not compacting myself."), model=MODEL)
    thread = await start_codex_thread(session, daemon, workdir, brief=BRIEF, head=True)
    events = await until(session, daemon, thread, kind("turn.ended"))
    ended(events)
    assert [e for e in events if e["kind"] == "ask.opened"]
    assert notices(events, "ask-delivered")
    assert not [e for e in events if e["kind"] == "window"]
    return thread, events


async def test_an_operator_answers_a_heads_ask_over_http(daemon, fake, workdir):
    """An operator's summary answers the pending ask; the head's next turn runs in a fresh
    Codex thread that starts from the window with the operator's summary and the new message."""
    async with aiohttp.ClientSession() as session:
        thread, events = await asked_and_idle(session, daemon, fake, workdir)
        status, body = await call(
            session,
            daemon,
            "POST",
            f"/threads/{thread}/compact",
            {"mode": "summary", "summary": "OPERATOR-SUMMARY: counted in five steps."},
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
    assert next(e for e in events if e["kind"] == "ask.answered")["by"] == "operator"
    window = next(e for e in events if e["kind"] == "window")
    assert window["author"] == "operator"
    opening = window_text(generations(fake)[before])
    assert "OPERATOR-SUMMARY" in opening
    assert "NEXT-STEP please" in opening
    check_pairs(daemon, thread)


async def test_an_unanswered_ask_is_cut_by_the_curator_at_its_deadline(hasty_daemon, fake, workdir):
    """Nobody answers: at the deadline the curator's summary is taken and the idle engine starts
    a fresh Codex thread with the window at once; the next turn runs there."""
    daemon = hasty_daemon
    async with aiohttp.ClientSession() as session:
        thread, events = await asked_and_idle(session, daemon, fake, workdir)
        last = events[-1]["seq"]
        events = await until(
            session,
            daemon,
            thread,
            lambda e: e["kind"] == "engine.notice" and e["notice"] == "session-fresh",
            last,
        )
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
    request = generations(fake)[before]
    assert WINDOW_TAG in window_text(request)
    last_input = json.dumps(request.body["input"][-1])
    assert "NEXT-STEP please" in last_input  # the new message follows the window
    check_pairs(daemon, thread)
