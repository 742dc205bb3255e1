"""The PostgreSQL backend of ``eventlog.EventStore``, behind ``CONDENSATE_DATABASE_URL``.

psycopg 3 rather than asyncpg: it speaks both async (the daemon) and sync (tools that read a
log in place), LISTEN/NOTIFY included, and keeps to PostgreSQL's own text protocol and
libpq's connection strings (``sslmode``, ``service``, ``PGPASSFILE``), which operators of a
shared server already configure. One connection, its operations one at a time.

The same guarantees as SQLite: a per-thread lock (a transaction-scoped advisory lock) around
reading the last seq and inserting after it, with the primary key (thread, seq) behind it; a
batch in one transaction; triggers that refuse UPDATE and TRUNCATE on every table, and DELETE
but for the rows of a thread whose archive is recorded (``archives``, schema version 2; a
version 1 database is brought up to it when a store connects, only its triggers replaced).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import psycopg
from psycopg import sql

from condensate.errors import EventLogError, EventNotFound, ThreadOwnedElsewhere
from condensate.eventlog import (
    DEFAULT_LIMIT,
    ArchiveRecord,
    Lease,
    Snapshot,
    TailPage,
    ThreadRows,
    check_batch,
    clamped,
    decode_row,
    page_of,
)
from condensate.events import Event, SnapshotTaken, Stored, encode, now_utc

SCHEMA_VERSION = 2
TABLES = ("threads", "events", "snapshots")
"""The log's tables: append-only, but for an archived thread's rows. ``archives`` is
append-only; ``leases`` is not the log, and changes."""
CHANNEL = "condensate_events"
"""Every append NOTIFYs it with the thread's id (``fleet`` wakes tails of threads owned
elsewhere)."""
SCHEMA = """
CREATE TABLE IF NOT EXISTS condensate_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS threads (
    thread_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    thread_id TEXT NOT NULL,
    seq BIGINT NOT NULL CHECK (seq > 0),
    kind TEXT NOT NULL,
    v INTEGER NOT NULL,
    at TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE IF NOT EXISTS snapshots (
    thread_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    upto BIGINT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE IF NOT EXISTS leases (
    thread_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    owner_url TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS archives (
    thread_id TEXT PRIMARY KEY,
    file TEXT NOT NULL,
    host TEXT NOT NULL,
    archived_at TEXT NOT NULL,
    last_seq BIGINT NOT NULL,
    events BIGINT NOT NULL,
    snapshots BIGINT NOT NULL,
    digest TEXT NOT NULL
);
CREATE OR REPLACE FUNCTION condensate_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'condensate: % on % is refused: the event log is append-only',
        TG_OP, TG_TABLE_NAME;
END $$;
CREATE OR REPLACE FUNCTION condensate_delete_archived_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM archives a
               WHERE a.thread_id = OLD.thread_id AND a.last_seq >= OLD.seq) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'condensate: DELETE on % is refused: the event log is append-only '
        '(only the rows of an archived thread leave)', TG_TABLE_NAME;
END $$;
CREATE OR REPLACE FUNCTION condensate_delete_archived_thread() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM archives a WHERE a.thread_id = OLD.thread_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'condensate: DELETE on % is refused: the event log is append-only '
        '(only the rows of an archived thread leave)', TG_TABLE_NAME;
END $$;
CREATE OR REPLACE FUNCTION condensate_refuse_archived() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM archives a WHERE a.thread_id = NEW.thread_id) THEN
        RAISE EXCEPTION 'condensate: thread % is archived', NEW.thread_id;
    END IF;
    RETURN NEW;
END $$;
"""
TRIGGERS = """
CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE ON {table}
    FOR EACH ROW EXECUTE FUNCTION condensate_refuse_change();
CREATE OR REPLACE TRIGGER {table}_delete_archived_only BEFORE DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {delete};
CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION condensate_refuse_change();
"""
"""Each log table's triggers (a version 1 ``_append_only`` trigger, which refused DELETE
too, is replaced by the first of them)."""
ARCHIVE_TRIGGERS = """
CREATE OR REPLACE TRIGGER events_not_archived BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION condensate_refuse_archived();
CREATE OR REPLACE TRIGGER threads_not_archived BEFORE INSERT ON threads
    FOR EACH ROW EXECUTE FUNCTION condensate_refuse_archived();
CREATE OR REPLACE TRIGGER archives_append_only BEFORE UPDATE OR DELETE ON archives
    FOR EACH ROW EXECUTE FUNCTION condensate_refuse_change();
