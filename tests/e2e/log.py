"""What the end-to-end tests read from a daemon's log: waiting for events, the outcome of a
turn; engine notices and the pairing of every tool call with one result come from the engine
contract (``condensate.testing.engines``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp

from condensate.testing.engines import check_pairs, notices, started_pid
from tests.integration.daemon import DaemonProcess, wait_for

__all__ = [
    "Events",
    "check_pairs",
    "ended",
    "kind",
    "notices",
    "started_pid",
    "turn_ended",
    "until",
]

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
