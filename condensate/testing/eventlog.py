"""The event-log contract as a suite of tests, shipped so that every backend proves the same
behaviour (eventsourcing's ``tests/persistence.py``): per-thread seqs with no gap, batches in
one transaction, append-only rows the database itself guards, upcasting on read, snapshots,
``tail``, and archiving (rows leave only for a verified, recorded archive).

A backend's test module subclasses ``EventLogContract``, names the class ``Test…`` so pytest
collects it, and supplies three things: a ``database`` fixture (where one empty log lives),
``open_store`` (a store on it, as a starting daemon opens one) and ``execute`` (one statement
run around the store, as another program would; ``%s`` marks a parameter)::

    class TestSqliteEventLog(EventLogContract):
        refusals = (sqlite3.Error,)

        @pytest.fixture
        def database(self, tmp_path: Path) -> str:
            return str(tmp_path / "log.db")

        async def open_store(self, database: str) -> EventStore:
            return SqliteStore.open(Path(database))

        def execute(self, database: str, statement: str, params: tuple[Any, ...]) -> None: ...

The base class is not collected itself (its name has no ``Test`` prefix). Needs pytest and
pytest-asyncio (``asyncio_mode = "auto"``).
"""

from __future__ import annotations

import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from condensate.core.projector import snapshot
from condensate.errors import EventLogError, EventNotFound, Refused
from condensate.eventlog import MAX_LIMIT, ArchiveRecord, EventStore, archive, digest
from condensate.eventlog.rebuild import rebuilt
from condensate.events import (
    AssistantMessage,
    Event,
    ModelUsage,
    SnapshotTaken,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from condensate.testing.builders import finished_thread, said
from condensate.testing.threads import EPOCH as AT


@dataclass
class LogUnderTest:
    """A store, and a way around it to its database."""

    store: EventStore
    raw: Callable[[str, tuple[Any, ...]], None]
    """Run one statement on the database directly; raises what the database raises."""
    reopen: Callable[[], Awaitable[EventStore]]
    """Another store on the same database, as a daemon that starts would open it."""


async def put(store: EventStore, thread: str, *events: Event) -> list[int]:
    """Append ``events`` as one batch, each counted as its JSON's length: their seqs."""
    stored = await store.append(thread, events, [len(e.model_dump_json()) for e in events])
    return [s.seq for s in stored]


class EventLogContract(ABC):
    """What every event-log backend does; subclass it once per backend (see the module)."""

    refusals: ClassVar[tuple[type[Exception], ...]]
    """What the database raises when it refuses a statement (``sqlite3.Error``)."""
    version_1: ClassVar[Sequence[str] | None] = None
    """Statements that turn a fresh log back into how version 1 (before archiving) laid it
    out; None for a backend that never had a version 1."""

    @pytest.fixture
    def database(self) -> str:
        """Where one empty log lives (a path, a URL): override with a fixture of your own."""
        msg = f"{type(self).__name__} defines no database fixture."
        raise NotImplementedError(msg)

    @abstractmethod
    async def open_store(self, database: str) -> EventStore:
        """A store on ``database``."""

    @abstractmethod
    def execute(self, database: str, statement: str, params: tuple[Any, ...]) -> None:
        """Run ``statement`` (``%s`` marks each parameter) on ``database`` around the store,
        committed; raise what the database raises."""

    @pytest.fixture
    async def log(self, database: str) -> AsyncIterator[LogUnderTest]:
        """A store on a fresh log, closed after the test (whichever store it then holds)."""

        def raw(statement: str, params: tuple[Any, ...]) -> None:
            self.execute(database, statement, params)

        async def reopen() -> EventStore:
            return await self.open_store(database)

        log = LogUnderTest(await reopen(), raw, reopen)
        try:
            yield log
        finally:
            await log.store.close()

    # -- seqs and batches --------------------------------------------------------------------------

    async def test_each_threads_seqs_run_from_one_without_gaps(self, log: LogUnderTest) -> None:
        """Each thread numbers its own events 1, 2, 3 … whatever the other threads hold."""
        store = log.store
        assert await put(store, "a", said("1"), said("2")) == [1, 2]
        assert await put(store, "b", said("x")) == [1]
        assert await put(store, "a", said("3")) == [3]
        assert await store.last_seq("a") == 3
        assert await store.last_seq("nobody") == 0

    async def test_concurrent_batches_to_one_thread_each_get_contiguous_seqs(
        self, log: LogUnderTest
    ) -> None:
        """Batches written at once to one thread never interleave: each is one transaction."""
        store = log.store
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

    async def test_tokens_are_kept_as_given(self, log: LogUnderTest) -> None:
        """The store counts nothing: each event's tokens are what the caller gave."""
        await log.store.append("t", [said("a"), said("b")], [7, 11])
        assert [s.tokens for s in await log.store.events("t")] == [7, 11]

    async def test_a_batch_without_a_count_for_each_event_is_refused(
        self, log: LogUnderTest
    ) -> None:
        """A batch whose token counts do not match its events is refused; none of it lands."""
        with pytest.raises(ValueError, match="2 events came with 1 token counts"):
            await log.store.append("t", [said("a"), said("b")], [1])
        assert await log.store.last_seq("t") == 0

    async def test_an_empty_thread_id_is_refused(self, log: LogUnderTest) -> None:
        """A thread id must say something: an empty one is refused."""
        with pytest.raises(ValueError, match="non-empty"):
            await put(log.store, "", said("a"))

    # -- append-only -------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE events SET body = '{}' WHERE thread_id = %s",
            "DELETE FROM events WHERE thread_id = %s",
            "DELETE FROM threads WHERE thread_id = %s",
        ],
    )
    async def test_rows_cannot_be_changed_or_removed(
        self, log: LogUnderTest, statement: str
    ) -> None:
        """The database itself refuses UPDATE and DELETE, whoever connects."""
        await put(log.store, "t", said("kept"))
        with pytest.raises(self.refusals):
            log.raw(statement, ("t",))
        [stored] = await log.store.events("t")
        assert isinstance(stored.event, UserMessage)
        assert stored.event.text == "kept"

    async def test_a_second_row_at_a_taken_seq_is_refused(self, log: LogUnderTest) -> None:
        """The database refuses a row at a seq the thread has used, whoever writes it."""
        await put(log.store, "t", said("first"))
        with pytest.raises(self.refusals):
            log.raw(
                "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
                " VALUES (%s, 1, 'user.message', 1, '2026-01-01', 0, '{}')",
                ("t",),
            )

    # -- reading -----------------------------------------------------------------------------------

    async def test_an_event_is_read_back_as_written(self, log: LogUnderTest) -> None:
        """An event reads back equal to what was appended; a seq never written is EventNotFound."""
        await put(log.store, "t", said("hello"))
        stored = await log.store.read("t", 1)
        assert stored.event == said("hello")
        with pytest.raises(EventNotFound):
            await log.store.read("t", 2)

    async def test_a_v1_usage_row_is_read_upcast_to_v2(self, log: LogUnderTest) -> None:
        """A usage row stored at v1 reads as v2 (input split from cache reads) on every path."""
        body = {
            "kind": "model.usage",
            "v": 1,
            "at": "2024-06-01T00:00:00Z",
            "input_tokens": 100,
            "cached_tokens": 60,
            "output_tokens": 5,
        }
        log.raw(
            "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
            " VALUES (%s, 1, 'model.usage', 1, %s, 0, %s)",
            ("t", body["at"], json.dumps(body)),
        )
        store = log.store
        read = [
            await store.read("t", 1),
            (await store.tail("t")).events[0],
            *await store.events("t"),
        ]
        for stored in read:
            event = stored.event
            assert isinstance(event, ModelUsage)
            assert (event.v, event.input, event.cache_read, event.output) == (2, 40, 60, 5)

    async def test_a_row_that_is_no_event_is_an_error_naming_it(self, log: LogUnderTest) -> None:
        """A row whose body is no event is an EventLogError naming the thread and the seq."""
        log.raw(
            "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
            " VALUES (%s, 1, 'user.message', 1, '2026-01-01', 0, '[1, 2]')",
            ("t",),
        )
        with pytest.raises(EventLogError, match="Event 1 of thread 't'"):
            await log.store.read("t", 1)

    async def test_threads_are_listed_in_the_order_they_were_first_written(
        self, log: LogUnderTest
    ) -> None:
        """Thread ids come in the order of each thread's first event, not of its latest."""
        for thread in ("c", "a", "b"):
            await put(log.store, thread, said(thread))
            await anyio.sleep(0.002)
        await put(log.store, "c", said("again"))
        assert await log.store.thread_ids() == ["c", "a", "b"]

    # -- tail and snapshots ------------------------------------------------------------------------

    async def test_tail_pages_through_a_thread(self, log: LogUnderTest) -> None:
        """``tail`` pages by seq, says whether more follows, and clamps the limit to MAX_LIMIT."""
        store = log.store
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

    async def test_a_snapshot_is_saved_with_its_marker_and_read_back(
        self, log: LogUnderTest
    ) -> None:
        """A snapshot is logged with a marker event and read back with the seq it covers."""
        store = log.store
        await put(store, "t", said("a"), said("b"))
        marker = await store.save_snapshot("t", 2, '{"state": 1}')
        assert marker.seq == 3
        assert isinstance(marker.event, SnapshotTaken)
        snapshot = await store.latest_snapshot("t")
        assert snapshot is not None
        assert (snapshot.seq, snapshot.upto, snapshot.state) == (3, 2, '{"state": 1}')
        assert await store.latest_snapshot("other") is None

    async def test_a_snapshot_past_the_threads_last_seq_is_refused(self, log: LogUnderTest) -> None:
        """A snapshot cannot claim to cover events the thread does not have."""
        await put(log.store, "t", said("a"))
        with pytest.raises(ValueError, match="cannot cover seq 5"):
            await log.store.save_snapshot("t", 5, "{}")
        assert await log.store.last_seq("t") == 1

    async def test_a_first_tail_starts_after_the_latest_snapshot(self, log: LogUnderTest) -> None:
        """A new reader starts after the snapshot; one that names where it is (or asks for the
        history) gets every event after that point."""
        store = log.store
        await put(store, "t", said("a"), said("b"))
        await store.save_snapshot("t", 2, "{}")
        await put(store, "t", said("c"))
        assert [s.seq for s in (await store.tail("t")).events] == [3, 4]
        assert [s.seq for s in (await store.tail("t", after=1)).events] == [2, 3, 4]
        assert [s.seq for s in (await store.tail("t", history=True)).events] == [1, 2, 3, 4]
        assert [s.seq for s in await store.events("t", after=2)] == [3, 4]

    # -- archiving ---------------------------------------------------------------------------------

    async def test_archiving_moves_a_thread_out_with_every_row_as_it_was(
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """An archived thread leaves the live log as a whole (events, snapshots, its thread row):
        the archive file holds every row byte for byte, history before the snapshot included, the
        log records where; the other threads' rows are untouched."""
        store = log.store
        await put(store, "t", *finished_thread("one"))
        await store.save_snapshot("t", 5, snapshot.dump(await rebuilt(store, "t")))
        await put(store, "t", said("after the snapshot"), TurnStarted(at=AT, cause="human"))
        await put(
            store, "t", AssistantMessage(at=AT, text="ok"), TurnEnded(at=AT, outcome="completed")
        )
        await put(store, "other", *finished_thread("two"))
        rows, others = await store.rows("t"), await store.rows("other")
        assert rows is not None
        assert [row[0] for row in rows.events] == list(range(1, 11))
        record = await archive.archive_thread(store, "t", tmp_path / "archive")
        assert (record.file, record.last_seq, record.events, record.snapshots) == (
            "t.db",
            10,
            10,
            1,
        )
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
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """Its view rebuilds from the archive exactly as it did from the live log, and its rows
        read back from there."""
        store = log.store
        await put(store, "t", *finished_thread("one"))
        await store.save_snapshot("t", 5, snapshot.dump(await rebuilt(store, "t")))
        before, rows = snapshot.dump(await rebuilt(store, "t")), await store.rows("t")
        directory = tmp_path / "archive"
        await archive.archive_thread(store, "t", directory)
        assert snapshot.dump(await archive.rebuilt_anywhere(store, "t", directory)) == before
        assert await archive.thread_rows(store, "t", directory) == rows

    async def test_an_archived_thread_takes_no_new_row(
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """Nothing is appended to an archived thread, through the store or around it: its seqs
        stay the archive's."""
        await put(log.store, "t", *finished_thread("one"))
        await archive.archive_thread(log.store, "t", tmp_path / "archive")
        with pytest.raises(EventLogError, match="archived"):
            await put(log.store, "t", said("again"))
        with pytest.raises(self.refusals):
            log.raw("INSERT INTO threads (thread_id, created_at) VALUES (%s, 'x')", ("t",))
        with pytest.raises(self.refusals):
            log.raw(
                "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
                " VALUES (%s, 1, 'message.user', 1, '2026-01-01', 0, '{}')",
                ("t",),
            )
        assert await log.store.thread_ids() == []

    async def test_only_rows_a_recorded_archive_covers_can_be_removed(
        self, log: LogUnderTest
    ) -> None:
        """The database lets a DELETE through only for a thread whose archive is recorded, and
        only for the seqs that archive covers; the records themselves never change."""
        await put(log.store, "t", said("a"), said("b"))
        log.raw(
            "INSERT INTO archives (thread_id, file, host, archived_at, last_seq, events, snapshots,"
            " digest) VALUES (%s, 't.db', 'h', '2026-01-01', 1, 1, 0, 'x')",
            ("t",),
        )
        with pytest.raises(self.refusals):
            log.raw("DELETE FROM events WHERE thread_id = %s", ("t",))  # seq 2 is not covered
        log.raw("DELETE FROM events WHERE thread_id = %s AND seq = 1", ("t",))
        assert [s.seq for s in await log.store.events("t")] == [2]
        for statement in (
            "UPDATE archives SET last_seq = 2 WHERE thread_id = %s",
            "DELETE FROM archives WHERE thread_id = %s",
        ):
            with pytest.raises(self.refusals):
                log.raw(statement, ("t",))
        record = await log.store.archived("t")
        assert record is not None
        assert record.last_seq == 1

    async def test_a_thread_that_changed_after_its_copy_keeps_its_rows(
        self, log: LogUnderTest
    ) -> None:
        """The rows are removed only if they are still the ones the archive holds (its digest):
        an event appended after the copy leaves the thread whole and unarchived."""
        store = log.store
        await put(store, "t", *finished_thread("one"))
        rows = await store.rows("t")
        assert rows is not None
        await put(store, "t", said("late"))
        record = ArchiveRecord("t", "t.db", "h", "2026-01-01", rows.last_seq, 5, 0, digest(rows))
        with pytest.raises(EventLogError, match="changed while it was being archived"):
            await store.record_archive(record)
        assert (await store.last_seq("t"), await store.archived("t")) == (6, None)
        assert await store.thread_ids() == ["t"]

    async def test_archiving_an_unknown_thread_is_refused(
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """Archiving a thread the log never held is refused (unknown-thread); no file is written."""
        with pytest.raises(Refused, match="There is no thread 'nobody'") as refused:
            await archive.archive_thread(log.store, "nobody", tmp_path / "archive")
        assert refused.value.code == "unknown-thread"
        assert not (tmp_path / "archive").exists()

    async def test_an_unfinished_thread_is_not_archived(
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """A thread whose last turn never ended stays in the live log, and the refusal says why."""
        store = log.store
        await put(store, "t", *finished_thread("one")[:3])
        with pytest.raises(Refused, match="is not finished: its last turn never ended") as refused:
            await archive.archive_thread(store, "t", tmp_path / "archive")
        assert refused.value.code == "thread-not-finished"
        assert await store.last_seq("t") == 3
        assert not (tmp_path / "archive" / "t.db").exists()

    async def test_a_thread_archived_twice_is_refused(
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """A thread archived once cannot be archived again (thread-archived)."""
        await put(log.store, "t", *finished_thread("one"))
        await archive.archive_thread(log.store, "t", tmp_path / "archive")
        with pytest.raises(Refused, match="is archived already") as refused:
            await archive.archive_thread(log.store, "t", tmp_path / "archive")
        assert refused.value.code == "thread-archived"

    async def test_an_archive_file_changed_after_it_was_written_is_not_read(
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """A reader checks the archive against the digest the log recorded."""
        await put(log.store, "t", *finished_thread("one"))
        record = await archive.archive_thread(log.store, "t", tmp_path / "archive")
        path = tmp_path / "archive" / record.file
        with sqlite3.connect(path) as connection:
            connection.execute("DROP TRIGGER events_no_update")
            connection.execute("UPDATE events SET tokens = 99 WHERE seq = 1")
        with pytest.raises(EventLogError, match="digest differs"):
            await archive.rebuilt_anywhere(log.store, "t", tmp_path / "archive")

    async def test_a_version_1_log_is_brought_up_to_version_2_with_its_rows(
        self, log: LogUnderTest, tmp_path: Path
    ) -> None:
        """A log written before archiving existed takes it once a store opens it: its rows are
        as they were, a DELETE is still refused, and a finished thread can be archived."""
        if self.version_1 is None:
            pytest.skip("the backend never had a version 1 layout")
        await put(log.store, "t", *finished_thread("one"))
        await put(log.store, "other", *finished_thread("two"))
        rows = await log.store.rows("t")
        await log.store.close()
        for statement in self.version_1:
            log.raw(statement, ())
        log.store = await log.reopen()
        assert await log.store.rows("t") == rows
        with pytest.raises(self.refusals):
            log.raw("DELETE FROM events WHERE thread_id = %s", ("t",))
        await archive.archive_thread(log.store, "t", tmp_path / "archive")
        assert await log.store.thread_ids() == ["other"]
        assert archive.read_rows(tmp_path / "archive" / "t.db", "t") == rows