CREATE OR REPLACE TRIGGER archives_no_truncate BEFORE TRUNCATE ON archives
    FOR EACH STATEMENT EXECUTE FUNCTION condensate_refuse_change();
"""
_DELETE_FUNCTIONS = {
    "threads": "condensate_delete_archived_thread()",
    "events": "condensate_delete_archived_row()",
    "snapshots": "condensate_delete_archived_row()",
}
ARCHIVER = "condensate-archive"
"""The lease holder while a store without an owner (the command line) archives a thread."""
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id = %s"
_INSERT_THREAD = (
    "INSERT INTO threads (thread_id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING"
)
_INSERT_EVENT = (
    "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_SELECT_ARCHIVE = (
    "SELECT thread_id, file, host, archived_at, last_seq, events, snapshots, digest"
    " FROM archives WHERE thread_id = %s"
)
_INSERT_ARCHIVE = (
    "INSERT INTO archives (thread_id, file, host, archived_at, last_seq, events, snapshots, digest)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


_HOLD = (
    "INSERT INTO leases (thread_id, owner, owner_url, expires_at)"
    " VALUES (%s, %s, %s, now() + make_interval(secs => %s))"
    " ON CONFLICT (thread_id) DO UPDATE SET owner = EXCLUDED.owner,"
    " owner_url = EXCLUDED.owner_url, expires_at = EXCLUDED.expires_at"
    " WHERE leases.owner = EXCLUDED.owner{also}"
    " RETURNING owner"
)


@dataclass(frozen=True)
class Owner:
    """The daemon a store appends for: only threads whose lease it holds (or that have none
    yet, which it then takes)."""

    name: str
    url: str
    seconds: float


IDLE_IN_TRANSACTION_MS = 5_000
"""A session idle inside a transaction this long is ended by the server: a daemon frozen
mid-append (SIGSTOP, a VM paused) must not hold its thread's lease row, and so its takeover,
for longer. Condensate's own transactions never wait on anything but the database."""
LOCK_TIMEOUT_MS = 10_000
"""A statement waits at most this long for a row lock, then fails (and is tried again)."""
SESSION_OPTIONS = (
    f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
    f" -c lock_timeout={LOCK_TIMEOUT_MS}"
)


async def _connect(url: str) -> psycopg.AsyncConnection[Any]:
    try:
        return await psycopg.AsyncConnection.connect(
            url, connect_timeout=10, options=SESSION_OPTIONS
        )
    except psycopg.Error as exc:
        msg = f"Could not connect to the event log at {where(url)}: {exc}".strip()
        raise EventLogError(msg) from exc


