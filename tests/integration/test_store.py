"""The SQLite event log against real files: seqs, stored tokens, paging, snapshots, upcasting,
append-only triggers, a property over random batches, and SIGKILL in the middle of a batch."""

from __future__ import annotations

import itertools
import json
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from condensate.eventlog import sqlite_sync as store
from condensate.core.tokens import MESSAGE_OVERHEAD, count_event, counter_for
from condensate.errors import EventLogError, EventNotFound, UnknownEventVersion
from condensate.events import (
    Event,
    ModelUsage,
    SnapshotTaken,
    Stored,
    SystemLine,
    ToolResult,
    TurnStarted,
    UserMessage,
    encode,
)
from condensate.eventlog.sqlite_sync import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    REPLAY_CHUNK,
    EventLog,
    Snapshot,
    TailPage,
)

AT = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
WRITER = Path(__file__).parent / "_store_writer.py"


@dataclass(frozen=True)
class FixedCounter:
    """Counts every text as the same number of tokens, unlike any real encoding."""

    tokens: int = 7
    name: str = "fixed"

    def count(self, text: str) -> int:
        return self.tokens


def _msg(text: str) -> UserMessage:
    return UserMessage(text=text, at=AT)


def _msgs(n: int, prefix: str = "m") -> list[Event]:
    return [_msg(f"{prefix} {i}") for i in range(n)]


def _seqs(page: TailPage | list[Stored]) -> list[int]:
    stored = page.events if isinstance(page, TailPage) else page
    return [s.seq for s in stored]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EventLog]:
    with EventLog.open(tmp_path / "events.db") as opened:
        yield opened


@pytest.fixture
def raw(log: EventLog) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(log.path, isolation_level=None)
    yield connection
    connection.close()


def _insert_raw(
    connection: sqlite3.Connection, thread_id: str, seq: int, body: dict[str, Any]
) -> None:
    connection.execute(
        "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (thread_id, seq, body["kind"], body["v"], body["at"], 0, json.dumps(body)),
    )


# Opening


def test_open_creates_parent_directories_in_wal_mode(tmp_path: Path) -> None:
    """Opening a log under missing directories creates them and puts the file in WAL mode."""
    path = tmp_path / "a" / "b" / "events.db"
    with EventLog.open(path) as opened:
        assert opened.path == path
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    finally:
        connection.close()
    assert {"events", "snapshots", "threads"} <= tables


def test_reopening_keeps_events(tmp_path: Path) -> None:
    """A log closed and opened again holds the same events and continues their seqs."""
    path = tmp_path / "events.db"
    with EventLog.open(path) as first:
        first.append("t", _msgs(3))
    with EventLog.open(path) as second:
        assert [s.event for s in second.replay("t")] == _msgs(3)
        assert _seqs(second.append("t", _msg("again"))) == [4]


def test_a_file_that_is_not_a_database_raises_event_log_error(tmp_path: Path) -> None:
    """Opening a file that is not SQLite raises EventLogError naming the path."""
    path = tmp_path / "events.db"
    path.write_bytes(b"this is not a database, just some bytes " * 100)
    with pytest.raises(EventLogError, match=r"events\.db"):
        EventLog.open(path)


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    """A log whose schema is newer than this code knows is refused on open."""
    path = tmp_path / "events.db"
    EventLog.open(path).close()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version = 99")
    connection.close()
    with pytest.raises(EventLogError, match="schema version 99"):
        EventLog.open(path)


def test_a_closed_log_raises_event_log_error(tmp_path: Path) -> None:
    """Every call on a closed log raises EventLogError; closing twice is harmless."""
    opened = EventLog.open(tmp_path / "events.db")
    opened.close()
    opened.close()
    with pytest.raises(EventLogError, match="closed"):
        opened.append("t", _msg("late"))
    with pytest.raises(EventLogError, match="closed"):
        opened.tail("t")


# Appending


def test_append_one_event_gets_seq_one(log: EventLog) -> None:
    """A single event appended to a new thread is stored at seq 1 and returned as Stored."""
    (stored,) = log.append("t", _msg("hello"))
    assert (stored.thread_id, stored.seq, stored.event) == ("t", 1, _msg("hello"))
    assert log.last_seq("t") == 1


