"""Keeping a log: ``condensate export`` and ``condensate archive`` as real subprocesses, with a
real daemon on the fake model server and without one. A thread exported, archived and
replayed comes back the same; what cannot be archived is refused saying why; the other
threads' rows are untouched."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.core.projector import snapshot
from condensate.eventlog import ThreadRows
from condensate.eventlog.archive import export_lines
from condensate.eventlog.postgres import PostgresStore
from condensate.eventlog.rebuild import rebuild
from condensate.eventlog.sqlite_sync import EventLog
from condensate.events import (
    AssistantMessage,
    BaselineMeasured,
    ThreadCreated,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    encode,
)
from condensate.replay.loading import load
from condensate.testing.fake_model import Call, FakeModelServer, Slow, Text, ToolCalls
from tests.integration.daemon import REPO, DaemonProcess, call, running_daemon, wait_for

AT = datetime(2026, 12, 1, tzinfo=UTC)
_models = itertools.count(1)


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    with running_daemon(tmp_path_factory.mktemp("archive"), fake.url) as process:
        yield process


async def condensate(home: Path, *args: str, **env: str) -> tuple[int, str, str]:
    """``condensate ARGS`` with CONDENSATE_HOME=home: its exit code, stdout and stderr."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-m", "condensate", *args],
            cwd=REPO,
            env={**environment, "CONDENSATE_HOME": str(home), **env},
            check=False,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def finished_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, work: Path
) -> str:
    """A thread through the daemon: a search, a failing command, an answer, then a second
    turn; idle once it returns."""
    model = f"claude-archive-{next(_models)}"
    (work / "notes.txt").write_text("the notes\n")
    fake.queue(
        ToolCalls([Call("search", {"glob": "*.txt"})], text="Looking."),
        ToolCalls([Call("shell", {"command": "false"})], text="Checking."),
        Text("Found the notes."),
        Text("Second answer."),
        model=model,
    )
    body = {"model": f"anthropic:{model}", "cwd": str(work), "brief": "Find the notes."}
    status, created = await call(session, daemon, "POST", "/threads", body)
    assert status == 201, created
    thread = created["id"]
    await wait_for(session, daemon, thread, lambda e: e["kind"] == "turn.ended")
    status, _ = await call(
        session, daemon, "POST", f"/threads/{thread}/messages", {"text": "More?"}
    )
    assert status == 202
    await wait_for(
        session,
        daemon,
        thread,
        lambda e: e["kind"] == "message.assistant" and e["text"] == "Second answer.",
    )
    for _ in range(200):
        status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
        if shown["status"] == "idle":
            return str(thread)
        await anyio.sleep(0.05)
    msg = f"Thread {thread} did not become idle."
    raise AssertionError(msg)


def rows_of(db: Path, thread: str) -> ThreadRows | None:
    with EventLog.open_read_only(db) as log:
        return log.rows(thread)


