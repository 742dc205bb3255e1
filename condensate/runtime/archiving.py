"""Archiving a thread this daemon runs: it leaves the runtime before its rows leave the live
log (``eventlog.archive`` writes and verifies the file)."""

from __future__ import annotations

import anyio

from condensate.errors import Refused
from condensate.eventlog import ArchiveRecord
from condensate.eventlog.archive import ARCHIVE_DIR, archive_thread
from condensate.runtime import Runtime


async def archive_held(runtime: Runtime, thread_id: str) -> ArchiveRecord:
    """``POST /threads/:id/archive``: a thread this daemon runs is archived when it is idle
    (no running turn, not a child its parent still waits on): it leaves the runtime first, so
    no request finds it, its appends drain, and its engine ends once the archive is recorded.
    A thread of the log the daemon does not run (its engine missing) is archived as it is."""
    directory = runtime.settings.home / ARCHIVE_DIR
    thread = runtime.threads.get(thread_id)
    if thread is None:
        return await archive_thread(runtime.log, thread_id, directory)
    if thread.running:
        raise Refused(
            code="thread-running",
            detail=f"Thread {thread_id!r} is running a turn; stop it (condensate stop "
            f"{thread_id}) or let it end, then archive it.",
        )
    for parent in runtime.threads.values():
        if thread_id in parent.projection.unjoined:
            raise Refused(
                code="thread-not-finished",
                detail=f"Thread {thread_id!r} is a child thread {parent.thread_id!r} has not "
                "joined yet; archive it after the join.",
            )
    del runtime.threads[thread_id]
    try:
        async with thread.appending:
            record = await archive_thread(runtime.log, thread_id, directory)
    except BaseException:
        runtime.threads[thread_id] = thread  # nothing was removed: the daemon keeps it
        raise
    thread.released = True
    runtime.live.gone(thread_id)
    with anyio.CancelScope(shield=True):
        await thread.engine.close()
    return record
