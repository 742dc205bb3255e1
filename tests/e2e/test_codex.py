"""The real ``codex`` CLI (the version package.json pins, as ``codex app-server``) driven by a
real daemon against the fake model server's Responses API: the engine contract
(``TestCodexEngine``: a turn windowed in flight, a refusal that forces a fresh Codex thread, a
killed app-server resumed, a daemon restart, its rollout replayed, …) and what is Codex's own:
a summary that restarts the task in a fresh Codex thread, Codex's own compaction with
Condensate's windowing off, a steer joining a turn, and how a missing or dying Codex fails.
Asserted on what the fake received and on the log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import anyio
import pytest

from condensate.testing import daemon as testing_daemon
from condensate.testing.engines import CliEngineContract, Events
from condensate.testing.fake_model import (
    Call,
    Fail,
    FakeModelServer,
    RecordedRequest,
    Reply,
    Text,
    ToolCalls,
    Usage,
)
from tests.e2e.conftest import CODEX
from tests.e2e.log import check_pairs, notices, started_pid, turn_ended, until
from tests.integration.daemon import DaemonProcess, call, wait_for

MODEL = "gpt-5.5"
WINDOW = 100_000
CEILING = 30_000
LINE = CEILING - 8_192
"""Codex 0.171.0 sends ~7.8k tokens of its own (as the fake counts them): a 30k ceiling (a
21.8k line) is crossed after a few ~4k-token command outputs."""
BRIEF = "Count things with the shell, one command at a time. BRIEF-MARKER-cx1"
WINDOW_TAG = "<condensate_window>"


NOTES = "Notes on what I found so far: " + "the parser keeps its state in a table; " * 300
"""A long reply (about 2.7k tokens): cheap tiers never clear what the model said."""


def shell(command: str, text: str = "") -> ToolCalls:
    return ToolCalls([Call("exec_command", {"cmd": command})], text=text)


def start_daemon(tmp_path: Path, fake: FakeModelServer, **extra: str) -> DaemonProcess:
    process = DaemonProcess(
        tmp_path / "home",
        fake.url,
        extra_env={
            "CONDENSATE_MODEL_WINDOWS": json.dumps({f"openai:{MODEL}": WINDOW}),
            "CONDENSATE_WINDOW_CEILING_PI": str(CEILING),
            "CONDENSATE_CURATOR_MODEL": "anthropic:claude-haiku-5-5",
            "CONDENSATE_WINDOW_DEADLINE_MS": "10000",
            "CONDENSATE_CODEX_BINARY": str(CODEX),
            **extra,
        },
    )
    process.home.mkdir()
    process.start()
    return process


@pytest.fixture
def daemon(tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
    process = start_daemon(tmp_path, fake)
    yield process
    process.close()


async def start_codex_thread(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    workdir: Path,
    *,
    brief: str = BRIEF,
    head: bool = False,
) -> str:
    """A thread on the codex engine, started through the daemon's API."""
    status, created = await call(
        session,
        daemon,
        "POST",
        "/threads",
        {
            "engine": "codex",
            "model": f"openai:{MODEL}",
            "cwd": str(workdir),
            "brief": brief,
            "persona": "PERSONA-MARKER: you count carefully.",
            "head": head,
        },
    )
    assert status == 201, created
    return str(created["id"])


def generations(fake: FakeModelServer) -> list[RecordedRequest]:
    """Codex's requests for the thread's model (the curator uses another)."""
    return [r for r in fake.requests if r.endpoint == "responses" and r.model == MODEL]


def windows_in(request: RecordedRequest) -> list[dict[str, Any]]:
    """The input items of a request that carry a rendered window."""
    return [i for i in request.body["input"] if WINDOW_TAG in json.dumps(i)]


