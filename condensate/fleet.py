"""A fleet: several daemons, on one host or many, sharing one PostgreSQL event log.

Each thread is owned by one daemon at a time through a lease in the database (``leases``,
beside the log). The owner renews its leases every third of a lease; a daemon that stops
renewing (killed, partitioned, frozen) loses them when they expire, and the first other
daemon to see that claims the thread and resumes it exactly as after a restart (rebuilt from
its snapshot and log, a turn the death cut off reported and resumed). Only the lease holder
appends: every append checks and extends the lease in its own transaction, so a daemon that
lost a thread is refused at its next write (and lets the thread go), and the per-thread seq
constraint stands behind that. Any daemon answers reads and tails of any thread; one waiting
on a thread another daemon owns is woken by the owner's NOTIFY. Writes to a thread another
daemon owns are refused with 409 ``thread-owned-elsewhere``, naming the owner and its URL.
A daemon that stops cleanly (SIGTERM) gives its leases up as it goes.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import psycopg
import structlog

from condensate.eventlog import Lease
from condensate.eventlog.postgres import CHANNEL, PostgresStore
from condensate.runtime.recovery import recover_one

if TYPE_CHECKING:
    from condensate.runtime import Runtime

log = structlog.get_logger()


def daemon_id(home: str) -> str:
    """A daemon's name in the fleet: its host and state directory, the same across restarts
    (a restarted daemon takes its own threads back at once, not after their leases expire)."""
    return f"{socket.gethostname()}:{home}"


@dataclass
class Fleet:
    store: PostgresStore
    me: str
    url: str
    seconds: float
    """A lease's length (``CONDENSATE_LEASE_SECONDS``)."""
    changed: dict[str, anyio.Event] = field(default_factory=dict)
    """Thread -> an event set when its owner next appends (a tail of a thread owned
    elsewhere waits on it)."""

    async def claim(self, thread_id: str) -> bool:
        return await self.store.claim(thread_id, self.me, self.url, self.seconds)

    async def owner_of(self, thread_id: str) -> Lease | None:
        return await self.store.lease(thread_id)

    async def owners(self) -> dict[str, Lease]:
        return await self.store.leases()

    def waiter(self, thread_id: str) -> anyio.Event:
        event = self.changed.get(thread_id)
        if event is None:
            event = self.changed[thread_id] = anyio.Event()
        return event

    async def keep(self, runtime: Runtime) -> None:
        """Renew, let go of what was lost, and take over what another daemon dropped, every
        third of a lease, for as long as the daemon runs."""
        while True:
            await anyio.sleep(self.seconds / 3)
            try:
                await self.tick(runtime)
            except Exception:
                # The database unreachable for a moment: the leases run on, and the next
                # tick tries again; past their expiry another daemon takes over.
                log.exception("fleet_tick_failed", daemon=self.me)

    async def tick(self, runtime: Runtime) -> list[str]:
        """One round; the threads taken over."""
        held = await self.store.renew(self.me, self.seconds)
        for thread_id in [t for t in runtime.threads if t not in held]:
            # Not renewed: lost, unless its first append (which takes the lease) has not
            # committed yet.
            lease = await self.store.lease(thread_id)
            if lease is not None and lease.owner != self.me:
                log.warning(
                    "fleet_thread_lost", thread=thread_id, daemon=self.me, owner=lease.owner
                )
                await runtime.release(thread_id)
        taken: list[str] = []
        for thread_id in await self.store.orphans():
            if thread_id in runtime.threads or not await self.claim(thread_id):
                continue
            log.info("fleet_thread_taken_over", thread=thread_id, daemon=self.me)
            await recover_one(runtime, thread_id)
            if thread_id in runtime.threads:
                taken.append(thread_id)
        return taken

    async def release(self) -> None:
        """Let every lease go as the daemon stops (its turns ended and reported): the others
        take its threads over at their next round rather than when the leases run out. A
        database out of reach leaves them to run out."""
        try:
            count = await self.store.release(self.me)
        except Exception:
            log.exception("fleet_release_failed", daemon=self.me)
            return
        log.info("fleet_leases_released", daemon=self.me, threads=count)

    async def listen(self) -> None:
        """Wake tails of threads owned elsewhere when their owner appends."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.store.url, autocommit=True
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    async for note in connection.notifies():
                        self._wake(note.payload)
            except psycopg.Error:
                log.exception("fleet_listen_failed", daemon=self.me)
                await anyio.sleep(1.0)

    def _wake(self, thread_id: str) -> None:
        event = self.changed.pop(thread_id, None)
        if event is not None:
            event.set()