def where(url: str) -> str:
    """The server a URL names, without its password: what error messages show."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL server in CONDENSATE_DATABASE_URL"
    host = info.get("host") or "localhost"
    return f"postgresql://{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


class PostgresStore:
    def __init__(
        self, connection: psycopg.AsyncConnection[Any], url: str, owner: Owner | None = None
    ) -> None:
        self._connection = connection
        self.url = url
        self._where = where(url)
        self._lock = anyio.Lock()
        self.owner = owner

    @classmethod
    async def connect(cls, url: str, owner: Owner | None = None) -> PostgresStore:
        """Connect, and create the schema when the database has none. With an ``owner``,
        appends hold the thread's lease for it (``fleet``)."""
        store = cls(await _connect(url), url, owner)
        await store._prepare()
        return store

    async def _prepare(self) -> None:
        async def create(cursor: psycopg.AsyncCursor[Any]) -> None:
            # One daemon at a time creates the schema: the others wait here, then find it.
            await cursor.execute(_LOCK, ("condensate-schema",))
            await cursor.execute(SCHEMA)
            for table in TABLES:
                statements = TRIGGERS.format(table=table, delete=_DELETE_FUNCTIONS[table])
                await cursor.execute(sql.SQL(statements))
            await cursor.execute(ARCHIVE_TRIGGERS)
            await cursor.execute("SELECT version FROM condensate_schema")
            found = await cursor.fetchone()
            if found is None:
                await cursor.execute(
                    "INSERT INTO condensate_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
                )
            elif found[0] > SCHEMA_VERSION:
                # Raised inside the transaction: the statements above are rolled back.
                msg = (
                    f"The event log at {self._where} has schema version {found[0]}; this "
                    f"Condensate reads up to version {SCHEMA_VERSION}."
                )
                raise EventLogError(msg)
            elif found[0] < SCHEMA_VERSION:
                await cursor.execute("UPDATE condensate_schema SET version = %s", (SCHEMA_VERSION,))

        await self._run("prepare the schema", create)

    async def _run(self, action: str, work: Any) -> Any:
        """``work(cursor)`` in one transaction, one at a time; a database error becomes an
        EventLogError naming what was being done and where."""
        async with self._lock:
            if self._connection.closed or self._connection.broken:
                # The server ended the session (a restart, a freeze past the idle timeout):
                # a new one, and this operation runs on it.
                self._connection = await _connect(self.url)
            try:
                async with self._connection.transaction(), self._connection.cursor() as cursor:
                    return await work(cursor)
            except psycopg.Error as exc:
                msg = f"Could not {action} in the event log at {self._where}: {exc}".strip()
                raise EventLogError(msg) from exc

    async def append(
        self, thread_id: str, events: Sequence[Event], tokens: Sequence[int]
    ) -> list[Stored]:
        check_batch(thread_id, events, tokens)
        batch = list(events)
        if not batch:
            return []
        rows = [
            (e.kind, e.v, e.at.isoformat(), n, encode(e))
            for e, n in zip(batch, tokens, strict=True)
        ]

        async def write(cursor: psycopg.AsyncCursor[Any]) -> int:
            first = await _next_seq(cursor, thread_id)
            await self._hold(cursor, thread_id)
            await cursor.execute(_INSERT_THREAD, (thread_id, now_utc().isoformat()))
            await cursor.executemany(
                _INSERT_EVENT, [(thread_id, first + i, *row) for i, row in enumerate(rows)]
            )
            await cursor.execute("SELECT pg_notify(%s, %s)", (CHANNEL, thread_id))
            return first

        first = await self._run(f"append {len(rows)} event(s) to thread {thread_id!r}", write)
        return [
            Stored(thread_id=thread_id, seq=first + i, event=event, tokens=count)
            for i, (event, count) in enumerate(zip(batch, tokens, strict=True))
        ]

    async def save_snapshot(self, thread_id: str, upto: int, state: str) -> Stored:
        event = SnapshotTaken(upto=upto, at=now_utc())

        async def write(cursor: psycopg.AsyncCursor[Any]) -> int:
            seq = await _next_seq(cursor, thread_id)
            await self._hold(cursor, thread_id)
            if not 0 <= upto < seq:
                msg = (
                    f"A snapshot of thread {thread_id!r} cannot cover seq {upto}: "
                    f"the thread's events run from 1 to {seq - 1}."
                )
                raise ValueError(msg)
            await cursor.execute(_INSERT_THREAD, (thread_id, now_utc().isoformat()))
            await cursor.execute(
                _INSERT_EVENT,
                (thread_id, seq, event.kind, event.v, event.at.isoformat(), 0, encode(event)),
            )
            await cursor.execute(
                "INSERT INTO snapshots (thread_id, seq, upto, state) VALUES (%s, %s, %s, %s)",
                (thread_id, seq, upto, state),
            )
            return seq

        seq = await self._run(f"save a snapshot up to seq {upto} for thread {thread_id!r}", write)
        return Stored(thread_id=thread_id, seq=seq, event=event, tokens=0)

    async def tail(
        self, thread_id: str, after: int = 0, limit: int = DEFAULT_LIMIT, history: bool = False
    ) -> TailPage:
        limit = clamped(limit)
        if history or after > 0:
            query = (
                "SELECT seq, tokens, body FROM events WHERE thread_id = %s AND seq > %s"
                " ORDER BY seq LIMIT %s"
            )
            params: tuple[Any, ...] = (thread_id, after, limit + 1)
        else:
            query = (
                "SELECT seq, tokens, body FROM events WHERE thread_id = %s"
                " AND seq > GREATEST(%s, COALESCE((SELECT upto FROM snapshots"
                " WHERE thread_id = %s ORDER BY seq DESC LIMIT 1), 0))"
                " ORDER BY seq LIMIT %s"
            )
            params = (thread_id, after, thread_id, limit + 1)
        rows = await self._fetch(
            f"read events of thread {thread_id!r} after {after}", query, params
        )
        return page_of(thread_id, rows, limit, after)

    async def read(self, thread_id: str, seq: int) -> Stored:
        rows = await self._fetch(
            f"read event {seq} of thread {thread_id!r}",
            "SELECT tokens, body FROM events WHERE thread_id = %s AND seq = %s",
            (thread_id, seq),
        )
        if not rows:
            msg = f"Thread {thread_id!r} has no event at seq {seq}."
            raise EventNotFound(msg)
        tokens, body = rows[0]
        return decode_row(thread_id, seq, tokens, body)

    async def events(self, thread_id: str, after: int = 0) -> list[Stored]:
        rows = await self._fetch(
            f"replay thread {thread_id!r} after seq {after}",
            "SELECT seq, tokens, body FROM events WHERE thread_id = %s AND seq > %s ORDER BY seq",
            (thread_id, after),
        )
        return [decode_row(thread_id, seq, tokens, body) for seq, tokens, body in rows]

    async def last_seq(self, thread_id: str) -> int:
        rows = await self._fetch(
            f"read the last seq of thread {thread_id!r}", _LAST_SEQ, (thread_id,)
        )
        return int(rows[0][0])

    async def thread_ids(self) -> list[str]:
        rows = await self._fetch(
            "list threads", "SELECT thread_id FROM threads ORDER BY created_at, thread_id", ()
        )
        return [str(row[0]) for row in rows]

    async def latest_snapshot(self, thread_id: str) -> Snapshot | None:
        rows = await self._fetch(
            f"read the latest snapshot of thread {thread_id!r}",
            "SELECT seq, upto, state FROM snapshots WHERE thread_id = %s ORDER BY seq DESC LIMIT 1",
            (thread_id,),
        )
        if not rows:
            return None
        seq, upto, state = rows[0]
        return Snapshot(seq=int(seq), upto=int(upto), state=str(state))

    # -- archiving (``condensate.eventlog.archive``) ----------------------------------------------------

    async def rows(self, thread_id: str) -> ThreadRows | None:
        async def read(cursor: psycopg.AsyncCursor[Any]) -> ThreadRows | None:
            await cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return await _rows(cursor, thread_id)

        found: ThreadRows | None = await self._run(f"read the rows of thread {thread_id!r}", read)
        return found

    async def archived(self, thread_id: str) -> ArchiveRecord | None:
        rows = await self._fetch(
            f"read the archive record of thread {thread_id!r}",
            _SELECT_ARCHIVE,
            (thread_id,),
        )
        return ArchiveRecord.from_row(rows[0]) if rows else None

    async def record_archive(self, record: ArchiveRecord) -> None:
        thread_id = record.thread_id

        async def write(cursor: psycopg.AsyncCursor[Any]) -> None:
            await cursor.execute(_LOCK, (thread_id,))  # no append while the rows are compared
            await cursor.execute("SELECT file FROM archives WHERE thread_id = %s", (thread_id,))
            found = await cursor.fetchone()
            record.refuse_archived(None if found is None else found[0])
            await self._hold_to_archive(cursor, thread_id)
            record.refuse_changed(await _rows(cursor, thread_id))
            await cursor.execute(_INSERT_ARCHIVE, record.values())
            for table in (*TABLES, "leases"):
                # The triggers let these through: the archive that covers them is recorded.
                await cursor.execute(
                    sql.SQL("DELETE FROM {} WHERE thread_id = %s").format(sql.Identifier(table)),
                    (thread_id,),
                )

        await self._run(f"archive thread {thread_id!r}", write)

    async def _hold_to_archive(self, cursor: psycopg.AsyncCursor[Any], thread_id: str) -> None:
        """The thread's lease, taken for the archiving transaction (and removed with the
        thread): refused, naming the holder, while another daemon holds it; a daemon that
        looks for orphans meanwhile waits for the transaction, then finds no thread."""
        owner = self.owner or Owner(ARCHIVER, "", 60.0)
        await cursor.execute(
            _HOLD.format(also=" OR leases.expires_at < now()"),
            (thread_id, owner.name, owner.url, owner.seconds),
        )
        if await cursor.fetchone() is not None:
            return
        await cursor.execute(
            "SELECT owner, owner_url FROM leases WHERE thread_id = %s", (thread_id,)
        )
        holder = await cursor.fetchone()
        name, url = holder if holder is not None else ("unknown", "")
        raise ThreadOwnedElsewhere(thread_id, name, url)

    async def close(self) -> None:
        await self._connection.close()

    # -- leases (``fleet``) -------------------------------------------------------------------

    async def _hold(self, cursor: psycopg.AsyncCursor[Any], thread_id: str) -> None:
        """Inside an append: the thread's lease is this store's owner's (taken when the
        thread has none, and extended), or the append is refused naming who holds it."""
        owner = self.owner
        if owner is None:
            return
        await cursor.execute(
            _HOLD.format(also=""), (thread_id, owner.name, owner.url, owner.seconds)
        )
        if await cursor.fetchone() is not None:
            return
        await cursor.execute(
            "SELECT owner, owner_url, expires_at FROM leases WHERE thread_id = %s", (thread_id,)
        )
        found = await cursor.fetchone()
        holder = Lease(*found) if found is not None else Lease("nobody", "", now_utc())
        raise ThreadOwnedElsewhere(thread_id, holder.owner, holder.url)

    async def claim(self, thread_id: str, owner: str, url: str, seconds: float) -> bool:
        """Take the thread's lease when nobody holds it, its holder let it expire, or it is
        ``owner``'s already; whether ``owner`` holds it now."""

        async def take(cursor: psycopg.AsyncCursor[Any]) -> bool:
            await cursor.execute(
                _HOLD.format(also=" OR leases.expires_at < now()"),
                (thread_id, owner, url, seconds),
            )
            return await cursor.fetchone() is not None

        held: bool = await self._run(f"claim thread {thread_id!r}", take)
        return held

    async def renew(self, owner: str, seconds: float) -> set[str]:
        """Extend every lease ``owner`` holds; the threads it still holds."""
        rows = await self._fetch(
            f"renew the leases of {owner}",
            "UPDATE leases SET expires_at = now() + make_interval(secs => %s)"
            " WHERE owner = %s RETURNING thread_id",
            (seconds, owner),
        )
        return {str(row[0]) for row in rows}

    async def release(self, owner: str) -> int:
        """Give up every lease ``owner`` holds (a daemon stopping cleanly): another daemon
        may claim its threads at once. How many it held."""
        rows = await self._fetch(
            f"release the leases of {owner}",
            "DELETE FROM leases WHERE owner = %s RETURNING thread_id",
            (owner,),
        )
        return len(rows)

    async def orphans(self) -> list[str]:
        """Threads whose lease expired, or that never had one, oldest first."""
        rows = await self._fetch(
            "list threads without a live lease",
            "SELECT t.thread_id FROM threads t LEFT JOIN leases l USING (thread_id)"
            " WHERE l.thread_id IS NULL OR l.expires_at < now() ORDER BY t.created_at",
            (),
        )
        return [str(row[0]) for row in rows]

    async def lease(self, thread_id: str) -> Lease | None:
        rows = await self._fetch(
            f"read the lease of thread {thread_id!r}",
            "SELECT owner, owner_url, expires_at FROM leases WHERE thread_id = %s",
            (thread_id,),
        )
        return Lease(*rows[0]) if rows else None

    async def leases(self) -> dict[str, Lease]:
        rows = await self._fetch(
            "read the leases", "SELECT thread_id, owner, owner_url, expires_at FROM leases", ()
        )
        return {str(row[0]): Lease(*row[1:]) for row in rows}

    async def _fetch(self, action: str, query: str, params: tuple[Any, ...]) -> list[Any]:
        async def read(cursor: psycopg.AsyncCursor[Any]) -> list[Any]:
            await cursor.execute(query, params)
            return await cursor.fetchall()

        rows: list[Any] = await self._run(action, read)
        return rows


