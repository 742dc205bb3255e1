"""Archiving a finished thread: its rows leave the live log for a file of their own, and every
reader still finds them there; and exporting a thread's events as JSON lines.

An archive is a SQLite file in the log's own layout (``<archive directory>/<thread>.db``),
holding the thread's rows byte for byte. It is written under a temporary name, flushed to
disk, read back and compared with the digest of the live rows, and only then renamed into
place. Then, in one transaction, the log records the archive (``archives``) and removes the
thread's rows as a whole, provided they still have that digest; the database lets those rows
go only because that record covers them, and takes no new row for the thread after. No row is
ever changed, and every event stays readable at its seq from the archive (``located``).

The archive directory is ``archive/`` beside the SQLite log, or in the state directory for a
PostgreSQL log (a fleet's archive files stay on the host that wrote them; the record names it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import structlog

from condensate import api
from condensate.core.projector import Projection
from condensate.core.projector.snapshot import load as from_snapshot
from condensate.core.queries import untaken_input
from condensate.errors import EventLogError, Refused
from condensate.eventlog import ArchiveRecord, EventStore, ThreadRows, decode_row, digest, schema
from condensate.eventlog.rebuild import rebuilt
from condensate.eventlog.sqlite import SqliteStore
from condensate.eventlog.sqlite_sync import EventLog
from condensate.events import now_utc
from condensate.settings import Settings
from condensate.statedir import DIR_MODE, FILE_MODE

log = structlog.get_logger()

ARCHIVE_DIR = "archive"
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def directory_of(settings: Settings, db: str | None = None) -> Path:
    """Where a log's archive files are: beside the SQLite file ``db`` names, else in the
    state directory (beside its SQLite log, or for the PostgreSQL one)."""
    return (Path(db).parent if db else settings.home) / ARCHIVE_DIR


def file_name(thread_id: str) -> str:
    """The archive file's name: the thread's id when it is a plain name, else its hash."""
    if set(thread_id) <= _PLAIN and len(thread_id) <= 100:
        return f"{thread_id}.db"
    return f"thread-{hashlib.sha256(thread_id.encode()).hexdigest()[:24]}.db"


# -- writing and reading archive files ----------------------------------------------------------


def write_file(rows: ThreadRows, directory: Path) -> str:
    """Write the thread's rows to its archive file and return the file's name: under a
    temporary name, flushed, read back and compared by digest, then renamed into place (and
    the directory flushed). EventLogError, and no archive file, when any step fails."""
    directory.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    name = file_name(rows.thread_id)
    final, partial = directory / name, directory / f".{name}.partial"
    try:
        partial.unlink(missing_ok=True)  # a copy a crash left half-written
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        _copy(rows, partial)
        with partial.open("rb+") as handle:
            os.fsync(handle.fileno())
        copied = read_rows(partial, rows.thread_id)
        if copied is None or digest(copied) != digest(rows):
            msg = f"The archive written to {partial} does not read back as the rows copied."
            raise EventLogError(msg)
        os.replace(partial, final)
        _sync_directory(directory)
    except (OSError, sqlite3.Error) as exc:
        partial.unlink(missing_ok=True)
        msg = f"Could not write the archive of thread {rows.thread_id!r} to {final}: {exc}."
        raise EventLogError(msg) from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return name


def _copy(rows: ThreadRows, path: Path) -> None:
    """The rows into a new SQLite file of the log's layout, one self-contained file (no WAL)."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = DELETE")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("BEGIN IMMEDIATE")
        schema.create(connection)
        thread = rows.thread_id
        if rows.created_at:
            connection.execute(
                "INSERT INTO threads (thread_id, created_at) VALUES (?, ?)",
                (thread, rows.created_at),
            )
        connection.executemany(
            "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(thread, *row) for row in rows.events],
        )
        connection.executemany(
            "INSERT INTO snapshots (thread_id, seq, upto, state) VALUES (?, ?, ?, ?)",
            [(thread, *row) for row in rows.snapshots],
        )
        connection.execute("COMMIT")
    finally:
        connection.close()


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_rows(path: Path, thread_id: str) -> ThreadRows | None:
    """A thread's rows from a log or archive file, opened read only."""
    with EventLog.open_read_only(path) as archived:
        return archived.rows(thread_id)


def open_archive(record: ArchiveRecord, directory: Path) -> EventLog:
    """The archive file of ``record``, opened read only, once its rows are found to have the
    digest the log recorded (EventLogError naming the file otherwise)."""
    path = directory / record.file
    if not path.exists():
        msg = (
            f"Thread {record.thread_id!r} was archived on {record.host} to {record.file}, "
            f"which is not in {directory}."
        )
        raise EventLogError(msg)
    archived = EventLog.open_read_only(path)
    try:
        rows = archived.rows(record.thread_id)
        if rows is None or digest(rows) != record.digest:
            msg = (
                f"The archive {path} does not hold the rows the log recorded for thread "
                f"{record.thread_id!r} (their digest differs): it changed after it was written."
            )
            raise EventLogError(msg)
    except BaseException:
        archived.close()
        raise
    return archived


# -- the thread, wherever it is ------------------------------------------------------------------


@contextlib.asynccontextmanager
async def located(store: EventStore, thread_id: str, directory: Path) -> AsyncIterator[EventStore]:
    """The store that holds the thread: the live log, or when the thread was archived, its
    archive file (read only, its digest checked). A thread in neither: the live log, which
    has no events for it."""
    if await store.last_seq(thread_id) > 0:
        yield store
        return
    record = await store.archived(thread_id)
    if record is None:
        yield store
        return
    archived = SqliteStore(await anyio.to_thread.run_sync(open_archive, record, directory))
    try:
        yield archived
    finally:
        await archived.close()


