"""The event-log contract (``condensate.eventlog``), run against every backend: SQLite in a
temporary file and a real PostgreSQL server (``tests.integration.postgres``). Per-thread
seqs with no gap, batches in one transaction, append-only rows, upcasting, snapshots,
``tail`` and archiving (rows leave only for a verified, recorded archive) behave the same on
both."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from condensate.core.projector import snapshot
from condensate.errors import EventLogError, EventNotFound, Refused
from condensate.eventlog import MAX_LIMIT, ArchiveRecord, EventStore, archive, digest
from condensate.eventlog.postgres import PostgresStore
from condensate.eventlog.rebuild import rebuilt
from condensate.eventlog.sqlite import SqliteStore
from condensate.events import (
    AssistantMessage,
    Event,
    ModelUsage,
    SnapshotTaken,
    ThreadCreated,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

AT = datetime(2026, 12, 1, tzinfo=UTC)
BACKENDS = ["sqlite", "postgres"]


@dataclass
class Backend:
    """A store, and a way around it to the database itself (as another program would)."""

    name: str
    store: EventStore
    raw: Callable[[str, tuple[Any, ...]], None]
    """Run one statement directly; raises what the database raises."""
    open: Callable[[], Awaitable[EventStore]]
    """Another store on the same database, as a daemon that starts would open it."""


def _sqlite_raw(path: Path) -> Callable[[str, tuple[Any, ...]], None]:
    def run(statement: str, params: tuple[Any, ...]) -> None:
        with sqlite3.connect(path) as connection:
            connection.execute(statement.replace("%s", "?"), params)

    return run


def _postgres_raw(url: str) -> Callable[[str, tuple[Any, ...]], None]:
    def run(statement: str, params: tuple[Any, ...]) -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(statement, params)

    return run


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "log.db"

        async def opened() -> EventStore:
            return SqliteStore.open(path)

        raw = _sqlite_raw(path)
    else:
        url = request.getfixturevalue("postgres_url")

        async def opened() -> EventStore:
            return await PostgresStore.connect(url)

        raw = _postgres_raw(url)
    backend = Backend(request.param, await opened(), raw, opened)
    try:
        yield backend
    finally:
        await backend.store.close()


def said(text: str) -> UserMessage:
    return UserMessage(at=AT, text=text)


async def put(store: EventStore, thread: str, *events: Event) -> list[int]:
    stored = await store.append(thread, events, [len(e.model_dump_json()) for e in events])
    return [s.seq for s in stored]


# -- seqs and batches --------------------------------------------------------------------------


async def test_each_threads_seqs_run_from_one_without_gaps(backend: Backend) -> None:
    store = backend.store
    assert await put(store, "a", said("1"), said("2")) == [1, 2]
    assert await put(store, "b", said("x")) == [1]
    assert await put(store, "a", said("3")) == [3]
    assert await store.last_seq("a") == 3
    assert await store.last_seq("nobody") == 0


async def test_concurrent_batches_to_one_thread_each_get_contiguous_seqs(backend: Backend) -> None:
    """Batches written at once to one thread never interleave: each is one transaction."""
    store = backend.store
    seqs: list[list[int]] = []

    async def batch(name: str) -> None:
        seqs.append(await put(store, "t", *[said(f"{name}{i}") for i in range(5)]))

    async with anyio.create_task_group() as tasks:
        for name in "abcd":
            tasks.start_soon(batch, name)
    assert sorted(s for run in seqs for s in run) == list(range(1, 21))
    for run in seqs:
        assert run == list(range(run[0], run[0] + 5))
    for stored in await store.events("t"):
        assert isinstance(stored.event, UserMessage)


async def test_tokens_are_kept_as_given(backend: Backend) -> None:
    """The store counts nothing: each event's tokens are what the caller gave."""
    await backend.store.append("t", [said("a"), said("b")], [7, 11])
    assert [s.tokens for s in await backend.store.events("t")] == [7, 11]


