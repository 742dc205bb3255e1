"""The engine contract as suites of tests, each run through a real daemon (a subprocess) on
the fake model server, shipped so that every engine proves the same behaviour: the native
loop, Claude Code, Codex, and one that plugs in from outside.

Three suites, each adding to the one before:

``EngineContract``
    every engine: a turn answers; a thread is measured as its engine and settings declare;
    after a daemon restart the thread's view is rebuilt from the log and it goes on.
``ModelEngineContract``
    an engine whose agent calls the model (and runs a shell): past its line a turn is
    windowed in flight and no request passes the line; a prompt the provider refuses as
    too long forces a window and the turn completes.
``CliEngineContract``
    an engine that drives a CLI process: a killed process is resumed on its session; two
    threads and a slow curator stay under the ceiling; the record the CLI wrote replays.

An engine's test module subclasses the suite that fits, names the class ``Test…`` (the
suites have no ``Test`` prefix, so pytest collects only the subclasses) and fills in the
class attributes and hooks: how the fake is scripted for this engine (``answer``,
``command``), which of the fake's requests are the thread's (``requests``), and any
engine-specific check of a behaviour the suite asserts (the ``check_…`` hooks, which do
nothing by default). Needs pytest and pytest-asyncio (``asyncio_mode = "auto"``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import anyio
import pytest

from condensate.eventlog.sqlite_sync import EventLog
from condensate.events import ToolResult, UserMessage
from condensate.replay import ReplayConfig, load, replay
from condensate.testing.builders import RESERVE
from condensate.testing.daemon import DaemonProcess, call, wait_for
from condensate.testing.fake_model import (
    FakeModelServer,
    Overflow,
    RecordedRequest,
    Reply,
    Slow,
    Text,
)

Events = list[dict[str, Any]]
BRIEF = "Count things with the shell, one command at a time. BRIEF-MARKER-contract"
CURATOR = "claude-haiku-5-5"
"""The curator's model, on the fake (``CONDENSATE_CURATOR_MODEL``)."""
NOTES = "Notes on what I found so far: " + "the parser keeps its state in a table; " * 300
"""A long reply (about 2.7k tokens): cheap tiers never clear what the model said."""
CHEAP = {"microcompact", "collapse"}


def of_kind(events: Events, kind: str) -> Events:
    return [e for e in events if e["kind"] == kind]


def notices(events: Events, name: str) -> Events:
    """The engine notices called ``name`` (``session-started``, ``cli-exited``, …)."""
    return [e for e in of_kind(events, "engine.notice") if e["notice"] == name]


def answers(events: Events) -> list[str]:
    return [e["text"] for e in of_kind(events, "message.assistant")]


def started_pid(events: Events) -> int:
    """The pid of the CLI process the last ``session-started`` notice names."""
    started = notices(events, "session-started")[-1]
    field = next(w for w in started["detail"].split() if w.startswith("pid="))
    return int(field.removeprefix("pid="))


