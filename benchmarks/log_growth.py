"""Log growth: how many bytes the event log takes per event, per model call and per hour of
agent work, and what keeping a thread costs once it is archived or exported.

The long task (``benchmarks/tasks.py``: 330 model calls, seed 20261207) is replayed under
Condensate's own policy (``condensate.replay.run_policy``, against the in-process fake model
server), which yields the events a daemon logs for a native thread: ``thread.created``, each
turn and human message, every reply with its ``model.usage``, every tool result, and every
window the planner took, with their token counts. Those events are appended one by one to a
real SQLite log through the daemon's own ``EventLog`` (WAL, ``synchronous=NORMAL``), with a
snapshot of the view every 1,000 events as the runtime takes them, and the file is measured
as it grows and once closed (the WAL folded back in). The thread is then archived
(``condensate.eventlog.archive``) and exported, and both files measured (the export also gzipped).

An hour of agent work is the task's own pacing: its clock (5 to 40 s a model call, 1 to 8 s a
tool result, 1 to 10 minutes between human turns) spans the figure ``task_hours`` reports.

    python benchmarks/log_growth.py              # a table
    python benchmarks/log_growth.py --json       # one JSON object
    python benchmarks/log_growth.py --json --small   # CI: 90 calls
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import structlog

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.long_task import FULL_WINDOW, SMALL_CALLS, machine
from benchmarks.tasks import FULL_CALLS, SEED, long_task
from condensate.eventlog.archive import archive_thread, export_lines
from condensate.core.projector import Projection
from condensate.events import AssistantMessage, Stored
from condensate.replay import ReplayConfig, run_policy
from condensate.runtime import SNAPSHOT_EVERY
from condensate.eventlog.sqlite import SqliteStore
from condensate.eventlog.sqlite_sync import EventLog

THREAD = "t-long-task"
SAMPLES = 10
"""How many times the file's size is read as the log grows."""


def logged_events(calls: int, window: int, seed: int) -> list[Stored]:
    """The log a daemon writes for the task's thread: the condensate policy's replay."""
    recording = long_task(calls, seed)
    config = ReplayConfig(window=window, policies=("condensate",))
    run = anyio.run(lambda: run_policy(recording, config, "condensate"))
    return run.history


def wal_size(path: Path) -> int:
    """The WAL's size on disk: SQLite reuses it from the start after a checkpoint without
    shrinking it, so while the log is open this is its high-water mark."""
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def pages(path: Path) -> int:
    """The bytes of the database as a reader sees it (WAL frames included)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
        count = connection.execute("PRAGMA page_count").fetchone()[0]
        size = connection.execute("PRAGMA page_size").fetchone()[0]
    return int(count) * int(size)


def write_log(path: Path, history: list[Stored]) -> dict[str, Any]:
    """Append ``history`` to a new log at ``path`` one event at a time, snapshotting as the
    runtime does; the sizes along the way and at the end."""
    log = EventLog.open(path)
    empty = pages(path)
    view = Projection()
    snapshot_at = 0
    samples: list[dict[str, int]] = []
    every = max(len(history) // SAMPLES, 1)
    calls = 0
    started = time.perf_counter()
    for index, item in enumerate(history, 1):
        (stored,) = log.append(THREAD, [item.event], tokens=[item.tokens])
        view.apply(stored)
        calls += isinstance(item.event, AssistantMessage)
        if view.last_seq - snapshot_at >= SNAPSHOT_EVERY:
            view.apply(log.save_snapshot(THREAD, view.last_seq, view.to_json()))
            snapshot_at = view.last_seq
        if index % every == 0 or index == len(history):
            samples.append({"events": view.last_seq, "calls": calls, "database_bytes": pages(path)})
    elapsed = time.perf_counter() - started
    wal = wal_size(path)
    log.close()
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
        stored_bytes = connection.execute(
            "SELECT SUM(LENGTH(CAST(body AS BLOB))), SUM(LENGTH(CAST(at AS BLOB)) + LENGTH(kind))"
            " FROM events"
        ).fetchone()
        snapshot_bytes = connection.execute(
            "SELECT COALESCE(SUM(LENGTH(CAST(state AS BLOB))), 0), COUNT(*) FROM snapshots"
        ).fetchone()
        by_kind = connection.execute(
            "SELECT kind, COUNT(*), SUM(LENGTH(CAST(body AS BLOB))) FROM events GROUP BY kind"
            " ORDER BY 3 DESC"
        ).fetchall()
    return {
        "empty_bytes": empty,
        "wal_bytes_open": wal,
        "file_bytes": path.stat().st_size,
        "body_bytes": int(stored_bytes[0]),
        "snapshot_bytes": int(snapshot_bytes[0]),
        "snapshots": int(snapshot_bytes[1]),
        "by_kind": {kind: {"events": n, "body_bytes": int(b)} for kind, n, b in by_kind},
        "samples": samples,
        "append_s": round(elapsed, 2),
    }


def kept(path: Path, directory: Path) -> dict[str, Any]:
    """Archive the thread out of the log at ``path`` and export it: the files' sizes."""

    async def go() -> tuple[int, str]:
        store = SqliteStore.open(path)
        try:
            rows = await store.rows(THREAD)
            assert rows is not None
            record = await archive_thread(store, THREAD, directory)
            return record.events, "".join(line + "\n" for line in export_lines(rows))
        finally:
            await store.close()

    events, exported = anyio.run(go)
    return {
        "events": events,
        "archive_bytes": (directory / f"{THREAD}.db").stat().st_size,
        "export_bytes": len(exported.encode()),
        "export_gzip_bytes": len(gzip.compress(exported.encode(), compresslevel=6)),
        "live_file_bytes_after": path.stat().st_size,
    }