async def test_a_batch_without_a_count_for_each_event_is_refused(backend: Backend) -> None:
    with pytest.raises(ValueError, match="2 events came with 1 token counts"):
        await backend.store.append("t", [said("a"), said("b")], [1])
    assert await backend.store.last_seq("t") == 0


async def test_an_empty_thread_id_is_refused(backend: Backend) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        await put(backend.store, "", said("a"))


# -- append-only -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET body = '{}' WHERE thread_id = %s",
        "DELETE FROM events WHERE thread_id = %s",
        "DELETE FROM threads WHERE thread_id = %s",
    ],
)
async def test_rows_cannot_be_changed_or_removed(backend: Backend, statement: str) -> None:
    """The database itself refuses UPDATE and DELETE, whoever connects."""
    await put(backend.store, "t", said("kept"))
    with pytest.raises((sqlite3.Error, psycopg.Error)):
        backend.raw(statement, ("t",))
    [stored] = await backend.store.events("t")
    assert isinstance(stored.event, UserMessage)
    assert stored.event.text == "kept"


async def test_a_second_row_at_a_taken_seq_is_refused(backend: Backend) -> None:
    await put(backend.store, "t", said("first"))
    with pytest.raises((sqlite3.Error, psycopg.Error)):
        backend.raw(
            "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
            " VALUES (%s, 1, 'user.message', 1, '2026-01-01', 0, '{}')",
            ("t",),
        )


# -- reading -----------------------------------------------------------------------------------


async def test_an_event_is_read_back_as_written(backend: Backend) -> None:
    await put(backend.store, "t", said("hello"))
    stored = await backend.store.read("t", 1)
    assert stored.event == said("hello")
    with pytest.raises(EventNotFound):
        await backend.store.read("t", 2)


async def test_a_v1_usage_row_is_read_upcast_to_v2(backend: Backend) -> None:
    body = {
        "kind": "model.usage",
        "v": 1,
        "at": "2024-06-01T00:00:00Z",
        "input_tokens": 100,
        "cached_tokens": 60,
        "output_tokens": 5,
    }
    backend.raw(
        "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
        " VALUES (%s, 1, 'model.usage', 1, %s, 0, %s)",
        ("t", body["at"], json.dumps(body)),
    )
    store = backend.store
    read = [await store.read("t", 1), (await store.tail("t")).events[0], *await store.events("t")]
    for stored in read:
        event = stored.event
        assert isinstance(event, ModelUsage)
        assert (event.v, event.input, event.cache_read, event.output) == (2, 40, 60, 5)


async def test_a_row_that_is_no_event_is_an_error_naming_it(backend: Backend) -> None:
    backend.raw(
        "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
        " VALUES (%s, 1, 'user.message', 1, '2026-01-01', 0, '[1, 2]')",
        ("t",),
    )
    with pytest.raises(EventLogError, match="Event 1 of thread 't'"):
        await backend.store.read("t", 1)


async def test_threads_are_listed_in_the_order_they_were_first_written(backend: Backend) -> None:
    for thread in ("c", "a", "b"):
        await put(backend.store, thread, said(thread))
        await anyio.sleep(0.002)
    await put(backend.store, "c", said("again"))
    assert await backend.store.thread_ids() == ["c", "a", "b"]


# -- tail and snapshots ------------------------------------------------------------------------


async def test_tail_pages_through_a_thread(backend: Backend) -> None:
    store = backend.store
    await put(store, "t", *[said(str(i)) for i in range(25)])
    first = await store.tail("t", limit=10)
    assert [s.seq for s in first.events] == list(range(1, 11))
    assert (first.next_after, first.has_more) == (10, True)
    last = await store.tail("t", after=20, limit=10)
    assert [s.seq for s in last.events] == [21, 22, 23, 24, 25]
    assert (last.next_after, last.has_more) == (25, False)
    empty = await store.tail("t", after=25)
    assert (empty.events, empty.next_after, empty.has_more) == ([], 25, False)
    assert len((await store.tail("t", limit=MAX_LIMIT * 5)).events) == 25