def view_of(out: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(out)
    return shown


async def test_a_thread_exported_archived_and_replayed_comes_back_the_same(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """With the daemon up: `export` prints every event as the log stores it; `archive` goes
    through the daemon, which lets the thread go (no longer in GET /threads); `view`,
    `export` and `replay` then read it from its archive exactly as before, and the rows of
    the thread left in the log are untouched."""
    home, db = daemon.home, daemon.home / "condensate.db"
    async with aiohttp.ClientSession() as session:
        thread = await finished_thread(session, daemon, fake, tmp_path)
        kept = await finished_thread(session, daemon, fake, tmp_path)
    exported = tmp_path / "exported.jsonl"
    code, _, err = await condensate(home, "export", thread, "-o", str(exported))
    assert code == 0, err
    rows = rows_of(db, thread)
    assert rows is not None
    lines = exported.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [row[0] for row in rows.events]
    for line, (seq, _kind, _v, _at, tokens, body) in zip(lines, rows.events, strict=True):
        assert line == f'{{"seq":{seq},"tokens":{tokens},{body[1:]}'
    code, before, err = await condensate(home, "view", thread, "--json", "--render")
    assert code == 0, err
    kept_rows = rows_of(db, kept)

    code, out, err = await condensate(home, "archive", thread, "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["file"] == str(home / "archive" / f"{thread}.db")
    assert (done["thread"], done["events"], done["lastSeq"]) == (thread, len(lines), len(lines))

    async with aiohttp.ClientSession() as session:
        status, listed = await call(session, daemon, "GET", "/threads")
        assert status == 200
        assert thread not in {t["id"] for t in listed["threads"]}
        assert kept in {t["id"] for t in listed["threads"]}
        status, body = await call(session, daemon, "GET", f"/threads/{thread}")
        assert (status, body["error"]) == (404, "unknown-thread")
    assert rows_of(db, thread) is None
    assert rows_of(db, kept) == kept_rows
    assert rows_of(Path(done["file"]), thread) == rows

    code, after, err = await condensate(home, "view", thread, "--json", "--render")
    assert code == 0, err
    assert view_of(after) == view_of(before)
    again = tmp_path / "again.jsonl"
    code, _, err = await condensate(home, "export", thread, "-o", str(again))
    assert code == 0, err
    assert again.read_bytes() == exported.read_bytes()

    replays = []
    for log in ([str(exported)], [str(db), "--thread", thread]):
        code, out, err = await condensate(
            home, "replay", *log, "--json", "--policies", "condensate,unmanaged"
        )
        assert code == 0, err
        replays.append(json.loads(out))
    from_export, from_archive = replays
    assert from_export["recording"]["model_calls"] == 4
    assert from_export["policies"] == from_archive["policies"]

    code, _, err = await condensate(home, "archive", thread)
    assert code == 2
    assert f"Thread {thread!r} is archived already" in err


async def test_archive_refuses_a_thread_running_a_turn(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """Through the daemon, a thread in the middle of a turn is refused (409 thread-running)
    with a sentence that says how to go on, on the command line too; it stays as it was."""
    model = f"claude-archive-{next(_models)}"
    fake.queue(Slow(Text("a slow answer"), chunk_delay=0.5, chunks=40), model=model)
    body = {"model": f"anthropic:{model}", "cwd": str(tmp_path), "brief": "Take your time."}
    async with aiohttp.ClientSession() as session:
        status, created = await call(session, daemon, "POST", "/threads", body)
        assert status == 201, created
        thread = created["id"]
        status, refused = await call(session, daemon, "POST", f"/threads/{thread}/archive")
        assert status == 409, refused
        assert refused["error"] == "thread-running"
        assert refused["detail"] == (
            f"Thread {thread!r} is running a turn; stop it (condensate stop {thread}) or let "
            "it end, then archive it."
        )
        code, out, err = await condensate(daemon.home, "archive", thread)
        assert (code, out) == (2, "")
        assert err == f"condensate: {refused['detail']}\n"
        status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
        assert (status, shown["status"]) == (200, "running")
        await call(session, daemon, "POST", f"/threads/{thread}/interrupt", {})
    assert not (daemon.home / "archive" / f"{thread}.db").exists()


async def test_archive_of_an_unknown_thread_says_there_is_none(daemon: DaemonProcess) -> None:
    """404 unknown-thread over HTTP; exit 2 and the same sentence on the command line."""
    async with aiohttp.ClientSession() as session:
        status, refused = await call(session, daemon, "POST", "/threads/t-nobody/archive")
    assert (status, refused["error"]) == (404, "unknown-thread")
    assert refused["detail"] == "There is no thread 't-nobody'."
    code, _, err = await condensate(daemon.home, "archive", "t-nobody")
    assert (code, err) == (2, "condensate: There is no thread 't-nobody'.\n")
    code, _, err = await condensate(daemon.home, "export", "t-nobody")
    assert code == 2
    assert "There is no thread 't-nobody' in the log, nor in its archive." in err


# -- without a daemon --------------------------------------------------------------------------


def write_thread(db: Path, thread: str, *, ended: bool = True) -> None:
    """A thread written through the store API, with a snapshot in the middle of its history
    and a line separator (U+2028) and a NEL (U+0085) in a message."""
    with EventLog.open(db) as log:
        log.append(
            thread,
            [
                ThreadCreated(at=AT, engine="api", model="anthropic:claude-sonnet-4-5", cwd="/w"),
                TurnStarted(at=AT, cause="human"),
                UserMessage(at=AT, text="Read the notes\u2028twice\u0085please."),
                AssistantMessage(
                    at=AT, text="Reading.", tool_calls=(ToolCall(id="c1", name="read"),)
                ),
                ToolResult(at=AT, call_id="c1", tool="read", argument="n", output="x = 1\n" * 50),
            ],
        )
        log.save_snapshot(thread, 5, snapshot.dump(rebuild(log, thread)))
        tail: list[Any] = [AssistantMessage(at=AT, text="Read them.")]
        if ended:
            tail.append(TurnEnded(at=AT, outcome="completed"))
        log.append(thread, tail)


async def test_without_a_daemon_archive_works_in_the_log_itself(tmp_path: Path) -> None:
    """With no daemon, `archive` archives in the log directly; `export` includes the events
    before the snapshot, and `replay` of the export and of the log's archive agree."""
    db = tmp_path / "condensate.db"
    write_thread(db, "t-alone")
    write_thread(db, "t-other")
    with EventLog.open_read_only(db) as log:
        before = snapshot.dump(rebuild(log, "t-alone"))
        rows, other = log.rows("t-alone"), log.rows("t-other")
    exported = tmp_path / "t.jsonl"
    code, out, err = await condensate(tmp_path, "export", "t-alone", "-o", str(exported), "--json")
    assert code == 0, err
    assert json.loads(out) == {"thread": "t-alone", "events": 8, "file": str(exported)}
    assert [json.loads(line)["seq"] for line in exported.read_text().split("\n")[:-1]] == list(
        range(1, 9)
    )
    code, out, err = await condensate(tmp_path, "archive", "t-alone")
    assert code == 0, err
    assert out == f"archived thread t-alone: 8 events to {tmp_path / 'archive' / 't-alone.db'}\n"
    with EventLog.open_read_only(db) as log:
        assert log.thread_ids() == ["t-other"]
        assert log.rows("t-other") == other
    with EventLog.open_read_only(tmp_path / "archive" / "t-alone.db") as archived:
        assert archived.rows("t-alone") == rows
        assert snapshot.dump(rebuild(archived, "t-alone")) == before
    code, out, err = await condensate(tmp_path, "export", "t-alone")
    assert code == 0, err
    assert out == exported.read_text()
    reports = []
    for log_args in ([str(exported)], [str(db), "--thread", "t-alone"]):
        code, out, err = await condensate(
            tmp_path, "replay", *log_args, "--json", "--policies", "condensate"
        )
        assert code == 0, err
        reports.append(json.loads(out))
    assert reports[0]["policies"] == reports[1]["policies"]
    assert reports[0]["recording"]["human_messages"] == 1


async def test_without_a_daemon_an_unfinished_thread_is_refused(tmp_path: Path) -> None:
    """A thread whose turn never ended (its daemon was killed during it) is refused with a
    sentence naming why; the log keeps it."""
    db = tmp_path / "condensate.db"
    write_thread(db, "t-cut", ended=False)
    code, out, err = await condensate(tmp_path, "archive", "t-cut")
    assert (code, out) == (2, "")
    assert err == (
        "condensate: Thread 't-cut' is not finished: its last turn never ended (a daemon "
        "stopped during it; the daemon resumes it).\n"
    )
    with EventLog.open_read_only(db) as log:
        assert log.thread_ids() == ["t-cut"]
        assert log.last_seq("t-cut") == 7
    assert not (tmp_path / "archive" / "t-cut.db").exists()


async def test_archive_on_a_postgres_log_without_a_daemon(
    tmp_path: Path, postgres_url: str
) -> None:
    """With CONDENSATE_DATABASE_URL and no daemon, the archive goes to the state directory's
    archive/, the thread leaves PostgreSQL, and `view` reads it back from the archive."""
    seed = tmp_path / "seed.db"
    write_thread(seed, "t-pg")
    with EventLog.open_read_only(seed) as log:
        stored = [s for s in log.replay("t-pg") if s.event.kind != "snapshot.taken"]
    store = await PostgresStore.connect(postgres_url)
    try:
        await store.append("t-pg", [s.event for s in stored], [s.tokens for s in stored])
    finally:
        await store.close()
    env = {"CONDENSATE_DATABASE_URL": postgres_url}
    code, before, err = await condensate(tmp_path, "view", "t-pg", "--json", "--render", **env)
    assert code == 0, err
    code, out, err = await condensate(tmp_path, "archive", "t-pg", "--json", **env)
    assert code == 0, err
    assert json.loads(out)["file"] == str(tmp_path / "archive" / "t-pg.db")
    code, out, err = await condensate(tmp_path, "doctor", "--json", **env)
    assert (code, json.loads(out)["threads"]) == (0, 0), err
    code, after, err = await condensate(tmp_path, "view", "t-pg", "--json", "--render", **env)
    assert code == 0, err
    assert json.loads(after) == json.loads(before)


async def test_export_prints_each_event_as_the_log_stores_it(tmp_path: Path) -> None:
    """An event written at an old version is exported at that version (`replay` upcasts it);
    a row whose JSON spans lines is exported on one; a row that is no event object is an
    error naming its seq."""
    db = tmp_path / "condensate.db"
    write_thread(db, "t-old")
    old_usage = (
        '{"kind": "model.usage", "v": 1, "at": "2026-12-01T00:00:00Z",\n'
        ' "input_tokens": 900, "cached_tokens": 600, "output_tokens": 5}'
    )
    with closing(sqlite3.connect(db)) as connection, connection:
        connection.execute(
            "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
            " VALUES ('t-old', 9, 'model.usage', 1, '2026-12-01T00:00:00Z', 0, ?)",
            (old_usage,),
        )
    home = tmp_path / "home"
    home.mkdir()
    db = db.rename(home / "condensate.db")
    exported = tmp_path / "old.jsonl"
    code, _, err = await condensate(home, "export", "t-old", "-o", str(exported))
    assert code == 0, err
    last = exported.read_text().split("\n")[-2]
    assert json.loads(last) == {"seq": 9, "tokens": 0, **json.loads(old_usage)}
    code, out, err = await condensate(
        home, "replay", str(exported), "--json", "--policies", "condensate"
    )
    assert code == 0, err
    assert json.loads(out)["recording"]["model_calls"] == 2
    with closing(sqlite3.connect(db)) as connection, connection:
        connection.execute(
            "INSERT INTO events (thread_id, seq, kind, v, at, tokens, body)"
            " VALUES ('t-old', 10, 'message.user', 1, '2026-12-01T00:00:00Z', 0, '[1, 2]')"
        )
    code, _, err = await condensate(home, "export", "t-old")
    assert code == 2
    assert err == "condensate: Event 10 of thread 't-old' is not an event object: '[1, 2]'.\n"


async def test_view_of_a_thread_no_log_holds_says_so(tmp_path: Path) -> None:
    """``view`` of a thread neither the log nor an archive holds is one sentence naming the
    thread, exit 2; not a complaint about an engine."""
    code, out, err = await condensate(tmp_path, "view", "t-nope")
    assert code == 2
    assert out == ""
    assert err.strip().endswith(
        "condensate: There is no thread 't-nope' in the log or its archives "
        "(condensate threads lists them)."
    )


def test_an_event_with_a_tokens_field_of_its_own_is_exported_and_replayed(
    tmp_path: Path,
) -> None:
    """A thread that measured its baseline (``baseline.measured`` has a ``tokens`` field of
    its own) is exported, that field in place of its count as the tail sends it, and replay
    reads the event back whole (the export had refused every CLI thread)."""
    at = datetime(2026, 12, 5, 7, tzinfo=UTC)
    created = ThreadCreated(at=at, engine="api", model="anthropic:claude-opus-5-5", cwd="/")
    bodies = [
        encode(created),
        encode(UserMessage(at=at, text="hello")),
        encode(BaselineMeasured(at=at, tokens=9859)),
    ]
    rows = ThreadRows(
        "t-own",
        at.isoformat(),
        tuple(
            (seq, json.loads(body)["kind"], 1, at.isoformat(), 3, body)
            for seq, body in enumerate(bodies, start=1)
        ),
        (),
    )
    lines = list(export_lines(rows))
    own = json.loads(lines[2])
    assert (own["seq"], own["kind"], own["tokens"]) == (3, "baseline.measured", 9859)
    exported = tmp_path / "own.jsonl"
    exported.write_text("\n".join(lines) + "\n")
    replayed = load(exported)
    assert BaselineMeasured(at=at, tokens=9859) in replayed.events