async def rebuilt_anywhere(store: EventStore, thread_id: str, directory: Path) -> Projection:
    """The thread's view rebuilt from the live log or its archive (``located``)."""
    async with located(store, thread_id, directory) as found:
        return await rebuilt(found, thread_id)


async def thread_rows(store: EventStore, thread_id: str, directory: Path) -> ThreadRows:
    """Every row of the thread, from the live log or its archive; Refused (404) when it is
    in neither."""
    async with located(store, thread_id, directory) as found:
        rows = await found.rows(thread_id)
    if rows is None:
        raise Refused(
            code="unknown-thread",
            detail=f"There is no thread {thread_id!r} in the log, nor in its archive.",
        )
    return rows


# -- exporting ----------------------------------------------------------------------------------


def export_lines(rows: ThreadRows) -> Iterator[str]:
    """The thread's events as JSON lines, in seq order, history included: each line is
    ``{"seq": N, "tokens": T, ...}`` followed by the event exactly as the log stores it (an
    event with a ``tokens`` of its own keeps that one, as the tail does) (its
    stored text, at the version it was written; ``condensate replay`` reads the file)."""
    for seq, _kind, _v, _at, tokens, body in rows.events:
        yield _exported(rows.thread_id, seq, tokens, body)


def _exported(thread_id: str, seq: int, tokens: int, body: str) -> str:
    text = body.strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not value or "seq" in value:
        msg = f"Event {seq} of thread {thread_id!r} is not an event object: {text[:80]!r}."
        raise EventLogError(msg)
    # An event with a ``tokens`` field of its own (the baseline's size, a refusal's count)
    # keeps that one in place of its count, as the tail sends it.
    count = "" if "tokens" in value else f'"tokens":{tokens},'
    if "\n" in text or "\r" in text:
        # Whitespace between a raw row's tokens (the log's own rows never have any).
        fields = {"seq": seq} if count == "" else {"seq": seq, "tokens": tokens}
        return json.dumps({**fields, **value}, separators=(",", ":"))
    # The stored text itself, spliced after the fields: not re-encoded.
    return f'{{"seq":{seq},{count}{text[1:]}'


def write_export(path: Path, rows: ThreadRows) -> int:
    """Export the thread's events to ``path``; how many were written."""
    count = 0
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for line in export_lines(rows):
            handle.write(line + "\n")
            count += 1
    return count


# -- archiving ----------------------------------------------------------------------------------


def folded(rows: ThreadRows) -> Projection:
    """The thread's view from its rows: the latest snapshot, then the events after it."""
    view = Projection()
    upto = 0
    if rows.snapshots:
        _seq, upto, state = rows.snapshots[-1]
        view = from_snapshot(state)
    for seq, _kind, _v, _at, tokens, body in rows.events:
        if seq > upto:
            view.apply(decode_row(rows.thread_id, seq, tokens, body))
    return view


def unfinished(view: Projection, thread_id: str) -> str | None:
    """Why a thread is not finished, as its log shows it, or None when it is."""
    if view.turn_open:
        return "its last turn never ended (a daemon stopped during it; the daemon resumes it)"
    if untaken_input(view):
        return "a message it was sent still waits for a turn"
    if view.ask is not None:
        answer = f"condensate compact {thread_id} --answer decline"
        return f"its ask {view.ask.ask_id} is open (answer it first: {answer})"
    return None


async def archive_thread(store: EventStore, thread_id: str, directory: Path) -> ArchiveRecord:
    """Move a finished thread out of the live log into its archive file: copied and verified
    first, then recorded and removed in one transaction. Refused: a thread the log does not
    hold (404), one archived already or not finished (409)."""
    record = await store.archived(thread_id)
    if record is not None:
        raise Refused(
            code="thread-archived",
            detail=f"Thread {thread_id!r} is archived already ({record.file}, "
            f"{record.archived_at}).",
        )
    rows = await store.rows(thread_id)
    if rows is None:
        raise Refused(code="unknown-thread", detail=f"There is no thread {thread_id!r}.")
    why = unfinished(await anyio.to_thread.run_sync(folded, rows), thread_id)
    if why is not None:
        raise Refused(
            code="thread-not-finished",
            detail=f"Thread {thread_id!r} is not finished: {why}.",
        )
    name = await anyio.to_thread.run_sync(write_file, rows, directory)
    record = ArchiveRecord(
        thread_id=thread_id,
        file=name,
        host=socket.gethostname(),
        archived_at=now_utc().isoformat(),
        last_seq=rows.last_seq,
        events=len(rows.events),
        snapshots=len(rows.snapshots),
        digest=digest(rows),
    )
    try:
        await store.record_archive(record)
    except BaseException:
        await _discard(store, thread_id, directory / name)
        raise
    log.info("thread_archived", thread=thread_id, file=name, events=record.events)
    return record


async def _discard(store: EventStore, thread_id: str, path: Path) -> None:
    """Remove an archive file its log did not record (the thread's rows stay in the log);
    kept when the log cannot say (its commit may have gone through)."""
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        if await store.archived(thread_id) is None:
            await anyio.Path(path).unlink(missing_ok=True)


def record_answer(record: ArchiveRecord, directory: Path) -> api.Archived:
    """What ``POST /threads/:id/archive`` answers."""
    return api.Archived(
        thread=record.thread_id,
        file=str(directory / record.file),
        host=record.host,
        archived_at=record.archived_at,
        last_seq=record.last_seq,
        events=record.events,
        snapshots=record.snapshots,
        digest=record.digest,
    )


def record_json(record: ArchiveRecord, directory: Path) -> dict[str, Any]:
    """What ``POST /threads/:id/archive`` and ``condensate archive --json`` answer."""
    return record_answer(record, directory).dump()