async def test_a_snapshot_is_saved_with_its_marker_and_read_back(backend: Backend) -> None:
    store = backend.store
    await put(store, "t", said("a"), said("b"))
    marker = await store.save_snapshot("t", 2, '{"state": 1}')
    assert marker.seq == 3
    assert isinstance(marker.event, SnapshotTaken)
    snapshot = await store.latest_snapshot("t")
    assert snapshot is not None
    assert (snapshot.seq, snapshot.upto, snapshot.state) == (3, 2, '{"state": 1}')
    assert await store.latest_snapshot("other") is None


async def test_a_snapshot_past_the_threads_last_seq_is_refused(backend: Backend) -> None:
    await put(backend.store, "t", said("a"))
    with pytest.raises(ValueError, match="cannot cover seq 5"):
        await backend.store.save_snapshot("t", 5, "{}")
    assert await backend.store.last_seq("t") == 1


async def test_a_first_tail_starts_after_the_latest_snapshot(backend: Backend) -> None:
    """A new reader starts after the snapshot; one that names where it is (or asks for the
    history) gets every event after that point."""
    store = backend.store
    await put(store, "t", said("a"), said("b"))
    await store.save_snapshot("t", 2, "{}")
    await put(store, "t", said("c"))
    assert [s.seq for s in (await store.tail("t")).events] == [3, 4]
    assert [s.seq for s in (await store.tail("t", after=1)).events] == [2, 3, 4]
    assert [s.seq for s in (await store.tail("t", history=True)).events] == [1, 2, 3, 4]
    assert [s.seq for s in await store.events("t", after=2)] == [3, 4]


# -- archiving ---------------------------------------------------------------------------------


def finished(text: str) -> list[Event]:
    """A thread whose one turn has ended."""
    return [
        ThreadCreated(at=AT, engine="api", model="anthropic:claude-sonnet-4-5", cwd="/w"),
        TurnStarted(at=AT, cause="human"),
        said(text),
        AssistantMessage(at=AT, text=f"answered {text}"),
        TurnEnded(at=AT, outcome="completed"),
    ]


async def test_archiving_moves_a_thread_out_with_every_row_as_it_was(
    backend: Backend, tmp_path: Path
) -> None:
    """An archived thread leaves the live log as a whole (events, snapshots, its thread row):
    the archive file holds every row byte for byte, history before the snapshot included, the
    log records where; the other threads' rows are untouched."""
    store = backend.store
    await put(store, "t", *finished("one"))
    await store.save_snapshot("t", 5, snapshot.dump(await rebuilt(store, "t")))
    await put(store, "t", said("after the snapshot"), TurnStarted(at=AT, cause="human"))
    await put(store, "t", AssistantMessage(at=AT, text="ok"), TurnEnded(at=AT, outcome="completed"))
    await put(store, "other", *finished("two"))
    rows, others = await store.rows("t"), await store.rows("other")
    assert rows is not None
    assert [row[0] for row in rows.events] == list(range(1, 11))
    record = await archive.archive_thread(store, "t", tmp_path / "archive")
    assert (record.file, record.last_seq, record.events, record.snapshots) == ("t.db", 10, 10, 1)
    assert record.digest == digest(rows)
    assert await store.archived("t") == record
    assert await store.thread_ids() == ["other"]
    assert (await store.last_seq("t"), await store.events("t"), await store.rows("t")) == (
        0,
        [],
        None,
    )
    assert await store.latest_snapshot("t") is None
    assert archive.read_rows(tmp_path / "archive" / "t.db", "t") == rows
    assert await store.rows("other") == others
    assert await store.archived("other") is None


async def test_an_archived_thread_is_read_from_its_archive(
    backend: Backend, tmp_path: Path
) -> None:
    """Its view rebuilds from the archive exactly as it did from the live log, and its rows
    read back from there."""
    store = backend.store
    await put(store, "t", *finished("one"))
    await store.save_snapshot("t", 5, snapshot.dump(await rebuilt(store, "t")))
    before, rows = snapshot.dump(await rebuilt(store, "t")), await store.rows("t")
    directory = tmp_path / "archive"
    await archive.archive_thread(store, "t", directory)
    assert snapshot.dump(await archive.rebuilt_anywhere(store, "t", directory)) == before
    assert await archive.thread_rows(store, "t", directory) == rows


