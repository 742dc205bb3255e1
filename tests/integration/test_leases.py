"""Leases on the PostgreSQL log, store against store as two daemons of a fleet hold them:
only the holder appends, a lapsed lease is claimed by another, and the one that lost it is
refused at its next write, naming the new owner."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import anyio
import psycopg
import pytest

from condensate.errors import ThreadOwnedElsewhere
from condensate.events import UserMessage
from condensate.eventlog.postgres import IDLE_IN_TRANSACTION_MS, SESSION_OPTIONS, Owner, PostgresStore

AT = datetime(2026, 12, 1, tzinfo=UTC)
SHORT = 1.0


@pytest.fixture
async def stores(postgres_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    a = await PostgresStore.connect(postgres_url, Owner("a", "http://a", SHORT))
    b = await PostgresStore.connect(postgres_url, Owner("b", "http://b", SHORT))
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def say(store: PostgresStore, text: str) -> list[int]:
    stored = await store.append("t", [UserMessage(at=AT, text=text)], [1])
    return [s.seq for s in stored]


async def test_the_first_append_takes_the_lease_and_others_are_refused(stores) -> None:
    a, b = stores
    assert await say(a, "mine") == [1]
    with pytest.raises(ThreadOwnedElsewhere, match="owned by daemon a at http://a"):
        await say(b, "theirs")
    assert await a.last_seq("t") == 1
    lease = await b.lease("t")
    assert lease is not None
    assert (lease.owner, lease.url) == ("a", "http://a")


async def test_a_live_lease_cannot_be_claimed(stores) -> None:
    a, b = stores
    await say(a, "mine")
    assert not await b.claim("t", "b", "http://b", SHORT)
    assert await b.orphans() == []


async def test_a_lapsed_lease_is_claimed_and_its_old_holder_refused(stores) -> None:
    """Once ``a`` stops renewing, ``b`` claims the thread; ``a``'s next append is refused
    naming ``b``, and ``b`` appends after ``a``'s last seq."""
    a, b = stores
    await say(a, "mine")
    await anyio.sleep(SHORT + 0.3)
    assert await b.orphans() == ["t"]
    assert await b.claim("t", "b", "http://b", SHORT)
    with pytest.raises(ThreadOwnedElsewhere, match="owned by daemon b"):
        await say(a, "late")
    assert await say(b, "taken over") == [2]
    assert await a.renew("a", SHORT) == set()
    assert await b.renew("b", SHORT) == {"t"}


async def test_renewing_keeps_a_lease_past_its_first_term(stores) -> None:
    a, b = stores
    await say(a, "mine")
    for _ in range(3):
        await anyio.sleep(SHORT / 2)
        assert await a.renew("a", SHORT) == {"t"}
    assert not await b.claim("t", "b", "http://b", SHORT)


async def test_a_holder_frozen_inside_a_transaction_blocks_a_claim_only_briefly(
    stores, postgres_url: str
) -> None:
    """A daemon frozen mid-append holds its lease row locked; the server ends its session
    after IDLE_IN_TRANSACTION_MS, so the claim that waited goes through."""
    a, b = stores
    await say(a, "mine")
    frozen = await psycopg.AsyncConnection.connect(postgres_url, options=SESSION_OPTIONS)
    try:
        await frozen.execute("SELECT 1 FROM leases WHERE thread_id = 't' FOR UPDATE")
        await anyio.sleep(SHORT + 0.3)  # the lease lapses; the row stays locked
        started = time.monotonic()
        with anyio.fail_after(IDLE_IN_TRANSACTION_MS / 1000 + 5):
            assert await b.claim("t", "b", "http://b", SHORT)
        assert time.monotonic() - started <= IDLE_IN_TRANSACTION_MS / 1000 + 2
        assert frozen.broken or frozen.closed or await _ended(frozen)
    finally:
        await frozen.close()


async def _ended(connection: psycopg.AsyncConnection[object]) -> bool:
    try:
        await connection.execute("SELECT 1")
    except psycopg.Error:
        return True
    return False
