"""Event-log backends: SQLite (a file) and PostgreSQL (a private server from the
distribution's packages, ``tests/integration/postgres.py``), measured in one run through the
daemon's own ``EventStore`` interface:

* **appends**: tool results with ~300-token outputs, one event per transaction, and batches
  of 100 (events per second);
* **tail**: a page of 200 events from a 10,000-event thread, as ``GET /threads/:id/tail``
  reads it (median and p99 of 200 reads at random points);
* **rebuild**: a 10,000-event thread's view from its log (no snapshot), as a restart does.

PostgreSQL runs with its own defaults (every commit flushed to disk); SQLite as the daemon
runs it (WAL, ``synchronous=NORMAL``: a commit is not flushed, a power cut may lose the last
ones but never corrupts the log).

Each figure is the median of three repeats; ratios are PostgreSQL's over SQLite's.

    python benchmarks/log_backends.py              # a table
    python benchmarks/log_backends.py --json       # one JSON object
    python benchmarks/log_backends.py --json --small   # CI
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from condensate.core.tokens import count_event, counter_for
from condensate.eventlog import EventStore
from condensate.events import Event, ToolResult, now_utc
from condensate.eventlog.postgres import PostgresStore
from condensate.eventlog.rebuild import rebuilt
from condensate.eventlog.sqlite import SqliteStore
from tests.integration import postgres

REPEATS = 3
SEED = 20261201


def results(n: int) -> tuple[list[Event], list[int]]:
    """``n`` tool results with ~300-token outputs, and their counts."""
    rng = random.Random(SEED)
    counter = counter_for("claude-opus-5-5")
    events: list[Event] = []
    for i in range(n):
        lines = [f"line {j}: value = {rng.randrange(10**6)} # step {i}" for j in range(40)]
        events.append(
            ToolResult(at=now_utc(), call_id=f"call_{i}", tool="read", output="\n".join(lines))
        )
    return events, [count_event(e, counter) for e in events]


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def measure(store: EventStore, sizes: dict[str, int]) -> dict[str, Any]:
    singles, batched, thread_events = sizes["single"], sizes["batched"], sizes["thread"]
    events, tokens = results(max(singles, batched, thread_events))
    single_rates, batch_rates, rebuilds = [], [], []
    for repeat in range(REPEATS):

        async def one_by_one(thread: str = f"single-{repeat}") -> None:
            for i in range(singles):
                await store.append(thread, [events[i]], [tokens[i]])

        async def in_batches(thread: str = f"batch-{repeat}") -> None:
            for start in range(0, batched, 100):
                await store.append(thread, events[start : start + 100], tokens[start : start + 100])

        single_rates.append(singles / await timed(one_by_one))
        batch_rates.append(batched / await timed(in_batches))
    for start in range(0, thread_events, 100):
        await store.append("long", events[start : start + 100], tokens[start : start + 100])
    rng = random.Random(SEED)
    reads = []
    for _ in range(200):
        after = rng.randrange(max(thread_events - 200, 1))
        started = time.perf_counter()
        await store.tail("long", after=after, limit=200)
        reads.append(time.perf_counter() - started)
    for _ in range(REPEATS):
        rebuilds.append(await timed(lambda: rebuilt(store, "long")))
    reads.sort()
    return {
        "appends_per_s_single": round(statistics.median(single_rates)),
        "appends_per_s_batch_100": round(statistics.median(batch_rates)),
        "tail_200_median_ms": round(statistics.median(reads) * 1000, 3),
        "tail_200_p99_ms": round(reads[min(len(reads) - 1, round(0.99 * len(reads)))] * 1000, 3),
        "rebuild_s": round(statistics.median(rebuilds), 3),
        "thread_events": thread_events,
    }


async def both(sizes: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="condensate-log-backends-") as tmp:
        sqlite = SqliteStore.open(Path(tmp) / "log.db")
        try:
            out["sqlite"] = await measure(sqlite, sizes)
        finally:
            await sqlite.close()
    with postgres.server(durable=True) as url:
        store = await PostgresStore.connect(url)
        try:
            out["postgres"] = await measure(store, sizes)
        finally:
            await store.close()
    out["ratios_postgres_over_sqlite"] = {
        key: round(out["postgres"][key] / out["sqlite"][key], 3)
        for key in out["sqlite"]
        if key != "thread_events" and out["sqlite"][key]
    }
    return out


def run(small: bool) -> dict[str, Any]:
    sizes = (
        {"single": 100, "batched": 500, "thread": 1_000}
        if small
        else {"single": 1_000, "batched": 5_000, "thread": 10_000}
    )
    return {
        "benchmark": "log_backends",
        "command": shlex.join(["python", *sys.argv]),
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
        },
        "sizes": sizes,
        **anyio.run(both, sizes),
    }


def table(report: dict[str, Any]) -> str:
    rows = [f"log_backends ({report['command']}):"]
    for backend in ("sqlite", "postgres"):
        figures = report[backend]
        rows.append(
            f"  {backend:9s} single {figures['appends_per_s_single']:>6}/s  batch "
            f"{figures['appends_per_s_batch_100']:>6}/s  tail {figures['tail_200_median_ms']} ms "
            f"(p99 {figures['tail_200_p99_ms']})  rebuild {figures['rebuild_s']} s"
        )
    rows.append(f"  postgres / sqlite: {report['ratios_postgres_over_sqlite']}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--small", action="store_true", help="small sizes (CI)")
    args = parser.parse_args(argv)
    report = run(args.small)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