async def test_an_archived_thread_takes_no_new_row(backend: Backend, tmp_path: Path) -> None:
    """Nothing is appended to an archived thread, through the store or around it: its seqs
    stay the archive's."""
    await put(backend.store, "t", *finished("one"))
    await archive.archive_thread(backend.store, "t", tmp_path / "archive")
    with pytest.raises(EventLogError, match="archived"):
        await put(backend.store, "t", said("again"))
    with pytest.raises((sqlite3.Error, psycopg.Error)):
        backend.raw("INSERT INTO threads (thread_id, created_at) VALUES (%s, 'x')", ("t",))
    with pytest.raises((sqlite3.Error, psycopg.Error)):
        backend.raw(
            "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
            " VALUES (%s, 1, 'message.user', 1, '2026-01-01', 0, '{}')",
            ("t",),
        )
    assert await backend.store.thread_ids() == []


async def test_only_rows_a_recorded_archive_covers_can_be_removed(backend: Backend) -> None:
    """The database lets a DELETE through only for a thread whose archive is recorded, and
    only for the seqs that archive covers; the records themselves never change."""
    await put(backend.store, "t", said("a"), said("b"))
    backend.raw(
        "INSERT INTO archives (thread_id, file, host, archived_at, last_seq, events, snapshots,"
        " digest) VALUES (%s, 't.db', 'h', '2026-01-01', 1, 1, 0, 'x')",
        ("t",),
    )
    with pytest.raises((sqlite3.Error, psycopg.Error)):
        backend.raw("DELETE FROM events WHERE thread_id = %s", ("t",))  # seq 2 is not covered
    backend.raw("DELETE FROM events WHERE thread_id = %s AND seq = 1", ("t",))
    assert [s.seq for s in await backend.store.events("t")] == [2]
    for statement in (
        "UPDATE archives SET last_seq = 2 WHERE thread_id = %s",
        "DELETE FROM archives WHERE thread_id = %s",
    ):
        with pytest.raises((sqlite3.Error, psycopg.Error)):
            backend.raw(statement, ("t",))
    record = await backend.store.archived("t")
    assert record is not None
    assert record.last_seq == 1


async def test_a_thread_that_changed_after_its_copy_keeps_its_rows(backend: Backend) -> None:
    """The rows are removed only if they are still the ones the archive holds (its digest):
    an event appended after the copy leaves the thread whole and unarchived."""
    store = backend.store
    await put(store, "t", *finished("one"))
    rows = await store.rows("t")
    assert rows is not None
    await put(store, "t", said("late"))
    record = ArchiveRecord("t", "t.db", "h", "2026-01-01", rows.last_seq, 5, 0, digest(rows))
    with pytest.raises(EventLogError, match="changed while it was being archived"):
        await store.record_archive(record)
    assert (await store.last_seq("t"), await store.archived("t")) == (6, None)
    assert await store.thread_ids() == ["t"]


async def test_archiving_an_unknown_thread_is_refused(backend: Backend, tmp_path: Path) -> None:
    with pytest.raises(Refused, match="There is no thread 'nobody'") as refused:
        await archive.archive_thread(backend.store, "nobody", tmp_path / "archive")
    assert refused.value.code == "unknown-thread"
    assert not (tmp_path / "archive").exists()


async def test_an_unfinished_thread_is_not_archived(backend: Backend, tmp_path: Path) -> None:
    """A thread whose last turn never ended stays in the live log, and the refusal says why."""
    store = backend.store
    await put(store, "t", *finished("one")[:3])
    with pytest.raises(Refused, match="is not finished: its last turn never ended") as refused:
        await archive.archive_thread(store, "t", tmp_path / "archive")
    assert refused.value.code == "thread-not-finished"
    assert await store.last_seq("t") == 3
    assert not (tmp_path / "archive" / "t.db").exists()