def uncached(value: Any) -> Any:
    """``value`` without Anthropic's ``cache_control`` markers, which a client may move to
    the newest block on every request."""
    if isinstance(value, dict):
        return {k: uncached(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [uncached(v) for v in value]
    return value


def check_pairs(daemon: DaemonProcess, thread: str) -> None:
    """Seqs are contiguous and every logged tool call has exactly one result."""
    with EventLog.open(daemon.home / "condensate.db") as log:
        stored = list(log.replay(thread))
    assert [s.seq for s in stored] == list(range(1, len(stored) + 1))
    calls = [
        c.id for s in stored if s.event.kind == "message.assistant" for c in s.event.tool_calls
    ]
    results = Counter(s.event.call_id for s in stored if s.event.kind == "tool.result")
    assert all(results[c] == 1 for c in calls), (calls, results)
    assert sum(results.values()) == len(calls)


class EngineContract(ABC):
    """What every engine does, through a daemon; subclass it (see the module)."""

    engine: ClassVar[str]
    """The engine's name, as threads are created with it."""
    model: ClassVar[str]
    """The thread's model (``provider:name``)."""
    window: ClassVar[int] = 200_000
    """The model's window, as the daemon is told it (``CONDENSATE_MODEL_WINDOWS``)."""
    ceiling: ClassVar[int]
    """The ceiling a thread on this model gets, as the engine declares it under the
    settings in ``settings``."""
    baseline: ClassVar[int | None] = None
    """The baseline the engine declares, when it is fixed (None: it depends on the CLI)."""
    settings: ClassVar[dict[str, str]] = {}
    """The engine's own ``CONDENSATE_*`` settings, in the daemon's environment."""
    thread_extra: ClassVar[dict[str, Any]] = {}
    """More of each ``POST /threads`` body (a persona)."""

    def daemon_env(self, tmp_path: Path) -> dict[str, str]:
        """The rest of the daemon's environment: a CLI's binary, a plugin's import path."""
        return {}

    def daemon_cwd(self) -> Path | None:
        """Where the daemon runs (None: here)."""
        return None

    @abstractmethod
    def answer(self, fake: FakeModelServer, text: str, asked: str) -> str:
        """Script the fake so that the next turn, asked ``asked``, answers ``text``; return
        what the thread's last assistant message then says."""

    def check_restarted(self, fake: FakeModelServer, before: int, events: Events) -> None:
        """An engine's own check of a thread gone on after a restart (``before``: how many
        of the thread's requests the fake had then)."""
        return None

    async def after_daemon_killed(self, events: Events) -> None:
        """Wait for what the engine promises once its daemon is killed (``events``: the
        thread's so far)."""
        return None

    def requests(self, fake: FakeModelServer) -> list[RecordedRequest]:
        """The thread's model requests the fake received (an engine that calls no model:
        none)."""
        return []

    # -- fixtures ----------------------------------------------------------------------------

    @pytest.fixture
    async def fake(self) -> AsyncIterator[FakeModelServer]:
        """A fake model server for each test. No request may be refused for a thinking
        block's binding: the fake applies Anthropic's prefix check, as the API does."""
        async with FakeModelServer(window=200_000) as server:
            yield server
        refused = [
            f"#{r.number} {r.model} {r.path}"
            for r in server.requests
            if r.thinking is not None and r.thinking.refused
        ]
        assert refused == [], f"requests refused for their signed thinking: {refused}"

    @pytest.fixture
    def workdir(self, tmp_path: Path) -> Path:
        """An empty working directory for the thread."""
        work = tmp_path / "work"
        work.mkdir()
        return work

    @pytest.fixture
    def daemon(self, tmp_path: Path, fake: FakeModelServer) -> Iterator[DaemonProcess]:
        """A daemon on the fake, with the engine's settings; stopped after the test."""
        env = {
            "CONDENSATE_MODEL_WINDOWS": json.dumps({self.model: self.window}),
            "CONDENSATE_CURATOR_MODEL": f"anthropic:{CURATOR}",
            "CONDENSATE_WINDOW_DEADLINE_MS": "10000",
            **self.settings,
            **self.daemon_env(tmp_path),
        }
        process = DaemonProcess(tmp_path / "home", fake.url, extra_env=env, cwd=self.daemon_cwd())
        process.home.mkdir(mode=0o700)
        process.start()
        yield process
        process.close()

    @pytest.fixture
    async def session(self) -> AsyncIterator[aiohttp.ClientSession]:
        async with aiohttp.ClientSession() as client:
            yield client

    # -- helpers -----------------------------------------------------------------------------

    async def create(
        self, session: aiohttp.ClientSession, daemon: DaemonProcess, workdir: Path, brief: str
    ) -> dict[str, Any]:
        """A thread on the engine, created through the API: the 201's body."""
        body = {
            "engine": self.engine,
            "model": self.model,
            "cwd": str(workdir),
            "brief": brief,
            **self.thread_extra,
        }
        status, created = await call(session, daemon, "POST", "/threads", body)
        assert status == 201, created
        return dict(created)

    async def start(
        self, session: aiohttp.ClientSession, daemon: DaemonProcess, workdir: Path
    ) -> str:
        """A thread on the engine with the suite's brief: its id."""
        return str((await self.create(session, daemon, workdir, BRIEF))["id"])

    async def turn_ended(
        self, session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, after: int = 0
    ) -> Events:
        """Every event once a turn ended after seq ``after``; that turn must have completed."""
        events = await wait_for(
            session,
            daemon,
            thread,
            lambda e: e["seq"] > after and e["kind"] == "turn.ended",
            seconds=120,
        )
        done = [e for e in of_kind(events, "turn.ended") if e["seq"] > after]
        assert done[0]["outcome"] == "completed", (done[0], daemon.log_tail())
        return events

    def line(self) -> int:
        """The thread's line: its ceiling less the output reserve."""
        return self.ceiling - RESERVE

    # -- the contract ------------------------------------------------------------------------

    async def test_a_turn_answers_its_brief(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """A thread's first turn takes its brief and completes with the engine's answer as
        the last assistant message."""
        expected = self.answer(fake, "CONTRACT-ANSWER", BRIEF)
        thread = await self.start(session, daemon, workdir)
        events = await self.turn_ended(session, daemon, thread)
        assert answers(events)[-1] == expected
        assert of_kind(events, "message.user")[0]["text"] == BRIEF

    async def test_a_thread_is_measured_as_its_engine_declares(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """A thread's ceiling is its engine's share of the model's window, capped as the
        engine and its own settings say, and its baseline the engine's (where fixed)."""
        self.answer(fake, "measured", BRIEF)
        created = await self.create(session, daemon, workdir, BRIEF)
        assert created["engine"] == self.engine
        assert (created["ceiling"], created["line"]) == (self.ceiling, self.line())
        if self.baseline is not None:
            events = await self.turn_ended(session, daemon, created["id"])
            assert of_kind(events, "thread.created")[0]["baseline_tokens"] == self.baseline

    async def test_after_a_restart_the_view_is_rebuilt_and_the_thread_goes_on(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """The daemon is killed between turns and started again: the thread reads as it did
        (its events and its measured prompt, rebuilt from the log), and its next message
        is answered on the same engine."""
        self.answer(fake, "before the restart", BRIEF)
        thread = await self.start(session, daemon, workdir)
        events = await self.turn_ended(session, daemon, thread)
        _, before = await call(session, daemon, "GET", f"/threads/{thread}")
        daemon.kill()
        await self.after_daemon_killed(events)
        daemon.start()
        _, after = await call(session, daemon, "GET", f"/threads/{thread}")
        assert (after["engine"], after["events"]) == (self.engine, before["events"])
        assert after["usage"]["used"] == before["usage"]["used"]
        sent = len(self.requests(fake))
        expected = self.answer(fake, "carrying on after the restart", "NEXT-STEP please")
        path = f"/threads/{thread}/messages"
        status, _ = await call(session, daemon, "POST", path, {"text": "NEXT-STEP please"})
        assert status == 202
        events = await self.turn_ended(session, daemon, thread, events[-1]["seq"])
        assert answers(events)[-1] == expected
        self.check_restarted(fake, sent, events)


class ModelEngineContract(EngineContract):
    """What an engine whose agent calls the model and runs a shell does, beyond every
    engine's contract."""

    endpoint: ClassVar[str]
    """The fake's endpoint the engine's model requests reach (``messages``, ``responses``)."""
    steps_past_line: ClassVar[int]
    """How many ~1.4k-token command outputs take a turn past the line, once."""

    @abstractmethod
    def command(self, command: str, text: str = "") -> Reply:
        """The model's reply that runs ``command`` in the engine's shell tool."""

    @abstractmethod
    def bare_model(self) -> str:
        """The thread's model as the fake sees it (no provider)."""

    @abstractmethod
    def conversation(self, request: RecordedRequest) -> list[Any]:
        """The conversation a request carries, as the engine's wire has it, without what the
        engine moves on every request (cache markers)."""

    def answer(self, fake: FakeModelServer, text: str, asked: str) -> str:
        fake.queue(Text(text), model=self.bare_model())
        return text

    def requests(self, fake: FakeModelServer) -> list[RecordedRequest]:
        model = self.bare_model()
        return [r for r in fake.requests if r.endpoint == self.endpoint and r.model == model]

    def check_windowed_in_flight(self, events: Events, sent: list[RecordedRequest]) -> None:
        """An engine's own check of a turn windowed in flight (one session, no fork)."""
        return None

    def check_refusal_retried(self, retry: RecordedRequest, events: Events) -> None:
        """An engine's own check of the request that retried a refused prompt."""
        return None

    async def test_past_its_line_a_turn_is_windowed_in_flight(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """Command outputs push the next request past the line; a cheap window (receipts in
        place of the cleared outputs) is taken within the turn: no request passes the line,
        the request after the window is smaller than the one before it, and every later
        request starts with the one before it."""
        fake.queue(
            *[
                self.command(f"seq {i} {i + 700}", f"Step {i}.")
                for i in range(self.steps_past_line)
            ],
            Text("all counted"),
            model=self.bare_model(),
        )
        thread = await self.start(session, daemon, workdir)
        events = await self.turn_ended(session, daemon, thread)

        windows = of_kind(events, "window")
        assert windows, daemon.log_tail()
        assert {w["window_kind"] for w in windows} <= CHEAP
        assert answers(events)[-1] == "all counted"
        sent = self.requests(fake)
        self.check_windowed_in_flight(events, sent)
        assert max(r.input_tokens for r in sent) <= self.line()
        first = next(i for i, r in enumerate(sent) if "receipt seq" in json.dumps(r.body))
        assert sent[first].input_tokens < sent[first - 1].input_tokens
        for before, after in itertools.pairwise(sent[first:]):
            kept = self.conversation(after)[: len(self.conversation(before))]
            assert json.dumps(kept) == json.dumps(self.conversation(before))
        check_pairs(daemon, thread)

    async def test_a_prompt_too_long_forces_a_window_and_the_turn_completes(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """The provider refuses a prompt under the ceiling as too long: the refusal is
        logged, forces a window, and the turn is retried from it and completes."""
        fake.queue(
            self.command("seq 1 400", "First count."),
            self.command("seq 2 400", "Second count."),
            Overflow(),
            Text("finished after the refusal"),
            model=self.bare_model(),
        )
        thread = await self.start(session, daemon, workdir)
        events = await self.turn_ended(session, daemon, thread)

        assert of_kind(events, "model.refused")
        windows = of_kind(events, "window")
        assert windows
        assert windows[0]["forced"]
        assert answers(events)[-1] == "finished after the refusal"
        sent = self.requests(fake)
        refused = next(i for i, r in enumerate(sent) if r.reply == "overflow")
        self.check_refusal_retried(sent[refused + 1], events)
        check_pairs(daemon, thread)


class CliEngineContract(ModelEngineContract):
    """What an engine that drives a CLI process does, beyond a model engine's contract."""

    steps_for_two_threads: ClassVar[int]
    """How many long-reply steps both threads share to cross their lines together."""

    @abstractmethod
    def session_record(self, daemon: DaemonProcess, thread: str, events: Events) -> Path:
        """The file in which the CLI recorded the thread's session (once the daemon, and
        with it the CLI, has stopped)."""

    def check_resumed(self, request: RecordedRequest) -> None:
        """An engine's own check of the first request after a resume."""
        return None

    async def test_a_killed_cli_is_resumed_on_the_same_session(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """SIGKILL of the CLI while the model streams: the engine resumes the same session,
        nothing logged before the kill is lost, and the turn completes."""
        fake.queue(
            self.command("echo one-before-the-kill", "Echoing."),
            Slow(Text("never finished"), chunk_delay=0.5, chunks=20),
            Text("finished after the resume"),
            model=self.bare_model(),
        )
        thread = await self.start(session, daemon, workdir)
        events = await wait_for(
            session, daemon, thread, lambda e: e["kind"] == "tool.result", seconds=60
        )
        deadline = time.monotonic() + 60
        while not any(r.reply == "slow:text" for r in fake.requests):
            assert time.monotonic() < deadline, "the slow reply was never asked for"
            await anyio.sleep(0.05)
        await anyio.sleep(0.5)
        os.kill(started_pid(events), signal.SIGKILL)
        events = await self.turn_ended(session, daemon, thread)

        assert of_kind(events, "tool.result")[0]["output"].strip() == "one-before-the-kill"
        assert notices(events, "cli-exited")
        resumed = notices(events, "session-resumed")
        assert resumed
        assert resumed[0]["session_id"] == notices(events, "session-started")[0]["session_id"]
        assert answers(events)[-1] == "finished after the resume"
        after = self.requests(fake)[-1]
        assert after.reply == "text"
        body = json.dumps(self.conversation(after))
        assert BRIEF in body
        assert "one-before-the-kill" in body
        self.check_resumed(after)
        check_pairs(daemon, thread)

    async def test_a_cli_killed_between_turns_is_resumed_at_the_next(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """SIGKILL of the CLI after its turn ended (as the OOM killer does): the next message
        is answered on the same session, the exit noted, and so is every one after it."""
        self.answer(fake, "first answer", BRIEF)
        thread = await self.start(session, daemon, workdir)
        events = await self.turn_ended(session, daemon, thread)
        pid = started_pid(events)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _running(pid):
            assert time.monotonic() < deadline, "the killed CLI never exited"
            await anyio.sleep(0.05)
        for n, said in enumerate(["after the kill", "and once more"]):
            text = self.answer(fake, said, f"step {n}")
            last = events[-1]["seq"]
            status, body = await call(
                session, daemon, "POST", f"/threads/{thread}/messages", {"text": f"step {n}"}
            )
            assert status in (200, 202), body
            events = await self.turn_ended(session, daemon, thread, after=last)
            assert answers(events)[-1] == text

        exited = notices(events, "cli-exited")
        assert len(exited) == 1
        assert "between turns" in exited[0]["detail"]
        resumed = notices(events, "session-resumed")
        assert resumed[0]["session_id"] == notices(events, "session-started")[0]["session_id"]
        check_pairs(daemon, thread)

    async def test_two_threads_and_a_slow_curator_stay_under_the_ceiling(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """Two threads cross their line at the same time while the curator takes 6 s a
        summary: every request the provider receives stays under the ceiling (the gateway
        holds each over the line until its window is taken), and both turns complete."""
        steps = [self.command(f"echo {i}", NOTES) for i in range(self.steps_for_two_threads)]
        fake.queue(*steps, Text("all counted"), Text("all counted"), model=self.bare_model())
        slow = Slow(Text("Summary: notes on the parser were taken."), chunk_delay=0.6, chunks=10)
        fake.queue(slow, slow, slow, slow, model=CURATOR)
        first = await self.start(session, daemon, workdir)
        second = await self.start(session, daemon, workdir)
        logs = [
            await self.turn_ended(session, daemon, first),
            await self.turn_ended(session, daemon, second),
        ]
        assert [e for log in logs for e in of_kind(log, "window")], daemon.log_tail()
        assert max(r.input_tokens for r in self.requests(fake)) <= self.ceiling
        check_pairs(daemon, first)
        check_pairs(daemon, second)

    async def test_the_record_the_cli_wrote_replays(
        self,
        daemon: DaemonProcess,
        fake: FakeModelServer,
        workdir: Path,
        session: aiohttp.ClientSession,
    ) -> None:
        """The session record the real CLI wrote for a thread loads into ``condensate
        replay``: the brief, each command with its result (a failing one as an error), and a
        replay whose retention checks pass."""
        fake.queue(
            self.command("echo RECORD-ONE", "First."),
            self.command("ls /no-such-dir-here", "Second."),
            Text("done with both"),
            model=self.bare_model(),
        )
        thread = await self.start(session, daemon, workdir)
        events = await self.turn_ended(session, daemon, thread)
        daemon.close()  # the CLI flushes its record as it exits
        recording = load(self.session_record(daemon, thread, events))

        assert recording.source == self.engine
        assert any(BRIEF in e.text for e in recording.events if isinstance(e, UserMessage))
        results = [e for e in recording.events if isinstance(e, ToolResult)]
        assert [r.is_error for r in results] == [False, True]
        assert "RECORD-ONE" in results[0].output
        config = ReplayConfig(window=self.window, policies=("condensate",))
        report = await replay(recording, config)
        assert report.results["condensate"].retention.passed
        assert report.results["condensate"].calls == recording.model_calls == 3


__all__ = [
    "BRIEF",
    "CURATOR",
    "NOTES",
    "CliEngineContract",
    "EngineContract",
    "Events",
    "ModelEngineContract",
    "answers",
    "check_pairs",
    "notices",
    "of_kind",
    "started_pid",
    "uncached",
]


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