def run(calls: int, window: int, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    history = logged_events(calls, window, seed)
    span = history[-1].event.at - history[0].event.at
    hours = span.total_seconds() / 3600
    model_calls = sum(isinstance(s.event, AssistantMessage) for s in history)
    with tempfile.TemporaryDirectory(prefix="condensate-growth-") as scratch:
        path = Path(scratch) / "condensate.db"
        grown = write_log(path, history)
        archived = kept(path, Path(scratch) / "archive")
    events = grown["samples"][-1]["events"]
    grew = grown["file_bytes"] - grown["empty_bytes"]
    return {
        "benchmark": "log_growth",
        "command": shlex.join(["python", *sys.argv]),
        "machine": machine(),
        "seed": seed,
        "window": window,
        "task_hours": round(hours, 2),
        "model_calls": model_calls,
        "calls_per_hour": round(model_calls / hours, 1),
        "events": events,
        "events_by_kind": dict(Counter(s.event.kind for s in history).most_common()),
        "log": grown,
        "bytes_per_event": round(grew / events),
        "bytes_per_call": round(grew / model_calls),
        "bytes_per_hour": round(grew / hours),
        "archive": archived,
        "elapsed_s": round(time.perf_counter() - started, 2),
    }


def _mb(size: float) -> str:
    return f"{size / 1e6:.2f} MB"


def table(result: dict[str, Any]) -> str:
    grown, archived = result["log"], result["archive"]
    lines = [
        f"log growth over the long task ({result['model_calls']} model calls, "
        f"{result['events']} events, {result['task_hours']} h of agent work at "
        f"{result['calls_per_hour']} calls an hour)",
        f"  database file: {_mb(grown['empty_bytes'])} empty -> {_mb(grown['file_bytes'])} "
        f"closed; its WAL reached {_mb(grown['wal_bytes_open'])} while open",
        f"  per event {result['bytes_per_event']:,} B, per model call "
        f"{result['bytes_per_call']:,} B, per hour {_mb(result['bytes_per_hour'])}",
        f"  event bodies {_mb(grown['body_bytes'])}, {grown['snapshots']} snapshots "
        f"{_mb(grown['snapshot_bytes'])}",
        "  as it grows (events: database bytes):",
    ]
    lines += [
        f"    {s['events']:>6} events, {s['calls']:>4} calls: {_mb(s['database_bytes'])}"
        for s in grown["samples"]
    ]
    lines += ["  by kind (events, body bytes):"]
    lines += [
        f"    {kind:<20} {row['events']:>6} {row['body_bytes']:>12,}"
        for kind, row in grown["by_kind"].items()
    ]
    lines += [
        f"  kept: archive file {_mb(archived['archive_bytes'])}, export "
        f"{_mb(archived['export_bytes'])} ({_mb(archived['export_gzip_bytes'])} gzipped); the "
        f"live file stays {_mb(archived['live_file_bytes_after'])} (its pages are reused)",
        f"({result['elapsed_s']} s)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--small", action="store_true", help=f"{SMALL_CALLS} calls (CI)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(30),
    )
    calls = SMALL_CALLS if args.small else FULL_CALLS
    result = run(calls, FULL_WINDOW, args.seed)
    sys.stdout.write((json.dumps(result, indent=2) if args.json else table(result)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