async def test_a_thread_archived_twice_is_refused(backend: Backend, tmp_path: Path) -> None:
    await put(backend.store, "t", *finished("one"))
    await archive.archive_thread(backend.store, "t", tmp_path / "archive")
    with pytest.raises(Refused, match="is archived already") as refused:
        await archive.archive_thread(backend.store, "t", tmp_path / "archive")
    assert refused.value.code == "thread-archived"


async def test_an_archive_file_changed_after_it_was_written_is_not_read(
    backend: Backend, tmp_path: Path
) -> None:
    """A reader checks the archive against the digest the log recorded."""
    await put(backend.store, "t", *finished("one"))
    record = await archive.archive_thread(backend.store, "t", tmp_path / "archive")
    path = tmp_path / "archive" / record.file
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TRIGGER events_no_update")
        connection.execute("UPDATE events SET tokens = 99 WHERE seq = 1")
    with pytest.raises(EventLogError, match="digest differs"):
        await archive.rebuilt_anywhere(backend.store, "t", tmp_path / "archive")


_VERSION_1 = {
    "sqlite": [
        *(
            f"DROP TRIGGER {name}"
            for name in (
                "events_delete_archived_only",
                "snapshots_delete_archived_only",
                "threads_delete_archived_only",
                "events_not_archived",
                "threads_not_archived",
            )
        ),
        "DROP TABLE archives",
        *(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}"
            " BEGIN SELECT RAISE(ABORT, 'append-only'); END"
            for table in ("events", "snapshots", "threads")
        ),
        "PRAGMA user_version = 1",
    ],
    "postgres": [
        "DROP TABLE archives",
        "DROP TRIGGER events_not_archived ON events",
        "DROP TRIGGER threads_not_archived ON threads",
        *(
            statement
            for table in ("events", "snapshots", "threads")
            for statement in (
                f"DROP TRIGGER {table}_delete_archived_only ON {table}",
                f"CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION condensate_refuse_change()",
            )
        ),
        "UPDATE condensate_schema SET version = 1",
    ],
}
"""How a version 1 log was laid out, made from a version 2 one."""


async def test_a_version_1_log_is_brought_up_to_version_2_with_its_rows(
    backend: Backend, tmp_path: Path
) -> None:
    """A log written before archiving existed takes it once a store opens it: its rows are
    as they were, a DELETE is still refused, and a finished thread can be archived."""
    await put(backend.store, "t", *finished("one"))
    await put(backend.store, "other", *finished("two"))
    rows = await backend.store.rows("t")
    await backend.store.close()
    for statement in _VERSION_1[backend.name]:
        backend.raw(statement, ())
    backend.store = await backend.open()
    assert await backend.store.rows("t") == rows
    with pytest.raises((sqlite3.Error, psycopg.Error)):
        backend.raw("DELETE FROM events WHERE thread_id = %s", ("t",))
    await archive.archive_thread(backend.store, "t", tmp_path / "archive")
    assert await backend.store.thread_ids() == ["other"]
    assert archive.read_rows(tmp_path / "archive" / "t.db", "t") == rows


async def test_a_thread_another_daemon_holds_is_not_archived_around_it(
    postgres_url: str, tmp_path: Path
) -> None:
    """On a fleet's log, a store without an owner (the command line) cannot archive a thread
    whose lease a daemon holds: the refusal names the daemon, and nothing is removed."""
    store = await PostgresStore.connect(postgres_url)
    try:
        await put(store, "t", *finished("one"))
        assert await store.claim("t", "host-a:/srv", "http://10.0.0.1:4741", 60.0)
        with pytest.raises(
            EventLogError, match=r"owned by daemon host-a:/srv at http://10\.0\.0\.1:4741"
        ):
            await archive.archive_thread(store, "t", tmp_path / "archive")
        assert (await store.last_seq("t"), await store.archived("t")) == (5, None)
        assert not (tmp_path / "archive" / "t.db").exists()
    finally:
        await store.close()