def test_append_batch_assigns_consecutive_seqs(log: EventLog) -> None:
    """A batch gets consecutive seqs after the thread's previous maximum, in batch order."""
    log.append("t", _msgs(2))
    stored = log.append("t", _msgs(5, "b"))
    assert _seqs(stored) == [3, 4, 5, 6, 7]
    assert [s.event for s in stored] == _msgs(5, "b")


def test_append_empty_batch_writes_nothing(log: EventLog) -> None:
    """An empty batch returns no events and does not create the thread."""
    assert log.append("t", []) == []
    assert log.thread_ids() == []
    assert log.last_seq("t") == 0


def test_seqs_are_per_thread(log: EventLog) -> None:
    """Each thread numbers its own events from 1, whatever other threads append."""
    log.append("a", _msgs(3))
    assert _seqs(log.append("b", _msgs(2))) == [1, 2]
    assert _seqs(log.append("a", _msg("x"))) == [4]
    assert (log.last_seq("a"), log.last_seq("b"), log.last_seq("c")) == (4, 2, 0)
    assert log.thread_ids() == ["a", "b"]


def test_empty_thread_id_is_refused(log: EventLog) -> None:
    """Appending to an empty thread id is a programming mistake and raises ValueError."""
    with pytest.raises(ValueError, match="thread id"):
        log.append("", _msg("x"))


def test_tokens_are_counted_once_at_append_and_never_recomputed(tmp_path: Path) -> None:
    """Tokens stored with a custom counter are read back unchanged by a log with the default."""
    path = tmp_path / "events.db"
    events: list[Event] = [
        _msg("a fairly long user message " * 20),
        ToolResult(call_id="c1", tool="Read", output="x = 1\n" * 50, at=AT),
        TurnStarted(at=AT),
    ]
    fixed = FixedCounter()
    with EventLog.open(path) as writer:
        stored = writer.append("t", events, counter=fixed)
    assert [s.tokens for s in stored] == [count_event(e, fixed) for e in events]
    assert [s.tokens for s in stored] == [7 + MESSAGE_OVERHEAD, 7 + MESSAGE_OVERHEAD, 0]
    default = counter_for("")
    assert count_event(events[0], default) != count_event(events[0], fixed)
    with EventLog.open(path) as reader:
        assert reader.counter == default
        assert [s.tokens for s in reader.replay("t")] == [s.tokens for s in stored]
        assert [s.tokens for s in reader.tail("t").events] == [s.tokens for s in stored]
        assert reader.read("t", 1).tokens == stored[0].tokens


def test_the_logs_counter_is_the_default_for_append(tmp_path: Path) -> None:
    """A log opened with a counter uses it when append is given none."""
    with EventLog.open(tmp_path / "events.db", counter=FixedCounter(tokens=3)) as opened:
        (stored,) = opened.append("t", _msg("whatever the text"))
    assert stored.tokens == 3 + MESSAGE_OVERHEAD


def test_rows_hold_kind_version_time_and_encoded_body(
    log: EventLog, raw: sqlite3.Connection
) -> None:
    """The stored row carries the event's kind, v, time, tokens and its JSON encoding."""
    event = ModelUsage(input=10, cache_read=20, output=3, at=AT)
    (stored,) = log.append("t", event)
    row = raw.execute(
        "SELECT kind, v, at, tokens, body FROM events WHERE thread_id = 't'"
    ).fetchone()
    assert row == ("model.usage", 2, AT.isoformat(), stored.tokens, encode(event))


