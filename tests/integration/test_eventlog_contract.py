"""The event-log contract (``condensate.eventlog``), run against every backend: SQLite in a
temporary file and a real PostgreSQL server (``tests.integration.postgres``). Per-thread
seqs with no gap, batches in one transaction, append-only rows, upcasting, snapshots and
``tail`` behave the same on both."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from condensate.errors import EventLogError, EventNotFound
from condensate.eventlog import MAX_LIMIT, EventStore
from condensate.events import Event, ModelUsage, SnapshotTaken, UserMessage
from condensate.pg_store import PostgresStore
from condensate.sqlite_store import SqliteStore

AT = datetime(2026, 12, 1, tzinfo=UTC)
BACKENDS = ["sqlite", "postgres"]


@dataclass
class Backend:
    """A store, and a way around it to the database itself (as another program would)."""

    store: EventStore
    raw: Callable[[str, tuple[Any, ...]], None]
    """Run one statement directly; raises what the database raises."""


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
        store: EventStore = SqliteStore.open(path)
        raw = _sqlite_raw(path)
    else:
        url = request.getfixturevalue("postgres_url")
        store = await PostgresStore.connect(url)
        raw = _postgres_raw(url)
    try:
        yield Backend(store, raw)
    finally:
        await store.close()


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
