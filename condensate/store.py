"""The append-only SQLite event log: one file holds every thread's events, snapshots and ids.

This module owns the per-thread ``seq``, each event's stored token count and the encoding of
rows; ``store_schema`` holds the schema and how a connection is prepared, ``store_wal`` the
background WAL checkpoints; with ``archive`` (which writes archive files in the same layout)
they are the only modules that write SQLite. Synchronous: async callers reach it through a
worker thread, or for a small append through ``append_now``, which never waits for the lock.
Rows never change: triggers refuse UPDATE and REPLACE on every table, and DELETE but for the
rows of a thread whose archive is recorded (``record_archive``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from condensate.core.tokens import Counter, count_event, counter_for
from condensate.errors import EventLogError, EventNotFound
from condensate.eventlog import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    ArchiveRecord,
    Snapshot,
    TailPage,
    ThreadRows,
    clamped,
    decode_row,
    page_of,
)
from condensate.events import Event, SnapshotTaken, Stored, encode, now_utc
from condensate.eventlog.schema import BACKSTOP_PAGES, BUSY_TIMEOUT_MS, SCHEMA_VERSION, prepare
from condensate.eventlog.wal import Checkpointer

__all__ = [
    "BACKSTOP_PAGES",
    "BUSY_TIMEOUT_MS",
    "CHECKPOINT_BYTES",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "REPLAY_CHUNK",
    "SCHEMA_VERSION",
    "EventLog",
    "Snapshot",
    "TailPage",
]

REPLAY_CHUNK = 2000
CHECKPOINT_BYTES = 4_000_000
"""Bytes written between two background WAL checkpoints (SQLite's own default is 1000 pages)."""

_INSERT_EVENT = (
    "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_THREAD = "INSERT OR IGNORE INTO threads (thread_id, created_at) VALUES (?, ?)"
_LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id = ?"
_SELECT_ARCHIVE = (
    "SELECT thread_id, file, host, archived_at, last_seq, events, snapshots, digest"
    " FROM archives WHERE thread_id = ?"
)
_INSERT_ARCHIVE = (
    "INSERT INTO archives (thread_id, file, host, archived_at, last_seq, events, snapshots, digest)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True, slots=True)
class _Row:
    """An event encoded for insertion; ``seq`` is filled in inside the transaction."""

    kind: str
    v: int
    at: str
    tokens: int
    body: str


class EventLog:
    """The log file of every thread. One connection, shared by the caller's OS threads under
    a lock; WAL lets other processes read while this one writes."""

    def __init__(
        self,
        path: Path,
        connection: sqlite3.Connection,
        counter: Counter,
        *,
        archives: bool = True,
    ) -> None:
        self.path = path
        self.counter = counter
        self._archives = archives
        """The file has the ``archives`` table (a version 1 file read in place has not)."""
        self._connection: sqlite3.Connection | None = connection
        self._lock = threading.Lock()
        self._checkpointer = Checkpointer(path)
        self._written = 0

    @classmethod
    def open(cls, path: Path, counter: Counter | None = None) -> EventLog:
        """Open the log at ``path``, creating its directory, file and schema as needed."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not path.exists():
                # SQLite gives the -wal and -shm files the mode of the log itself.
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError as exc:
            msg = f"Could not create the event log {str(path)!r}: {exc}."
            raise EventLogError(msg) from exc
        try:
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            msg = f"Could not open the event log at {str(path)!r}: {exc}."
            raise EventLogError(msg) from exc
        try:
            prepare(connection, path)
        except BaseException:
            connection.close()
            raise
        return cls(path, connection, counter or counter_for(""))

    @classmethod
    def open_read_only(cls, path: Path) -> EventLog:
        """Open an existing log only to read it (a replay of someone's log must not change
        the file, nor create one): refused when ``path`` is no Condensate log of a version
        this Condensate knows. Appends raise EventLogError."""
        connection: sqlite3.Connection | None = None
        try:
            connection = sqlite3.connect(
                f"file:{path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
            )
            version = int(connection.execute("PRAGMA user_version").fetchone()[0])
            tables = {
                str(row[0])
                for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.Error as exc:
            if connection is not None:
                connection.close()
            msg = f"Could not open {str(path)!r} as a Condensate log: {exc}."
            raise EventLogError(msg) from exc
        if not 1 <= version <= SCHEMA_VERSION or not {"events", "threads"} <= tables:
            connection.close()
            msg = (
                f"{str(path)!r} is not a Condensate log this version can read (schema version "
                f"{version}, tables {sorted(tables)})."
            )
            raise EventLogError(msg)
        return cls(path, connection, counter_for(""), archives="archives" in tables)

    def close(self) -> None:
        """Close the connection; later calls raise EventLogError. Closing twice is harmless."""
        # The checkpointer goes first, so that the writer's connection is the last one and
        # SQLite folds the WAL back into the database file as it closes.
        self._checkpointer.close()
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def append(
        self,
        thread_id: str,
        events: Event | Sequence[Event],
        counter: Counter | None = None,
        tokens: Sequence[int] | None = None,
    ) -> list[Stored]:
        """Append one event or a batch in a single transaction; the store assigns each
        ``seq``. Each event's tokens are ``tokens`` when given (the async store's callers
        count), else counted here with ``counter`` (this file's own tools and tests)."""
        stored = self._append(thread_id, events, counter, tokens, wait=True)
        assert stored is not None  # waiting for the lock always gets it
        return stored

    def append_now(
        self,
        thread_id: str,
        events: Event | Sequence[Event],
        counter: Counter | None = None,
        tokens: Sequence[int] | None = None,
    ) -> list[Stored] | None:
        """``append``, unless another OS thread is using the log at this moment: then None and
        nothing written. For a caller that must not wait on a lock, such as an event loop."""
        return self._append(thread_id, events, counter, tokens, wait=False)

    def _append(
        self,
        thread_id: str,
        events: Event | Sequence[Event],
        counter: Counter | None,
        tokens: Sequence[int] | None,
        *,
        wait: bool,
    ) -> list[Stored] | None:
        _check_thread_id(thread_id)
        batch = list(events) if isinstance(events, Sequence) else [events]
        if not batch:
            return []
        if tokens is None:
            tokens = [count_event(event, counter or self.counter) for event in batch]
        # Encoding happens before BEGIN so the write lock is held only for SQL.
        rows = [_encode(event, count) for event, count in zip(batch, tokens, strict=True)]
        action = f"append {len(rows)} event(s) to thread {thread_id!r}"
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            with self._transaction(action, wait=wait) as connection:
                first = _last_seq(connection, thread_id) + 1
                connection.execute(_INSERT_THREAD, (thread_id, now_utc().isoformat()))
                connection.executemany(
                    _INSERT_EVENT,
                    [
                        (thread_id, first + i, r.kind, r.v, r.at, r.tokens, r.body)
                        for i, r in enumerate(rows)
                    ],
                )
            self._count_written(sum(len(r.body) for r in rows))
        except _Busy:
            return None  # another process holds SQLite's write lock: the caller falls back
        finally:
            self._lock.release()
        return [
            Stored(thread_id=thread_id, seq=first + i, event=event, tokens=row.tokens)
            for i, (event, row) in enumerate(zip(batch, rows, strict=True))
        ]

    def save_snapshot(self, thread_id: str, upto: int, state: str) -> Stored:
        """Save projector state folded up to ``upto`` and append its SnapshotTaken event,
        in one transaction; the snapshot's seq is that event's seq."""
        _check_thread_id(thread_id)
        event = SnapshotTaken(upto=upto, at=now_utc())
        row = _encode(event, 0)  # a snapshot marker is no model text
        action = f"save a snapshot up to seq {upto} for thread {thread_id!r}"
        with self._lock, self._transaction(action) as connection:
            last = _last_seq(connection, thread_id)
            if not 0 <= upto <= last:
                msg = (
                    f"A snapshot of thread {thread_id!r} cannot cover seq {upto}: "
                    f"the thread's events run from 1 to {last}."
                )
                raise ValueError(msg)
            seq = last + 1
            connection.execute(_INSERT_THREAD, (thread_id, now_utc().isoformat()))
            connection.execute(
                _INSERT_EVENT, (thread_id, seq, row.kind, row.v, row.at, row.tokens, row.body)
            )
            connection.execute(
                "INSERT INTO snapshots (thread_id, seq, upto, state) VALUES (?, ?, ?, ?)",
                (thread_id, seq, upto, state),
            )
            self._count_written(len(state) + len(row.body))
        return Stored(thread_id=thread_id, seq=seq, event=event, tokens=row.tokens)

    def tail(
        self,
        thread_id: str,
        after: int = 0,
        limit: int = DEFAULT_LIMIT,
        history: bool = False,
    ) -> TailPage:
        """Up to ``limit`` (clamped to 1..MAX_LIMIT) events after ``after``. A first read
        (``after`` 0) without ``history`` starts after the latest snapshot; a reader that
        names where it is (``after`` > 0) gets every event after it, so a follower that falls
        behind a snapshot never loses events."""
        limit = clamped(limit)
        if history or after > 0:
            sql = (
                "SELECT seq, tokens, body FROM events WHERE thread_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?"
            )
            params: tuple[Any, ...] = (thread_id, after, limit + 1)
        else:
            sql = (
                "SELECT seq, tokens, body FROM events WHERE thread_id = ?"
                " AND seq > MAX(?, COALESCE((SELECT upto FROM snapshots WHERE thread_id = ?"
                " ORDER BY seq DESC LIMIT 1), 0))"
                " ORDER BY seq LIMIT ?"
            )
            params = (thread_id, after, thread_id, limit + 1)
        rows = self._fetch(f"read events of thread {thread_id!r} after seq {after}", sql, params)
        return page_of(thread_id, rows, limit, after)

    def read(self, thread_id: str, seq: int) -> Stored:
        """The event at ``seq`` in the thread, upcast to its kind's current version."""
        rows = self._fetch(
            f"read event {seq} of thread {thread_id!r}",
            "SELECT tokens, body FROM events WHERE thread_id = ? AND seq = ?",
            (thread_id, seq),
        )
        if not rows:
            msg = f"Thread {thread_id!r} has no event at seq {seq}."
            raise EventNotFound(msg)
        tokens, body = rows[0]
        return decode_row(thread_id, seq, tokens, body)

    def replay(self, thread_id: str, after: int = 0) -> Iterator[Stored]:
        """Every event after ``after`` in order, fetched a chunk at a time, snapshots or not."""
        cursor = after
        while True:
            rows = self._fetch(
                f"replay thread {thread_id!r} after seq {cursor}",
                "SELECT seq, tokens, body FROM events WHERE thread_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?",
                (thread_id, cursor, REPLAY_CHUNK),
            )
            for seq, tokens, body in rows:
                yield decode_row(thread_id, seq, tokens, body)
            if len(rows) < REPLAY_CHUNK:
                return
            cursor = rows[-1][0]

    def last_seq(self, thread_id: str) -> int:
        """The thread's highest seq, or 0 when it has no events."""
        rows = self._fetch(f"read the last seq of thread {thread_id!r}", _LAST_SEQ, (thread_id,))
        return int(rows[0][0])

    def thread_ids(self) -> list[str]:
        """Every thread with at least one event, in the order they were first written."""
        rows = self._fetch(
            "list threads", "SELECT thread_id FROM threads ORDER BY created_at, thread_id", ()
        )
        return [str(row[0]) for row in rows]

    def latest_snapshot(self, thread_id: str) -> Snapshot | None:
        """The thread's most recent snapshot, or None when it has none."""
        rows = self._fetch(
            f"read the latest snapshot of thread {thread_id!r}",
            "SELECT seq, upto, state FROM snapshots WHERE thread_id = ? ORDER BY seq DESC LIMIT 1",
            (thread_id,),
        )
        if not rows:
            return None
        seq, upto, state = rows[0]
        return Snapshot(seq=int(seq), upto=int(upto), state=str(state))

    # -- archiving (``condensate.eventlog.archive``) ----------------------------------------------------

    def rows(self, thread_id: str) -> ThreadRows | None:
        """Every row of the thread as stored, read in one transaction; None when the log has
        no such thread."""
        with self._lock:
            connection = self._open_connection()
            try:
                connection.execute("BEGIN")
                try:
                    return _rows(connection, thread_id)
                finally:
                    connection.execute("COMMIT")
            except sqlite3.Error as exc:
                msg = (
                    f"Could not read the rows of thread {thread_id!r} in the event log at "
                    f"{str(self.path)!r}: {exc}."
                )
                raise EventLogError(msg) from exc

    def archived(self, thread_id: str) -> ArchiveRecord | None:
        """The thread's archive record, when it was moved out of this log."""
        if not self._archives:
            return None
        rows = self._fetch(
            f"read the archive record of thread {thread_id!r}",
            _SELECT_ARCHIVE,
            (thread_id,),
        )
        return ArchiveRecord.from_row(rows[0]) if rows else None

    def record_archive(self, record: ArchiveRecord) -> None:
        """Record the thread's verified archive and remove its rows, in one transaction,
        provided they are still the rows the archive holds (their digest)."""
        thread_id = record.thread_id
        with self._lock, self._transaction(f"archive thread {thread_id!r}") as connection:
            found = connection.execute(
                "SELECT file FROM archives WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            record.refuse_archived(None if found is None else found[0])
            record.refuse_changed(_rows(connection, thread_id))
            connection.execute(_INSERT_ARCHIVE, record.values())
            for table in ("events", "snapshots", "threads"):
                # The triggers let these through: the archive that covers them is recorded.
                connection.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))  # noqa: S608

    def _count_written(self, size: int) -> None:
        """Called with the lock held, after a commit."""
        self._written += size
        if self._written >= CHECKPOINT_BYTES:
            self._written = 0
            self._checkpointer.request()

    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            msg = f"The event log at {str(self.path)!r} is closed."
            raise EventLogError(msg)
        return self._connection

    def _fetch(self, action: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            connection = self._open_connection()
            try:
                return connection.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                msg = f"Could not {action} in the event log at {str(self.path)!r}: {exc}."
                raise EventLogError(msg) from exc

    @contextlib.contextmanager
    def _transaction(self, action: str, *, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction; the caller holds ``_lock``. Without ``wait``, ``_Busy`` when
        another process holds SQLite's write lock, instead of waiting up to the busy timeout
        (the caller is an event loop, and falls back to a worker thread)."""
        connection = self._open_connection()
        try:
            _begin(connection, wait=wait)
            try:
                yield connection
                connection.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back on its own (e.g. a full disk).
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            msg = f"Could not {action} in the event log at {str(self.path)!r}: {exc}."
            raise EventLogError(msg) from exc


class _Busy(Exception):
    """Another process holds SQLite's write lock, and the caller would rather not wait."""


def _begin(connection: sqlite3.Connection, *, wait: bool) -> None:
    # IMMEDIATE takes the write lock up front, so the max(seq) read inside the transaction
    # cannot be raced by another process.
    if wait:
        connection.execute("BEGIN IMMEDIATE")
        return
    connection.execute("PRAGMA busy_timeout = 0")
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_BUSY:
            raise _Busy from exc
        raise
    finally:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def _check_thread_id(thread_id: str) -> None:
    if not thread_id:
        msg = "A thread id must be a non-empty string."
        raise ValueError(msg)


def _last_seq(connection: sqlite3.Connection, thread_id: str) -> int:
    return int(connection.execute(_LAST_SEQ, (thread_id,)).fetchone()[0])


def _encode(event: Event, tokens: int) -> _Row:
    return _Row(
        kind=event.kind, v=event.v, at=event.at.isoformat(), tokens=tokens, body=encode(event)
    )


def _rows(connection: sqlite3.Connection, thread_id: str) -> ThreadRows | None:
    created = connection.execute(
        "SELECT created_at FROM threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    events = connection.execute(
        "SELECT seq, kind, v, at, tokens, body FROM events WHERE thread_id = ? ORDER BY seq",
        (thread_id,),
    ).fetchall()
    if created is None and not events:
        return None
    snapshots = connection.execute(
        "SELECT seq, upto, state FROM snapshots WHERE thread_id = ? ORDER BY seq", (thread_id,)
    ).fetchall()
    return ThreadRows(
        thread_id=thread_id,
        created_at="" if created is None else str(created[0]),
        events=tuple(events),
        snapshots=tuple(snapshots),
    )