def test_concurrent_appends_from_threads_never_share_a_seq(tmp_path: Path) -> None:
    """Python threads appending to one log at once get gapless, distinct seqs per thread."""
    with EventLog.open(tmp_path / "events.db") as shared:

        def work(worker: int) -> None:
            for batch in range(20):
                shared.append("t", _msgs(5, f"w{worker} b{batch}"))

        workers = [threading.Thread(target=work, args=(w,)) for w in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert _seqs(list(shared.replay("t"))) == list(range(1, 401))


def test_two_logs_on_one_file_share_the_seq(tmp_path: Path) -> None:
    """Two connections to the same file (as two processes would) continue each other's seqs."""
    path = tmp_path / "events.db"
    with EventLog.open(path) as one, EventLog.open(path) as two:
        one.append("t", _msgs(2))
        assert _seqs(two.append("t", _msgs(2))) == [3, 4]
        assert _seqs(one.append("t", _msg("x"))) == [5]


# Reading


def test_read_returns_the_original_event(log: EventLog) -> None:
    """Reading a seq returns the event appended there, equal to the original."""
    events = _msgs(3)
    log.append("t", events)
    stored = log.read("t", 2)
    assert (stored.thread_id, stored.seq, stored.event) == ("t", 2, events[1])


def test_read_of_a_missing_seq_raises_event_not_found(log: EventLog) -> None:
    """Reading a seq the thread does not have raises EventNotFound naming thread and seq."""
    log.append("t", _msgs(3))
    with pytest.raises(EventNotFound, match=r"'t' has no event at seq 4\."):
        log.read("t", 4)
    with pytest.raises(EventNotFound, match="'other'"):
        log.read("other", 1)


def test_replay_streams_every_event_across_chunks(log: EventLog) -> None:
    """Replay yields every event after ``after`` in order, across chunk boundaries."""
    total = REPLAY_CHUNK * 2 + 5
    log.append("t", _msgs(total))
    replay = log.replay("t")
    first = next(replay)
    assert first.seq == 1
    assert _seqs([first, *replay]) == list(range(1, total + 1))
    assert _seqs(list(log.replay("t", after=REPLAY_CHUNK - 1))) == list(
        range(REPLAY_CHUNK, total + 1)
    )
    assert list(log.replay("t", after=total)) == []


def test_tail_defaults_to_200_events(log: EventLog) -> None:
    """Without a limit, tail returns the first DEFAULT_LIMIT events and says there are more."""
    log.append("t", _msgs(250))
    page = log.tail("t")
    assert DEFAULT_LIMIT == 200
    assert _seqs(page) == list(range(1, 201))
    assert (page.next_after, page.has_more) == (200, True)


def test_tail_limit_is_clamped_to_1_through_1000(log: EventLog) -> None:
    """A limit above MAX_LIMIT returns MAX_LIMIT events; a limit below 1 returns one."""
    log.append("t", _msgs(1100))
    big = log.tail("t", limit=5000)
    assert MAX_LIMIT == 1000
    assert _seqs(big) == list(range(1, 1001))
    assert big.has_more
    assert _seqs(log.tail("t", limit=0)) == [1]
    assert _seqs(log.tail("t", limit=-3)) == [1]


def test_tail_paging_walks_every_event_exactly_once(log: EventLog) -> None:
    """Following next_after until has_more is false visits every event once, in order."""
    log.append("t", _msgs(523))
    log.append("other", _msgs(50))
    seen: list[int] = []
    after, pages = 0, 0
    while True:
        page = log.tail("t", after=after, limit=100)
        seen += _seqs(page)
        after, pages = page.next_after, pages + 1
        if not page.has_more:
            break
    assert seen == list(range(1, 524))
    assert pages == 6


def test_tail_of_nothing_keeps_after(log: EventLog) -> None:
    """With nothing past ``after``, tail returns no events, next_after == after, no more."""
    assert log.tail("t", after=0) == TailPage(events=[], next_after=0, has_more=False)
    log.append("t", _msgs(3))
    assert log.tail("t", after=3) == TailPage(events=[], next_after=3, has_more=False)
    page = log.tail("t", after=2)
    assert (_seqs(page), page.next_after, page.has_more) == ([3], 3, False)


def test_tail_skips_snapshotted_events_unless_history(log: EventLog) -> None:
    """An ordinary tail starts after the latest snapshot's upto; history mode does not."""
    log.append("t", _msgs(10))
    log.save_snapshot("t", upto=4, state="{}")
    log.append("t", _msgs(2, "late"))
    log.save_snapshot("t", upto=7, state="{}")
    # seqs: 1-10 messages, 11 snapshot (upto 4), 12-13 messages, 14 snapshot (upto 7)
    assert _seqs(log.tail("t")) == [8, 9, 10, 11, 12, 13, 14]
    assert _seqs(log.tail("t", after=12)) == [13, 14]
    assert _seqs(log.tail("t", history=True)) == list(range(1, 15))
    history = log.tail("t", after=2, limit=3, history=True)
    assert (_seqs(history), history.next_after, history.has_more) == ([3, 4, 5], 5, True)
    assert [s.seq for s in log.replay("t")] == list(range(1, 15))


def test_a_follower_behind_a_snapshot_loses_nothing(log: EventLog) -> None:
    """A reader that names where it is (after > 0) gets every later event, even those a newer
    snapshot covers."""
    log.append("t", _msgs(10))
    log.save_snapshot("t", upto=8, state="{}")
    assert _seqs(log.tail("t", after=2)) == list(range(3, 12))


# Snapshots


def test_save_snapshot_appends_its_event_at_the_snapshot_seq(log: EventLog) -> None:
    """A snapshot and its SnapshotTaken event share one seq, the thread's next one."""
    assert log.latest_snapshot("t") is None
    log.append("t", _msgs(3))
    stored = log.save_snapshot("t", upto=3, state='{"folded": 3}')
    assert stored.seq == 4
    assert isinstance(stored.event, SnapshotTaken)
    assert stored.event.upto == 3
    assert log.read("t", 4).event == stored.event
    assert log.latest_snapshot("t") == Snapshot(seq=4, upto=3, state='{"folded": 3}')


def test_latest_snapshot_is_the_newest(log: EventLog) -> None:
    """With several snapshots, latest_snapshot returns the one saved last."""
    log.append("t", _msgs(3))
    log.save_snapshot("t", upto=2, state="two")
    log.append("t", _msgs(3))
    log.save_snapshot("t", upto=6, state="six")
    assert log.latest_snapshot("t") == Snapshot(seq=8, upto=6, state="six")
    assert log.latest_snapshot("other") is None


def test_snapshot_beyond_the_last_seq_is_refused(log: EventLog) -> None:
    """A snapshot covering seqs the thread does not have raises and writes nothing."""
    log.append("t", _msgs(3))
    with pytest.raises(ValueError, match="cannot cover seq 9"):
        log.save_snapshot("t", upto=9, state="{}")
    assert log.last_seq("t") == 3
    assert log.latest_snapshot("t") is None
    assert _seqs(log.append("t", _msg("next"))) == [4]


# Append-only


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET body = '{}'",
        "UPDATE events SET tokens = tokens + 1 WHERE seq = 1",
        "DELETE FROM events",
        "DELETE FROM events WHERE seq = 2",
        "UPDATE snapshots SET state = 'forged'",
        "DELETE FROM snapshots",
        "UPDATE threads SET created_at = '1970-01-01'",
        "DELETE FROM threads",
        "INSERT OR REPLACE INTO events VALUES ('t', 1, 'message.user', 1, 'x', 0, '{}')",
        "INSERT INTO events VALUES ('t', 2, 'message.user', 1, 'x', 0, '{}')"
        " ON CONFLICT DO UPDATE SET body = excluded.body",
        "INSERT OR REPLACE INTO snapshots VALUES ('t', 4, 0, 'forged')",
    ],
)
def test_update_and_delete_are_refused(
    log: EventLog, raw: sqlite3.Connection, statement: str
) -> None:
    """A separate connection cannot UPDATE, DELETE or REPLACE rows: the triggers say
    append-only."""
    log.append("t", _msgs(3))
    log.save_snapshot("t", upto=3, state="{}")
    before = raw.execute("SELECT * FROM events").fetchall()
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    assert raw.execute("SELECT * FROM events").fetchall() == before
    assert log.latest_snapshot("t") == Snapshot(seq=4, upto=3, state="{}")
    assert log.thread_ids() == ["t"]