async def _next_seq(cursor: psycopg.AsyncCursor[Any], thread_id: str) -> int:
    """The thread's next seq, with the thread's write lock held until the transaction ends."""
    await cursor.execute(_LOCK, (thread_id,))
    await cursor.execute(_LAST_SEQ, (thread_id,))
    found = await cursor.fetchone()
    return int(found[0]) + 1 if found is not None else 1


async def _rows(cursor: psycopg.AsyncCursor[Any], thread_id: str) -> ThreadRows | None:
    await cursor.execute("SELECT created_at FROM threads WHERE thread_id = %s", (thread_id,))
    created = await cursor.fetchone()
    await cursor.execute(
        "SELECT seq, kind, v, at, tokens, body FROM events WHERE thread_id = %s ORDER BY seq",
        (thread_id,),
    )
    events = await cursor.fetchall()
    if created is None and not events:
        return None
    await cursor.execute(
        "SELECT seq, upto, state FROM snapshots WHERE thread_id = %s ORDER BY seq", (thread_id,)
    )
    snapshots = await cursor.fetchall()
    return ThreadRows(
        thread_id=thread_id,
        created_at="" if created is None else str(created[0]),
        events=tuple(tuple(row) for row in events),
        snapshots=tuple(tuple(row) for row in snapshots),
    )
