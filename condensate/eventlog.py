"""The event log as the runtime sees it: an async, append-only store of every thread's events
and snapshots, with two backends behind one contract (``tests/integration/test_eventlog_
contract.py`` runs it on both):

- ``sqlite_store.SqliteStore``, the embedded default (one file beside the daemon);
- ``pg_store.PostgresStore``, behind ``CONDENSATE_DATABASE_URL``.

What every backend guarantees: each thread's ``seq`` runs 1, 2, 3, ... with no gap; a batch
is written in one transaction, its seqs contiguous; rows are never changed (UPDATE and DELETE
are refused by the database itself); an event written at an older version is read upcast to
its kind's current one; a first ``tail`` starts after the latest snapshot, a reader that names
where it is gets every event after it. The store counts nothing: the caller gives each event's
tokens (``tokens.count_event``) and the store keeps them beside it.

The one way rows leave the log is archiving (``condensate.eventlog.archive``): a thread's rows, copied
byte for byte into a verified archive file, are removed as a whole in the transaction that
records that archive (``archives``, itself append-only). The database lets a row go only when
a recorded archive covers it, and refuses any later append to an archived thread.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import anyio

from condensate.errors import EventLogError, UnknownEventVersion
from condensate.events import Event, Stored, decode

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class TailPage:
    """One page of a thread's events. Pass ``next_after`` back as ``after`` for the next."""

    events: list[Stored]
    next_after: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Projector state folded up to ``upto``, saved at ``seq`` beside its SnapshotTaken."""

    seq: int
    upto: int
    state: str


@dataclass(frozen=True, slots=True)
class Lease:
    """Who owns a thread of a log a fleet shares, where it answers, and until when (unless it
    renews)."""

    owner: str
    url: str
    expires_at: datetime


EventRow = tuple[int, str, int, str, int, str]
"""An event row as the log stores it: (seq, kind, v, at, tokens, body)."""
SnapshotRow = tuple[int, int, str]
"""A snapshot row as the log stores it: (seq, upto, state)."""


@dataclass(frozen=True, slots=True)
class ThreadRows:
    """Every row of one thread exactly as the log stores it (bodies not decoded, old versions
    not upcast): what an archive copies and an export prints."""

    thread_id: str
    created_at: str
    events: tuple[EventRow, ...]
    snapshots: tuple[SnapshotRow, ...]

    @property
    def last_seq(self) -> int:
        return self.events[-1][0] if self.events else 0


def digest(rows: ThreadRows) -> str:
    """SHA-256 over every row, each value as stored: equal digests, equal rows."""
    hashed = hashlib.sha256()
    hashed.update(json.dumps([rows.thread_id, rows.created_at]).encode())
    for row in (*rows.events, *rows.snapshots):
        hashed.update(b"\n" + json.dumps(row).encode())
    return hashed.hexdigest()


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """A thread moved out of the live log: the archive file (its name, under the archive
    directory of the host that wrote it) holds its rows, whose digest this is."""

    thread_id: str
    file: str
    host: str
    archived_at: str
    last_seq: int
    events: int
    snapshots: int
    digest: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ArchiveRecord:
        """A record from an ``archives`` row (its columns in the order of the fields)."""
        thread_id, file, host, archived_at, last_seq, events, snapshots, hashed = row
        return cls(
            str(thread_id),
            str(file),
            str(host),
            str(archived_at),
            int(last_seq),
            int(events),
            int(snapshots),
            str(hashed),
        )

    def values(self) -> tuple[str, str, str, str, int, int, int, str]:
        """The record as an ``archives`` row (its columns in the order of the fields)."""
        return (
            self.thread_id,
            self.file,
            self.host,
            self.archived_at,
            self.last_seq,
            self.events,
            self.snapshots,
            self.digest,
        )

    def refuse_archived(self, archived: str | None) -> None:
        """Nothing is removed for a thread archived already (``archived``: the file of the
        record found)."""
        if archived is not None:
            msg = f"Thread {self.thread_id!r} is archived already, in {archived}."
            raise EventLogError(msg)

    def refuse_changed(self, rows: ThreadRows | None) -> None:
        """Nothing is removed unless the thread's rows are still those the archive holds
        (checked in the transaction that removes them)."""
        if rows is None or digest(rows) != self.digest:
            upto = 0 if rows is None else rows.last_seq
            msg = (
                f"Thread {self.thread_id!r} changed while it was being archived (its events now "
                f"run to seq {upto}, the archive's to {self.last_seq}); nothing was removed."
            )
            raise EventLogError(msg)


class Owners(Protocol):
    """Who owns the threads of a log a fleet shares (``fleet.Fleet``)."""

    me: str

    async def owner_of(self, thread_id: str) -> Lease | None: ...

    async def owners(self) -> dict[str, Lease]: ...

    def waiter(self, thread_id: str) -> anyio.Event:
        """Set when the thread's owner next appends."""
        ...