async def test_long_replies_past_the_line_go_on_in_a_fresh_codex_thread(daemon, fake, workdir):
    """The model's own words are never cleared by a cheap tier: past the line the gateway
    holds the request, the summary is taken, Condensate's own reply ends Codex's turn, and a
    fresh Codex thread gets the window as one message and goes on; no request passes the
    ceiling and the held reply is not logged as the model's."""
    fake.queue(
        *[shell(f"echo {i}", text=NOTES) for i in range(8)],
        Text("all counted"),
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_codex_thread(session, daemon, workdir)
        events = await turn_ended(session, daemon, thread)
    assert [e for e in events if e["kind"] == "window"], daemon.log_tail()
    started = notices(events, "session-started")[0]
    fresh = notices(events, "session-fresh")
    assert fresh, [e for e in events if e["kind"] == "engine.notice"]
    assert fresh[0]["previous_session_id"] == started["session_id"]
    assert fresh[0]["session_id"] != started["session_id"]
    said = [e["text"] for e in events if e["kind"] == "message.assistant"]
    assert said[-1] == "all counted"
    assert not [t for t in said if t.startswith("[condensate]")]

    sent = generations(fake)
    first = next(i for i, r in enumerate(sent) if windows_in(r))
    opened = sent[first]
    (window,) = windows_in(opened)
    assert window["type"] == "message"
    assert window["role"] == "user"
    assert BRIEF in json.dumps(window)
    assert "PERSONA-MARKER" in json.dumps(opened.body["input"])  # same persona
    # A fresh thread: none of the old thread's calls came along outside the window.
    assert not [i for i in opened.body["input"] if i.get("type") == "function_call"]
    assert max(r.input_tokens for r in sent) <= CEILING
    check_pairs(daemon, thread)


async def test_with_windowing_off_codex_compacts_and_condensate_records_it(tmp_path, fake, workdir):
    """CONDENSATE_CODEX_WINDOWING=0: no catalog pushes Codex's compaction away and Condensate
    takes no window; when Codex compacts on its own, the log records a notice."""
    daemon = start_daemon(tmp_path, fake, CONDENSATE_CODEX_WINDOWING="0")
    try:
        fake.queue(
            Usage(shell("echo before-compaction", text="Echoing."), prompt_tokens=250_000),
            Text("CODEX-SUMMARY: echoed once."),
            Text("done after the compaction"),
            model=MODEL,
        )
        async with aiohttp.ClientSession() as session:
            thread = await start_codex_thread(session, daemon, workdir)
            events = await turn_ended(session, daemon, thread)
    finally:
        daemon.close()

    assert notices(events, "codex-compacted"), [e["kind"] for e in events]
    assert not [e for e in events if e["kind"] == "window"]
    final = [e for e in events if e["kind"] == "message.assistant"][-1]
    assert final["text"] == "done after the compaction"
    config = (daemon.home / "codex" / thread / "config.toml").read_text()
    assert "model_catalog_json" not in config
    kinds = [
        json.loads(r.headers.get("x-codex-turn-metadata", "{}")).get("request_kind")
        for r in generations(fake)
    ]
    assert "compaction" in kinds
    check_pairs(daemon, thread)


async def test_a_summary_the_curator_cannot_write_fails_the_send(daemon, fake, workdir):
    """A window that needs a summary is due and every model of the curator's chain fails: the
    turn ends failed with that reason, uncut, instead of growing towards Codex's own
    compaction."""
    fake.queue(Fail(500), Fail(500), model="claude-haiku-5-5")
    fake.queue(
        # Two ~8k-token outputs cross the line (the cheap tiers keep the 3 most recent).
        *[shell(f"seq {i} {i + 3000}", text=f"Step {i}.") for i in range(2)],
        # Then the curator's call on the thread's model and Codex's next requests all fail,
        # whichever comes first.
        *[Fail(500) for _ in range(8)],
        model=MODEL,
    )
    async with aiohttp.ClientSession() as session:
        thread = await start_codex_thread(session, daemon, workdir)
        events = await wait_for(
            session, daemon, thread, lambda e: e["kind"] == "turn.ended", seconds=120
        )

    ended = next(e for e in events if e["kind"] == "turn.ended")
    assert ended["outcome"] == "failed"
    assert "curator could not write its summary" in ended["reason"]
    assert "does not fall back to Codex's own compaction" in ended["reason"]
    assert [e for e in events if e["kind"] == "system.line" and e["code"] == "summary-missed"]
    assert not [e for e in events if e["kind"] == "window"]
    assert not notices(events, "codex-compacted")
    check_pairs(daemon, thread)


async def test_a_steer_during_a_turn_joins_it(daemon, fake, workdir):
    """A human message posted while Codex runs a command reaches the model in the same turn
    (``turn/steer``): the next request carries it, and no second turn is started for it."""
    fake.queue(shell("sleep 2", text="Sleeping."), Text("saw the steer"), model=MODEL)
    async with aiohttp.ClientSession() as session:
        thread = await start_codex_thread(session, daemon, workdir)
        await until(session, daemon, thread, lambda e: e["kind"] == "engine.notice")
        deadline = time.monotonic() + 30
        while len(generations(fake)) < 1:
            assert time.monotonic() < deadline, "Codex never asked for its first reply"
            await anyio.sleep(0.05)
        status, _ = await call(
            session, daemon, "POST", f"/threads/{thread}/messages", {"text": "STEER-MARKER stop"}
        )
        assert status == 202
        events = await turn_ended(session, daemon, thread)

    assert len([e for e in events if e["kind"] == "turn.started"]) == 1
    assert [e for e in events if e["kind"] == "message.assistant"][-1]["text"] == "saw the steer"
    second = generations(fake)[1]
    assert "STEER-MARKER stop" in json.dumps(second.body["input"])
    check_pairs(daemon, thread)


async def failed_turn(daemon: DaemonProcess, workdir: Path) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        thread = await start_codex_thread(session, daemon, workdir)
        events = await until(session, daemon, thread, lambda e: e["kind"] == "turn.ended")
    return next(e for e in events if e["kind"] == "turn.ended")


async def test_a_missing_codex_fails_the_turn_naming_what_to_install(tmp_path, fake, workdir):
    """CONDENSATE_CODEX_BINARY names nothing: the turn fails with the install commands."""
    daemon = start_daemon(tmp_path, fake, CONDENSATE_CODEX_BINARY=str(tmp_path / "no-codex"))
    try:
        ended = await failed_turn(daemon, workdir)
    finally:
        daemon.close()
    assert ended["outcome"] == "failed"
    assert "npm ci" in ended["reason"]
    assert "@openai/codex@0.171.0" in ended["reason"]


async def test_an_app_server_that_dies_at_start_fails_the_turn_with_its_stderr(
    tmp_path, fake, workdir
):
    """A Codex whose app-server exits before answering ``initialize``: the turn fails with
    what it wrote to stderr, and the next turn tries again rather than writing to the dead
    process."""
    script = tmp_path / "codex"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = app-server ]; then echo "APP-SERVER-BOOM" >&2; exit 3; fi\n'
        f'exec "{CODEX}" "$@"\n'
    )
    script.chmod(0o755)
    daemon = start_daemon(tmp_path, fake, CONDENSATE_CODEX_BINARY=str(script))
    try:
        ended = await failed_turn(daemon, workdir)
        assert ended["outcome"] == "failed"
        assert "exited as it started" in ended["reason"]
        assert "APP-SERVER-BOOM" in ended["reason"]
        async with aiohttp.ClientSession() as session:
            thread = (await call(session, daemon, "GET", "/threads"))[1]["threads"][0]["id"]
            status, _ = await call(
                session, daemon, "POST", f"/threads/{thread}/messages", {"text": "again"}
            )
            assert status == 202
            events = await until(
                session, daemon, thread, lambda e: e["kind"] == "turn.ended", ended["seq"]
            )
        again = [e for e in events if e["kind"] == "turn.ended"][-1]
        assert "APP-SERVER-BOOM" in again["reason"]
    finally:
        daemon.close()


