"""The PostgreSQL backend of ``eventlog.EventStore``, behind ``CONDENSATE_DATABASE_URL``.

psycopg 3 rather than asyncpg: it speaks both async (the daemon) and sync (tools that read a
log in place), LISTEN/NOTIFY included, and keeps to PostgreSQL's own text protocol and
libpq's connection strings (``sslmode``, ``service``, ``PGPASSFILE``), which operators of a
shared server already configure. One connection, its operations one at a time.

The same guarantees as SQLite: a per-thread lock (a transaction-scoped advisory lock) around
reading the last seq and inserting after it, with the primary key (thread, seq) behind it; a
batch in one transaction; triggers that refuse UPDATE, DELETE and TRUNCATE on every table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import psycopg
from psycopg import sql

from condensate.errors import EventLogError, EventNotFound
from condensate.eventlog import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Snapshot,
    TailPage,
    check_batch,
    decode_row,
)
from condensate.events import Event, SnapshotTaken, Stored, encode, now_utc

SCHEMA_VERSION = 1
TABLES = ("threads", "events", "snapshots")
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
CREATE OR REPLACE FUNCTION condensate_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'condensate: % on % is refused: the event log is append-only',
        TG_OP, TG_TABLE_NAME;
END $$;
"""
TRIGGERS = """
CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION condensate_refuse_change();
CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION condensate_refuse_change();
"""
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id = %s"
_INSERT_THREAD = (
    "INSERT INTO threads (thread_id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING"
)
_INSERT_EVENT = (
    "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def where(url: str) -> str:
    """The server a URL names, without its password: what error messages show."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL server in CONDENSATE_DATABASE_URL"
    host = info.get("host") or "localhost"
    return f"postgresql://{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


class PostgresStore:
    def __init__(self, connection: psycopg.AsyncConnection[Any], url: str) -> None:
        self._connection = connection
        self._where = where(url)
        self._lock = anyio.Lock()

    @classmethod
    async def connect(cls, url: str) -> PostgresStore:
        """Connect, and create the schema when the database has none."""
        try:
            connection = await psycopg.AsyncConnection.connect(url, connect_timeout=10)
        except psycopg.Error as exc:
            msg = f"Could not connect to the event log at {where(url)}: {exc}".strip()
            raise EventLogError(msg) from exc
        store = cls(connection, url)
        await store._prepare()
        return store

    async def _prepare(self) -> None:
        async def create(cursor: psycopg.AsyncCursor[Any]) -> None:
            # One daemon at a time creates the schema: the others wait here, then find it.
            await cursor.execute(_LOCK, ("condensate-schema",))
            await cursor.execute(SCHEMA)
            for table in TABLES:
                await cursor.execute(sql.SQL(TRIGGERS.format(table=table)))
            await cursor.execute("SELECT version FROM condensate_schema")
            found = await cursor.fetchone()
            if found is None:
                await cursor.execute(
                    "INSERT INTO condensate_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
                )
            elif found[0] != SCHEMA_VERSION:
                msg = (
                    f"The event log at {self._where} has schema version {found[0]}; this "
                    f"Condensate reads version {SCHEMA_VERSION}."
                )
                raise EventLogError(msg)

        await self._run("prepare the schema", create)

    async def _run(self, action: str, work: Any) -> Any:
        """``work(cursor)`` in one transaction, one at a time; a database error becomes an
        EventLogError naming what was being done and where."""
        async with self._lock:
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
            await cursor.execute(_INSERT_THREAD, (thread_id, now_utc().isoformat()))
            await cursor.executemany(
                _INSERT_EVENT, [(thread_id, first + i, *row) for i, row in enumerate(rows)]
            )
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
        limit = max(1, min(limit, MAX_LIMIT))
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
        page = [decode_row(thread_id, seq, tokens, body) for seq, tokens, body in rows[:limit]]
        return TailPage(
            events=page, next_after=page[-1].seq if page else after, has_more=len(rows) > limit
        )

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

    async def close(self) -> None:
        await self._connection.close()

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