def test_replacing_a_thread_row_is_silently_ignored(log: EventLog, raw: sqlite3.Connection) -> None:
    """INSERT OR REPLACE on a known thread leaves its row as it was, so append can keep using
    INSERT OR IGNORE."""
    log.append("t", _msg("first"))
    before = raw.execute("SELECT * FROM threads").fetchall()
    raw.execute("INSERT OR REPLACE INTO threads VALUES ('t', '1970-01-01')")
    assert raw.execute("SELECT * FROM threads").fetchall() == before
    assert _seqs(log.append("t", _msg("second"))) == [2]


# Versions


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"kind": "future.kind", "v": 1, "at": "2024-06-01T00:00:00Z"}, "future.kind"),
        ({"kind": "turn.started", "v": 7, "at": "2024-06-01T00:00:00Z"}, "v7"),
    ],
)
def test_an_unknown_kind_or_newer_version_raises(
    log: EventLog, raw: sqlite3.Connection, body: dict[str, Any], match: str
) -> None:
    """A row of an unknown kind or a too-new version raises UnknownEventVersion naming it."""
    _insert_raw(raw, "t", 1, body)
    with pytest.raises(UnknownEventVersion, match=match):
        log.read("t", 1)
    with pytest.raises(UnknownEventVersion, match=r"Event 1 of thread 't'"):
        log.tail("t")


