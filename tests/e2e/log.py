"""What the end-to-end tests read from a daemon's log: waiting for events, the outcome of a
turn, engine notices, and the pairing of every tool call with one result."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import aiohttp

from condensate.eventlog.sqlite_sync import EventLog
from tests.integration.daemon import DaemonProcess, wait_for

Events = list[dict[str, Any]]


async def until(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    thread: str,
    predicate: Callable[[dict[str, Any]], bool],
    after: int = 0,
) -> Events:
    """Every event of ``thread`` once one after seq ``after`` satisfies ``predicate``."""
    return await wait_for(
        session, daemon, thread, lambda e: e["seq"] > after and predicate(e), seconds=120
    )


def kind(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: bool(e["kind"] == name)


def ended(events: Events, after: int = 0) -> dict[str, Any]:
    """The first turn that ended after ``after``, which must have completed."""
    done = [e for e in events if e["kind"] == "turn.ended" and e["seq"] > after]
    assert done[0]["outcome"] == "completed", done[0]
    return done[0]


async def turn_ended(
    session: aiohttp.ClientSession, daemon: DaemonProcess, thread: str, after: int = 0
) -> Events:
    """Every event once a turn ended after ``after``; that turn must have completed."""
    events = await until(session, daemon, thread, kind("turn.ended"), after)
    done = [e for e in events if e["kind"] == "turn.ended" and e["seq"] > after]
    assert done[0]["outcome"] == "completed", (done[0], daemon.log_tail())
    return events


def notices(events: Events, name: str) -> Events:
    return [e for e in events if e["kind"] == "engine.notice" and e["notice"] == name]


def started_pid(events: Events) -> int:
    """The pid of the CLI process the last ``session-started`` notice names."""
    started = notices(events, "session-started")[-1]
    field = next(w for w in started["detail"].split() if w.startswith("pid="))
    return int(field.removeprefix("pid="))


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
