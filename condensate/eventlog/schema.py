"""The event log's SQLite schema, and how ``sqlite_sync`` prepares a connection it opens.

Preparing sets the pragmas (busy timeout, WAL, synchronous, the writer's own checkpoint
backstop), then creates the tables and the triggers that keep every row append-only, under
a schema version. Apart from ``sqlite_sync`` so the layout of the file reads in one place.

Version 2 added ``archives``: a DELETE is let through only for the rows of a thread whose
archive is recorded there (and no row past the seq it covers), and an archived thread takes
no new row. A version 1 file is brought up to 2 when a writer opens it: its three DELETE
triggers are replaced; no row is touched.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from condensate.errors import EventLogError

BUSY_TIMEOUT_MS = 5000
SCHEMA_VERSION = 2
BACKSTOP_PAGES = 20_000
"""The writer checkpoints by itself past this WAL size, should the background one fall behind."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS events (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        v INTEGER NOT NULL,
        at TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS snapshots (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        upto INTEGER NOT NULL,
        state TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS threads (
        thread_id TEXT NOT NULL PRIMARY KEY,
        created_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS archives (
        thread_id TEXT NOT NULL PRIMARY KEY,
        file TEXT NOT NULL,
        host TEXT NOT NULL,
        archived_at TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        events INTEGER NOT NULL,
        snapshots INTEGER NOT NULL,
        digest TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'append-only'); END""",
    # A row leaves only with its thread, once an archive that covers its seq is recorded.
    """CREATE TRIGGER IF NOT EXISTS events_delete_archived_only BEFORE DELETE ON events
    WHEN NOT EXISTS (SELECT 1 FROM archives WHERE thread_id = OLD.thread_id
        AND last_seq >= OLD.seq)
    BEGIN SELECT RAISE(ABORT, 'append-only: only an archived thread''s rows leave'); END""",
    """CREATE TRIGGER IF NOT EXISTS events_not_archived BEFORE INSERT ON events
    WHEN EXISTS (SELECT 1 FROM archives WHERE thread_id = NEW.thread_id)
    BEGIN SELECT RAISE(ABORT, 'the thread is archived'); END""",
    """CREATE TRIGGER IF NOT EXISTS snapshots_no_update BEFORE UPDATE ON snapshots
    BEGIN SELECT RAISE(ABORT, 'append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS snapshots_delete_archived_only BEFORE DELETE ON snapshots
    WHEN NOT EXISTS (SELECT 1 FROM archives WHERE thread_id = OLD.thread_id
        AND last_seq >= OLD.seq)
    BEGIN SELECT RAISE(ABORT, 'append-only: only an archived thread''s rows leave'); END""",
    # INSERT OR REPLACE deletes the old row without firing DELETE triggers (unless a
    # connection turns on recursive_triggers), so a duplicate key is refused on insert too.
    """CREATE TRIGGER IF NOT EXISTS events_no_replace BEFORE INSERT ON events
    WHEN EXISTS (SELECT 1 FROM events WHERE thread_id = NEW.thread_id AND seq = NEW.seq)
    BEGIN SELECT RAISE(ABORT, 'append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS snapshots_no_replace BEFORE INSERT ON snapshots
    WHEN EXISTS (SELECT 1 FROM snapshots WHERE thread_id = NEW.thread_id AND seq = NEW.seq)
    BEGIN SELECT RAISE(ABORT, 'append-only'); END""",
    # IGNORE rather than ABORT, so that append's INSERT OR IGNORE keeps working.
    """CREATE TRIGGER IF NOT EXISTS threads_no_replace BEFORE INSERT ON threads
    WHEN EXISTS (SELECT 1 FROM threads WHERE thread_id = NEW.thread_id)
    BEGIN SELECT RAISE(IGNORE); END""",
    """CREATE TRIGGER IF NOT EXISTS threads_not_archived BEFORE INSERT ON threads
    WHEN EXISTS (SELECT 1 FROM archives WHERE thread_id = NEW.thread_id)
    BEGIN SELECT RAISE(ABORT, 'the thread is archived'); END""",
    """CREATE TRIGGER IF NOT EXISTS threads_no_update BEFORE UPDATE ON threads
    BEGIN SELECT RAISE(ABORT, 'append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS threads_delete_archived_only BEFORE DELETE ON threads
    WHEN NOT EXISTS (SELECT 1 FROM archives WHERE thread_id = OLD.thread_id)
    BEGIN SELECT RAISE(ABORT, 'append-only: only an archived thread''s rows leave'); END""",
    """CREATE TRIGGER IF NOT EXISTS archives_no_update BEFORE UPDATE ON archives
    BEGIN SELECT RAISE(ABORT, 'append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS archives_no_delete BEFORE DELETE ON archives
    BEGIN SELECT RAISE(ABORT, 'append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS archives_no_replace BEFORE INSERT ON archives
    WHEN EXISTS (SELECT 1 FROM archives WHERE thread_id = NEW.thread_id)
    BEGIN SELECT RAISE(ABORT, 'the thread is archived already'); END""",
)
_VERSION_1_TRIGGERS = ("events_no_delete", "snapshots_no_delete", "threads_no_delete")
"""Version 1's DELETE triggers (refusing every DELETE), replaced by version 2's."""


def create(connection: sqlite3.Connection) -> None:
    """Create (or bring up to this version) the tables and triggers, inside the caller's
    transaction; a log's file and an archive's hold the same layout."""
    for name in _VERSION_1_TRIGGERS:
        connection.execute(f"DROP TRIGGER IF EXISTS {name}")
    for statement in _SCHEMA:
        connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def prepare(connection: sqlite3.Connection, path: Path) -> None:
    """Set the pragmas and create the schema; EventLogError when the file cannot be used."""
    try:
        # busy_timeout first, so switching to WAL waits for other openers instead of failing.
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            msg = f"The event log at {str(path)!r} could not switch to WAL mode (it is {mode!r})."
            raise EventLogError(msg)
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
        connection.execute("BEGIN IMMEDIATE")
        try:
            version = int(connection.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                msg = (
                    f"The event log at {str(path)!r} has schema version {version}; "
                    f"this Condensate knows up to {SCHEMA_VERSION}."
                )
                raise EventLogError(msg)
            create(connection)
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        msg = f"Could not prepare the event log at {str(path)!r}: {exc}."
        raise EventLogError(msg) from exc