def test_a_corrupt_body_raises_event_log_error(log: EventLog, raw: sqlite3.Connection) -> None:
    """A row whose body is not an event object raises EventLogError naming thread and seq."""
    raw.execute("INSERT INTO events VALUES ('t', 1, 'message.user', 1, '2024-06-01', 0, '[1, 2]')")
    with pytest.raises(EventLogError, match=r"Event 1 of thread 't' is not a valid event"):
        log.read("t", 1)


# The property

THREAD_NAMES = ("alpha", "beta", "gamma")
# A batch is drawn as (thread, first kind, size, text) rather than as pydantic models: on
# 1000 examples, hypothesis spends most of its time drawing, and this shape keeps it cheap.
_batches = st.lists(
    st.tuples(
        st.sampled_from(THREAD_NAMES),
        st.integers(0, 3),
        st.integers(1, 6),
        st.text(max_size=12),
    ),
    min_size=1,
    max_size=8,
)
_examples = itertools.count()


def _event(kind: int, text: str) -> Event:
    match kind:
        case 0:
            return UserMessage(text=text, at=AT)
        case 1:
            return ToolResult(call_id=f"c{len(text)}", tool="Read", output=text, at=AT)
        case 2:
            return SystemLine(code="paused", text=text, at=AT)
        case _:
            return TurnStarted(at=AT)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EventLog, Observer]]:
    """One log for every hypothesis example (each example writes its own threads), and a
    second connection that reads its raw rows."""
    path = tmp_path_factory.mktemp("property") / "events.db"
    with EventLog.open(path) as shared_log:
        observer = sqlite3.connect(path)
        yield shared_log, observer
        observer.close()


Observer = sqlite3.Connection


def _rows(observer: Observer, threads: list[str]) -> dict[tuple[str, int], tuple[Any, ...]]:
    rows = observer.execute(
        "SELECT thread_id, seq, kind, v, at, tokens, body FROM events WHERE thread_id IN (?, ?, ?)",
        threads,
    )
    return {(row[0], row[1]): tuple(row) for row in rows}


