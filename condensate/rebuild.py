"""Rebuilding a thread's view from its log: the latest snapshot first, then the events after
it. An edge: it reads the store and folds with the pure projector."""

from __future__ import annotations

from collections.abc import Iterable

from condensate.core.projector import Projection
from condensate.eventlog import EventStore, Snapshot
from condensate.events import Stored
from condensate.eventlog.sqlite_sync import EventLog


def rebuild(log: EventLog, thread_id: str) -> Projection:
    """The thread's view exactly as a full replay would give it, without replaying from zero
    when a snapshot exists (the SQLite file, read in place)."""
    snapshot = log.latest_snapshot(thread_id)
    return _folded(snapshot, log.replay(thread_id, after=snapshot.upto if snapshot else 0))


async def rebuilt(store: EventStore, thread_id: str) -> Projection:
    """``rebuild`` through any backend."""
    snapshot = await store.latest_snapshot(thread_id)
    return _folded(snapshot, await store.events(thread_id, snapshot.upto if snapshot else 0))


def _folded(snapshot: Snapshot | None, events: Iterable[Stored]) -> Projection:
    projection = Projection() if snapshot is None else Projection.from_json(snapshot.state)
    for stored in events:
        projection.apply(stored)
    return projection
