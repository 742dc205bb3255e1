"""A fleet: two real daemons on one PostgreSQL log. Each owns the threads it created through
a lease; either answers reads and tails of any thread; a write to a thread the other owns is
refused naming its owner; and when one is SIGKILLed mid-turn, the other takes its threads
over within the lease time and finishes the turn, with nothing lost or written twice and
every view equal to a full replay of the log."""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import psycopg
import pytest

from condensate.eventlog.postgres import PostgresStore
from condensate.eventlog.rebuild import rebuilt
from condensate.testing.fake_model import FakeModelServer, Slow, Text
from tests.integration.daemon import DaemonProcess, call, wait_for

LEASE = 3.0
SLOW = "claude-sonnet-4-5"
"""The model of the thread the kill interrupts: its first reply streams for ~10 s."""
QUICK = "claude-haiku-4-5"


@dataclass
class Fleet:
    a: DaemonProcess
    b: DaemonProcess
    session: aiohttp.ClientSession
    url: str


def daemon(tmp_path: Path, name: str, fake: FakeModelServer, url: str) -> DaemonProcess:
    home = tmp_path / name
    home.mkdir(exist_ok=True)
    env = {"CONDENSATE_DATABASE_URL": url, "CONDENSATE_LEASE_SECONDS": str(LEASE)}
    return DaemonProcess(home, fake.url, extra_env=env)


@pytest.fixture
async def fleet(tmp_path: Path, fake: FakeModelServer, postgres_url: str) -> AsyncIterator[Fleet]:
    a, b = daemon(tmp_path, "a", fake, postgres_url), daemon(tmp_path, "b", fake, postgres_url)
    await anyio.to_thread.run_sync(a.start)
    await anyio.to_thread.run_sync(b.start)
    try:
        async with aiohttp.ClientSession() as session:
            yield Fleet(a, b, session, postgres_url)
    finally:
        await anyio.to_thread.run_sync(a.close)
        await anyio.to_thread.run_sync(b.close)


async def create(fleet: Fleet, on: DaemonProcess, model: str, work: Path) -> str:
    await anyio.Path(work).mkdir(exist_ok=True)
    body = {"engine": "api", "model": f"anthropic:{model}", "cwd": str(work), "brief": "Go."}
    status, created = await call(fleet.session, on, "POST", "/threads", body)
    assert status == 201, created
    return str(created["id"])