@settings(max_examples=1000, deadline=None)
@given(batches=_batches)
def test_seqs_are_gapless_and_rows_never_change(
    shared: tuple[EventLog, Observer], batches: list[tuple[str, int, int, str]]
) -> None:
    """Over random batches to random threads, seqs run 1..n per thread and no row changes."""
    log, observer = shared
    example = next(_examples)
    threads = [f"{example}/{name}" for name in THREAD_NAMES]
    seen: dict[tuple[str, int], tuple[Any, ...]] = {}
    appended: dict[str, list[Event]] = {thread_id: [] for thread_id in threads}
    for name, kind, size, text in batches:
        thread_id = f"{example}/{name}"
        batch = [_event((kind + i) % 4, text * i) for i in range(size)]
        last = len(appended[thread_id])
        stored = log.append(thread_id, batch)
        assert _seqs(stored) == list(range(last + 1, last + len(batch) + 1))
        appended[thread_id].extend(batch)
        rows = _rows(observer, threads)
        assert {key: rows.get(key) for key in seen} == seen
        assert len(rows) == sum(len(events) for events in appended.values())
        seen = rows
    for thread_id, events in appended.items():
        replayed = list(log.replay(thread_id))
        assert _seqs(replayed) == list(range(1, len(events) + 1))
        assert [s.event for s in replayed] == events


# The crash

CRASH_BATCH = 2000
# How far into a batch's write transaction to kill the writer, as fractions of the time one
# write took (from "counted" to "committed") while the writer warmed up.
KILL_PHASES = (0.1, 0.25, 0.4, 0.55)
MAX_KILLS = 16


class _Child:
    """The writer subprocess, reading its ``counted B`` and ``committed B`` lines."""

    def __init__(self, db: Path, run: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WRITER), str(db), str(run), str(CRASH_BATCH)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.counted = 0
        self.committed = 0
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _take(self, line: str) -> str:
        word, batch = line.split()
        if word == "counted":
            self.counted = int(batch)
        else:
            self.committed = int(batch)
        return word

    def wait_for(self, wanted: str) -> float:
        """Reads lines until one says ``wanted``; returns when that line arrived."""
        while True:
            line = self._lines.get(timeout=30)
            if line is None:
                assert self.process.stderr is not None
                pytest.fail(f"The writer exited early: {self.process.stderr.read()}")
            if self._take(line) == wanted:
                return time.monotonic()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=10) == -signal.SIGKILL
        self._reader.join(timeout=10)
        while (line := self._lines.get_nowait()) is not None:
            self._take(line)
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self.process.stdout.close()
        self.process.stderr.close()


def _batches_in(db: Path, after: int = 0) -> list[tuple[int, int]]:
    """The (run, batch) of each batch after seq ``after``, checking that each is whole, that
    its events are in order and that seqs have no gap."""
    with EventLog.open(db) as reader:
        stored = list(reader.replay("crash", after=after))
    assert _seqs(stored) == list(range(after + 1, after + len(stored) + 1))
    assert len(stored) % CRASH_BATCH == 0, f"{len(stored)} events is not a whole number of batches"
    found: list[tuple[int, int]] = []
    for start in range(0, len(stored), CRASH_BATCH):
        chunk = [s.event for s in stored[start : start + CRASH_BATCH]]
        assert isinstance(chunk[0], UserMessage)
        _, run, _, batch, *_ = chunk[0].text.split()
        expected = [f"run {run} batch {batch} item {i}" for i in range(CRASH_BATCH)]
        assert [e.text if isinstance(e, UserMessage) else e for e in chunk] == expected
        found.append((int(run), int(batch)))
    return found


def test_sigkill_mid_batch_never_leaves_a_partial_batch(tmp_path: Path) -> None:
    """A writer SIGKILLed inside its write transaction, again and again, leaves whole batches."""
    db = tmp_path / "events.db"
    verified, interrupted = 0, 0
    everything: list[tuple[int, int]] = []
    # Kill at least once per phase, and go on (up to a bound) until a kill lands inside a
    # write, so that a loaded machine makes the test slower, not flaky.
    phases = [KILL_PHASES[i % len(KILL_PHASES)] for i in range(MAX_KILLS)]
    for run, phase in enumerate(phases, start=1):
        if run > len(KILL_PHASES) and interrupted:
            break
        child = _Child(db, run)
        try:
            writes = []
            for _ in range(2):
                counted = child.wait_for("counted")
                writes.append(child.wait_for("committed") - counted)
            child.wait_for("counted")
            target = child.counted
            time.sleep(min(writes) * phase)
        finally:
            child.kill()
        found = _batches_in(db, after=verified)
        kept = len(found)
        assert found == [(run, batch) for batch in range(1, kept + 1)]
        # Whatever append returned is there; nothing the writer had not yet counted is.
        assert child.committed <= kept <= child.counted
        interrupted += kept < target
        verified += kept * CRASH_BATCH
        everything += found
    assert _batches_in(db) == everything
    assert interrupted >= 1, "no kill landed inside a write; the test proved nothing"


