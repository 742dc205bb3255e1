"""Rebuilding a thread's view from its log: the latest snapshot first, then the events after
it. An edge: it reads the store and folds with the pure projector."""

from __future__ import annotations

from condensate.projector import Projection
from condensate.store import EventLog


def rebuild(log: EventLog, thread_id: str) -> Projection:
    """The thread's view exactly as a full replay would give it, without replaying from zero
    when a snapshot exists."""
    snapshot = log.latest_snapshot(thread_id)
    if snapshot is None:
        projection = Projection()
        after = 0
    else:
        projection = Projection.from_json(snapshot.state)
        after = snapshot.upto
    for stored in log.replay(thread_id, after=after):
        projection.apply(stored)
    return projection


def checkpoint(log: EventLog, projection: Projection) -> int:
    """Save the projection as the thread's latest snapshot; returns the seq it covers.

    The snapshot event itself comes after ``upto``; folding it later changes nothing."""
    upto = projection.last_seq
    stored = log.save_snapshot(projection.thread_id, upto, projection.to_json())
    projection.apply(stored)
    return upto
