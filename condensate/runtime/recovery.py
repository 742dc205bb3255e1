"""After a restart: every thread rebuilt from its snapshot and log, a turn the restart cut
off reported (closing any tool batch it left open) and resumed, and input acknowledged before
the kill but never taken up by a turn answered. Approvals still pending are denied: the
engine process that asked is gone."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from condensate.core.projector import Projection
from condensate.core.queries import open_calls, untaken_input
from condensate.engine import ThreadSpec
from condensate.errors import CondensateError
from condensate.eventlog.rebuild import rebuilt
from condensate.events import Event, SystemLine, ThreadCreated, ToolResult, TurnEnded, UserMessage
from condensate.runtime import STOPPED_BY_DAEMON, Runtime, approvals
from condensate.runtime.thread import Thread

log = structlog.get_logger()


def spec_of(created: ThreadCreated, view: Projection) -> ThreadSpec:
    """A thread's spec as its log records it, for rebuilding it after a restart."""
    brief = next(
        (
            e.event.text
            for e in view.entries
            if e.seq == view.brief_seq and isinstance(e.event, UserMessage)
        ),
        "",
    )
    return ThreadSpec(
        engine=created.engine,
        model=created.model,
        cwd=created.cwd,
        brief=brief,
        persona=created.persona,
        tools=created.tools,
        permissions=created.permissions,
        head=created.head,
        parent=created.parent,
        reset=created.reset,
        output_cap=created.output_cap,
        near_limit_warnings=created.near_limit_warnings,
        attached=created.attached,
        attached_pid=created.attached_pid,
    )


async def recover(
    runtime: Runtime, claim: Callable[[str], Awaitable[bool]] | None = None
) -> list[str]:
    """Rebuild every thread from the log (in a fleet, every thread ``claim`` takes); report
    and resume turns a restart cut off, and start a turn for input no turn took up. The ids
    of the threads resumed."""
    resumed: list[str] = []
    for thread_id in await runtime.log.thread_ids():
        if claim is not None and not await claim(thread_id):
            continue
        if await recover_one(runtime, thread_id):
            resumed.append(thread_id)
    log.info("runtime_recovered", threads=len(runtime.threads), resumed=len(resumed))
    return resumed


async def recover_one(runtime: Runtime, thread_id: str) -> bool:
    """One thread back from the log (after a restart, or taken over from a daemon that
    died); whether a turn was resumed or started for it."""
    try:
        thread = await _rebuild(runtime, thread_id)
    except CondensateError as exc:
        # One thread the log or its engine cannot bring back must not keep the daemon
        # (and every other thread) down; it stays in the log, untouched.
        log.warning("thread_not_recovered", thread=thread_id, error=str(exc), code=exc.code)
        return False
    if thread is None:
        return False
    runtime.threads[thread_id] = thread
    await approvals.deny_pending(
        runtime, thread, "the daemon restarted before anyone answered; the call did not run"
    )
    if await close_cut_off_turn(runtime, thread):
        runtime.start_turn(thread, "resume")
        return True
    if untaken_input(thread.projection):
        # Acknowledged (201/202) but killed before its turn started: answer it now.
        runtime.start_turn(thread, "queued")
        return True
    return False


async def _rebuild(runtime: Runtime, thread_id: str) -> Thread | None:
    """A thread from its snapshot and log, with its engine; None when the log holds no
    thread there or this daemon was built without its engine."""
    projection = await rebuilt(runtime.log, thread_id)
    created = await runtime.log.read(thread_id, 1)
    if not isinstance(created.event, ThreadCreated):
        return None
    spec = spec_of(created.event, projection)
    if spec.engine not in runtime.profiles:
        log.warning("thread_engine_unavailable", thread=thread_id, engine=spec.engine)
        return None
    profile = runtime.profile_for(spec)
    thread = Thread(
        thread_id,
        spec,
        projection,
        await runtime.window_for(spec.model),
        runtime.engine_for(thread_id, spec, profile),
        profile,
    )
    thread.snapshot_at = projection.last_seq
    return thread


async def close_cut_off_turn(runtime: Runtime, thread: Thread) -> bool:
    """Report a turn a kill left open (closing its open tool batch) and say whether to resume
    it; a turn SIGTERM stopped was already reported."""
    view = thread.projection
    if not view.turn_open:
        return view.last_turn_reason == STOPPED_BY_DAEMON
    # A person's CLI still holds its open calls: their results come in its next request.
    open_ = [] if thread.spec.attached else open_calls(thread.projection)
    events: list[Event] = [
        ToolResult(
            at=runtime.clock(),
            call_id=call_id,
            tool=tool,
            argument="",
            output="Interrupted: the daemon stopped before this call finished; it "
            "may have run in part. Check its effect before relying on it.",
            is_error=True,
        )
        for call_id, tool in open_
    ]
    events += [
        TurnEnded(at=runtime.clock(), outcome="interrupted", reason=STOPPED_BY_DAEMON),
        SystemLine(
            at=runtime.clock(),
            code="turn-interrupted",
            text="The daemon restarted during this turn; it resumes from the log.",
        ),
    ]
    await runtime.append(thread, events)
    return True