# Checkpoints


def test_the_wal_is_checkpointed_in_the_background_while_the_log_stays_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past CHECKPOINT_BYTES the events reach the database file itself, not only the WAL."""
    monkeypatch.setattr(store, "CHECKPOINT_BYTES", 20_000)
    path = tmp_path / "events.db"
    with EventLog.open(path, counter=FixedCounter()) as opened:
        empty = path.stat().st_size
        for i in range(40):
            opened.append("t", ToolResult(at=AT, call_id=f"c{i}", tool="read", output="x" * 1000))
        deadline = time.monotonic() + 10
        while path.stat().st_size <= empty and time.monotonic() < deadline:
            time.sleep(0.02)
        assert path.stat().st_size > empty
        assert opened.last_seq("t") == 40


# Appending without waiting


def test_append_now_writes_nothing_while_another_os_thread_holds_the_log(log: EventLog) -> None:
    """append_now returns None at once, and writes nothing, when the log is in use."""
    log.append("t", UserMessage(at=AT, text="first"))
    log._lock.acquire()  # what another thread's read or append would hold
    try:
        assert log.append_now("t", UserMessage(at=AT, text="second")) is None
    finally:
        log._lock.release()
    assert log.last_seq("t") == 1


def test_append_now_on_a_free_log_appends_like_append(log: EventLog) -> None:
    """With nobody else using the log, append_now assigns seqs and stores tokens as append."""
    log.append("t", UserMessage(at=AT, text="first"))
    stored = log.append_now("t", [UserMessage(at=AT, text="a"), UserMessage(at=AT, text="b")])
    assert stored is not None
    assert [s.seq for s in stored] == [2, 3]
    assert [s.seq for s in log.tail("t").events] == [1, 2, 3]
    assert log.read("t", 3).tokens == stored[1].tokens


def test_append_now_does_not_wait_for_another_process_holding_the_write_lock(
    log: EventLog,
) -> None:
    """Another connection (another process's) holds SQLite's write lock: append_now returns
    None at once instead of waiting out the busy timeout, and append waits and writes."""
    log.append("t", UserMessage(at=AT, text="first"))
    other = sqlite3.connect(log.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        assert log.append_now("t", UserMessage(at=AT, text="second")) is None
        assert time.monotonic() - started < 1.0
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert log.last_seq("t") == 1
    stored = log.append_now("t", UserMessage(at=AT, text="third"))
    assert stored is not None
    assert stored[0].seq == 2


# Reading someone's log


def test_a_log_opened_read_only_is_read_and_never_written(tmp_path: Path) -> None:
    """open_read_only replays what the log holds and refuses an append, leaving the file as
    it was."""
    path = tmp_path / "condensate.db"
    with EventLog.open(path) as writer:
        writer.append("t", [UserMessage(at=AT, text="a"), UserMessage(at=AT, text="b")])
    before = path.read_bytes()
    with EventLog.open_read_only(path) as reader:
        assert [s.event.text for s in reader.replay("t")] == ["a", "b"]  # type: ignore[union-attr]
        with pytest.raises(EventLogError, match="readonly"):
            reader.append("t", UserMessage(at=AT, text="c"))
    assert path.read_bytes() == before


def test_a_file_that_is_no_condensate_log_is_refused_read_only(tmp_path: Path) -> None:
    """Another SQLite file is refused, naming what it holds, and gains no tables."""
    path = tmp_path / "other.db"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE notes (x TEXT)")
    other.commit()
    other.close()
    with pytest.raises(EventLogError, match="not a Condensate log"):
        EventLog.open_read_only(path)
    check = sqlite3.connect(path)
    tables = [r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    check.close()
    assert tables == ["notes"]