def rows(url: str, thread: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as connection:
        found = connection.execute(
            "SELECT seq, kind FROM events WHERE thread_id = %s ORDER BY seq", (thread,)
        ).fetchall()
    return [(int(seq), str(kind)) for seq, kind in found]


def slow_calls(fake: FakeModelServer) -> int:
    return len([r for r in fake.requests if r.model == SLOW])


async def slow_call_sent(fake: FakeModelServer, before: int) -> None:
    """Wait until the fake has the thread's slow call (the module's fake keeps every
    earlier test's requests)."""
    with anyio.fail_after(10):
        while slow_calls(fake) <= before:  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def owner(fleet: Fleet, on: DaemonProcess, thread: str) -> Any:
    """The daemon that owns ``thread`` as ``on`` sees it; None while nobody does."""
    _, shown = await call(fleet.session, on, "GET", f"/threads/{thread}")
    return shown.get("owner") or None


async def test_each_daemon_owns_what_it_created_and_answers_reads_of_the_others(
    fleet: Fleet, fake: FakeModelServer, tmp_path: Path
) -> None:
    """Both daemons list both threads with their owners; a read or a tail of the other's
    thread is answered from the log; a write to it is 409 naming the owner."""
    fake.queue(Text("done here"), model=QUICK)
    fake.queue(Text("done there"), model=SLOW)
    here = await create(fleet, fleet.a, QUICK, tmp_path / "w1")
    there = await create(fleet, fleet.b, SLOW, tmp_path / "w2")
    await wait_for(fleet.session, fleet.a, here, lambda e: e["kind"] == "turn.ended")
    ended = await wait_for(fleet.session, fleet.a, there, lambda e: e["kind"] == "turn.ended")
    assert "done there" in [e.get("text") for e in ended]  # B's thread, tailed through A

    a_name = await owner(fleet, fleet.a, here)
    b_name = await owner(fleet, fleet.b, there)
    assert a_name
    assert b_name
    assert a_name != b_name
    _, seen = await call(fleet.session, fleet.a, "GET", f"/threads/{there}")
    assert (seen["status"], seen["owner"]) == ("elsewhere", b_name)
    assert seen["events"] == len(rows(fleet.url, there))
    for on in (fleet.a, fleet.b):
        _, listed = await call(fleet.session, on, "GET", "/threads")
        owners = {t["id"]: t["owner"] for t in listed["threads"]}
        assert owners == {here: a_name, there: b_name}

    status, refused = await call(
        fleet.session, fleet.a, "POST", f"/threads/{there}/messages", {"text": "hi"}
    )
    assert status == 409, refused
    assert refused["error"] == "thread-owned-elsewhere"
    assert b_name in refused["detail"]
    assert len(rows(fleet.url, there)) == seen["events"]  # nothing written


async def test_a_killed_daemons_threads_are_taken_over_within_the_lease(
    fleet: Fleet, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A is SIGKILLed while its thread's model call streams; B claims the thread once the
    lease runs out, reports the cut-off turn and resumes it; the log holds every event A
    wrote, once, then B's; B's view equals a full replay; A, restarted, leaves it to B."""
    fake.queue(Slow(Text("never finished " * 20), chunk_delay=0.5, chunks=20), model=SLOW)
    fake.queue(Text("finished on b"), model=SLOW)
    fake.queue(Text("b's own"), model=QUICK)
    before_calls = slow_calls(fake)
    taken = await create(fleet, fleet.a, SLOW, tmp_path / "w1")
    own = await create(fleet, fleet.b, QUICK, tmp_path / "w2")
    await wait_for(fleet.session, fleet.b, own, lambda e: e["kind"] == "turn.ended")
    await wait_for(fleet.session, fleet.a, taken, lambda e: e["kind"] == "turn.started")
    await slow_call_sent(fake, before_calls)
    before = rows(fleet.url, taken)
    a_name = await owner(fleet, fleet.a, taken)

    fleet.a.kill()
    killed = time.monotonic()
    b_name = None
    with anyio.fail_after(LEASE * 3 + 10):
        while b_name is None or b_name == a_name:
            await anyio.sleep(0.1)
            b_name = await owner(fleet, fleet.b, taken)
    assert time.monotonic() - killed <= LEASE + LEASE / 3 + 2.0
    events = await wait_for(
        fleet.session,
        fleet.b,
        taken,
        lambda e: e["kind"] == "turn.ended" and e.get("outcome") == "completed",
    )
    assert "finished on b" in [e.get("text") for e in events]

    logged = rows(fleet.url, taken)
    assert logged[: len(before)] == before
    assert [seq for seq, _ in logged] == list(range(1, len(logged) + 1))
    kinds = [kind for _, kind in logged]
    assert kinds.count("thread.created") == 1
    assert kinds.count("turn.started") == 2  # A's, cut off; B's resume
    assert "turn.ended" in kinds[len(before) :]

    _, shown = await call(fleet.session, fleet.b, "GET", f"/threads/{taken}")
    store = await PostgresStore.connect(fleet.url)
    try:
        replayed = await rebuilt(store, taken)
    finally:
        await store.close()
    assert shown["events"] == replayed.last_seq == len(logged)
    assert shown["costs"]["calls"] == sum(b.calls for b in replayed.billed.values())

    await anyio.to_thread.run_sync(fleet.a.start)
    await anyio.sleep(LEASE)
    assert await owner(fleet, fleet.a, taken) == b_name
    assert rows(fleet.url, taken) == logged


async def test_a_frozen_daemon_that_lost_its_thread_writes_nothing_to_it_when_it_wakes(
    fleet: Fleet, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A is frozen (SIGSTOP) while its thread's model call streams; B takes the thread over
    and finishes the turn. A, woken (SIGCONT), finds the lease gone (at its next round, or at
    its next append, which is refused) and lets the thread go: nothing of its stale reply
    reaches the log, and it answers for the thread as B's."""
    fake.queue(Slow(Text("stale reply " * 20), chunk_delay=0.3, chunks=20), model=SLOW)
    fake.queue(Text("finished on b"), model=SLOW)
    before_calls = slow_calls(fake)
    taken = await create(fleet, fleet.a, SLOW, tmp_path / "w1")
    await slow_call_sent(fake, before_calls)
    a_name = await owner(fleet, fleet.a, taken)
    assert fleet.a.process is not None
    fleet.a.process.send_signal(signal.SIGSTOP)
    try:
        b_name = None
        with anyio.fail_after(LEASE * 3 + 10):
            while b_name is None or b_name == a_name:
                await anyio.sleep(0.1)
                b_name = await owner(fleet, fleet.b, taken)
        await wait_for(
            fleet.session,
            fleet.b,
            taken,
            lambda e: e["kind"] == "turn.ended" and e.get("outcome") == "completed",
        )
    finally:
        fleet.a.process.send_signal(signal.SIGCONT)
    settled = rows(fleet.url, taken)
    await anyio.sleep(8.0)  # past A's stale stream and its next round
    assert rows(fleet.url, taken) == settled
    _, seen = await call(fleet.session, fleet.a, "GET", f"/threads/{taken}")
    assert (seen["status"], seen["owner"]) == ("elsewhere", b_name)
    _, page = await call(fleet.session, fleet.b, "GET", f"/threads/{taken}/tail?history=1")
    assert not [e for e in page["events"] if "stale reply" in str(e.get("text"))]


async def test_a_stopped_daemon_hands_its_threads_over_at_once(
    tmp_path: Path, fake: FakeModelServer, postgres_url: str
) -> None:
    """A daemon stopped with SIGTERM lets its leases go as it stops: with a 30 s lease, the
    other daemon takes its thread over at its next round (a third of a lease), not after the
    lease would have run out, and the thread answers a new message there."""
    lease = 30.0
    env = {"CONDENSATE_DATABASE_URL": postgres_url, "CONDENSATE_LEASE_SECONDS": str(lease)}
    homes = [tmp_path / "a", tmp_path / "b"]
    for home in homes:
        home.mkdir()
    a, b = (DaemonProcess(home, fake.url, extra_env=env) for home in homes)
    await anyio.to_thread.run_sync(a.start)
    await anyio.to_thread.run_sync(b.start)
    try:
        async with aiohttp.ClientSession() as session:
            fleet = Fleet(a, b, session, postgres_url)
            fake.queue(Text("done on a"), model=QUICK)
            fake.queue(Text("answered on b"), model=QUICK)
            thread = await create(fleet, a, QUICK, tmp_path / "w")
            await wait_for(session, a, thread, lambda e: e["kind"] == "turn.ended")
            a_name = await owner(fleet, a, thread)
            assert await anyio.to_thread.run_sync(a.stop) == 0
            stopped = time.monotonic()
            with anyio.fail_after(lease):
                while True:
                    _, shown = await call(session, b, "GET", f"/threads/{thread}")
                    if shown["status"] != "unowned":
                        break
                    status, refused = await call(
                        session, b, "POST", f"/threads/{thread}/messages", {"text": "now?"}
                    )
                    assert (status, refused["error"]) == (409, "thread-changing-hands")
                    await anyio.sleep(0.2)
            assert time.monotonic() - stopped <= lease / 3 + 3.0
            assert shown["owner"] not in (None, "", a_name)
            path = f"/threads/{thread}/messages"
            status, _ = await call(session, b, "POST", path, {"text": "and now?"})
            assert status in (200, 202)
            events = await wait_for(session, b, thread, lambda e: e.get("text") == "answered on b")
            assert [e["kind"] for e in events].count("thread.created") == 1
    finally:
        await anyio.to_thread.run_sync(a.close)
        await anyio.to_thread.run_sync(b.close)