async def test_a_tools_list_is_refused_at_creation(daemon, fake, workdir):
    """Codex keeps its own tool set and cannot offer fewer: a thread created with a tools
    list is refused with 422 unsupported-tools and a sentence saying so, and no thread is
    kept."""
    async with aiohttp.ClientSession() as session:
        status, refused = await call(
            session,
            daemon,
            "POST",
            "/threads",
            {
                "engine": "codex",
                "model": f"openai:{MODEL}",
                "cwd": str(workdir),
                "brief": BRIEF,
                "tools": ["Read", "Bash"],
            },
        )
        _, listed = await call(session, daemon, "GET", "/threads")
    assert (status, refused["error"]) == (422, "unsupported-tools")
    assert "cannot limit" in refused["detail"]
    assert listed["threads"] == []


class TestCodexEngine(CliEngineContract):
    """The engine contract (``condensate.testing.engines``), passed by the real CLI: a turn
    windowed in flight keeps its Codex thread, a refusal or a daemon restart goes on in a
    fresh one that opens with the window, a resume does not."""

    engine = "codex"
    model = f"openai:{MODEL}"
    window = WINDOW
    ceiling = CEILING
    settings: ClassVar[dict[str, str]] = {"CONDENSATE_WINDOW_CEILING_PI": str(CEILING)}
    thread_extra: ClassVar[dict[str, Any]] = {"persona": "PERSONA-MARKER: you count carefully."}
    endpoint = "responses"
    steps_past_line = 13
    steps_for_two_threads = 12

    def daemon_env(self, tmp_path: Path) -> dict[str, str]:
        return {"CONDENSATE_CODEX_BINARY": str(CODEX)}

    def bare_model(self) -> str:
        return MODEL

    def command(self, command: str, text: str = "") -> Reply:
        return shell(command, text)

    def conversation(self, request: RecordedRequest) -> list[Any]:
        return list(request.body["input"])

    def check_windowed_in_flight(self, events: Events, sent: list[RecordedRequest]) -> None:
        assert not notices(events, "session-fresh")

    def check_refusal_retried(self, retry: RecordedRequest, events: Events) -> None:
        fresh = notices(events, "session-fresh")
        assert fresh
        started = notices(events, "session-started")[0]
        assert fresh[0]["previous_session_id"] == started["session_id"]
        assert len(windows_in(retry)) == 1
        assert not [i for i in retry.body["input"] if i.get("type") == "function_call"]

    async def after_daemon_killed(self, events: Events) -> None:
        """Its app-server goes with the daemon (its stdin closed)."""
        app_server = started_pid(events)
        deadline = time.monotonic() + 30
        while await anyio.Path(f"/proc/{app_server}").exists():
            assert time.monotonic() < deadline, "the app-server outlived its daemon"
            await anyio.sleep(0.1)

    def check_restarted(self, fake: FakeModelServer, before: int, events: Events) -> None:
        """The next turn starts a fresh Codex thread from the view rebuilt from the log, the
        new message after the window."""
        fresh = notices(events, "session-fresh")
        assert fresh
        assert fresh[-1]["session_id"] != notices(events, "session-started")[0]["session_id"]
        request = generations(fake)[before]
        (window,) = windows_in(request)
        assert "before the restart" in json.dumps(window)
        assert "NEXT-STEP please" in json.dumps(request.body["input"])

    def check_resumed(self, request: RecordedRequest) -> None:
        assert not windows_in(request)  # resumed as it was, not restarted from a window

    def session_record(
        self, daemon: testing_daemon.DaemonProcess, thread: str, events: Events
    ) -> Path:
        (rollout,) = (daemon.home / "codex" / thread / "sessions").rglob("rollout-*.jsonl")
        return rollout