class EventStore(Protocol):
    """The log of every thread (see the module's text for what each backend guarantees)."""

    async def append(
        self, thread_id: str, events: Sequence[Event], tokens: Sequence[int]
    ) -> list[Stored]:
        """Append a batch in one transaction; ``tokens`` holds each event's count."""
        ...

    async def save_snapshot(self, thread_id: str, upto: int, state: str) -> Stored:
        """Save projector state folded up to ``upto`` and append its SnapshotTaken, in one
        transaction; ValueError when ``upto`` is not one of the thread's seqs (or 0)."""
        ...

    async def tail(
        self, thread_id: str, after: int = 0, limit: int = DEFAULT_LIMIT, history: bool = False
    ) -> TailPage:
        """Up to ``limit`` (clamped to 1..MAX_LIMIT) events after ``after``. A first read
        (``after`` 0) without ``history`` starts after the latest snapshot."""
        ...

    async def read(self, thread_id: str, seq: int) -> Stored:
        """The event at ``seq`` (EventNotFound when there is none)."""
        ...

    async def events(self, thread_id: str, after: int = 0) -> list[Stored]:
        """Every event after ``after``, in order, snapshots or not."""
        ...

    async def last_seq(self, thread_id: str) -> int: ...

    async def thread_ids(self) -> list[str]:
        """Every thread with at least one event, in the order they were first written."""
        ...

    async def latest_snapshot(self, thread_id: str) -> Snapshot | None: ...

    async def rows(self, thread_id: str) -> ThreadRows | None:
        """Every row of the thread as stored, read at one point in time; None when the live
        log has no such thread."""
        ...

    async def archived(self, thread_id: str) -> ArchiveRecord | None:
        """The thread's archive, when it was moved out of the live log."""
        ...

    async def record_archive(self, record: ArchiveRecord) -> None:
        """In one transaction: check that the thread's rows still have ``record.digest``,
        record the archive and remove the thread's rows (EventLogError, nothing changed,
        when they differ or the thread is archived already)."""
        ...

    async def close(self) -> None: ...


def check_batch(thread_id: str, events: Sequence[Event], tokens: Sequence[int]) -> None:
    """What every backend refuses before it writes anything."""
    if not thread_id:
        msg = "A thread id must be a non-empty string."
        raise ValueError(msg)
    if len(tokens) != len(events):
        msg = f"A batch of {len(events)} events came with {len(tokens)} token counts."
        raise ValueError(msg)


def clamped(limit: int) -> int:
    """A page size within 1..MAX_LIMIT."""
    return max(1, min(limit, MAX_LIMIT))


def page_of(thread_id: str, rows: Sequence[Any], limit: int, after: int) -> TailPage:
    """A page from up to ``limit + 1`` rows of (seq, tokens, body): the extra row only says
    that there is more."""
    page = [decode_row(thread_id, seq, tokens, body) for seq, tokens, body in rows[:limit]]
    return TailPage(
        events=page, next_after=page[-1].seq if page else after, has_more=len(rows) > limit
    )


def decode_row(thread_id: str, seq: int, tokens: int, body: str) -> Stored:
    """A stored row as its event, upcast to the kind's current version."""
    try:
        raw = json.loads(body)
        if not isinstance(raw, dict):
            msg = f"the body is a JSON {type(raw).__name__}, not an object."
            raise TypeError(msg)
        event = decode(raw)
    except UnknownEventVersion as exc:
        msg = f"Event {seq} of thread {thread_id!r} cannot be read: {exc}"
        raise UnknownEventVersion(msg) from exc
    except (ValueError, TypeError) as exc:
        msg = f"Event {seq} of thread {thread_id!r} is not a valid event: {exc}"
        raise EventLogError(msg) from exc
    return Stored(thread_id=thread_id, seq=seq, event=event, tokens=tokens)
