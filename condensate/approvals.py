"""Approvals: a thread run with ``permissions: "ask"`` asks before a tool runs. The engine
calls ``request`` and waits; an operator answers over HTTP or the command line (``answer``);
nobody answering by the deadline denies the call. Nothing runs that nobody allowed.

The log holds both halves (``approval.requested``, ``approval.answered``) and the view keeps
the pending ones, so a restart finds what was still waiting and denies it (the process that
asked is gone).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Literal

import anyio

from condensate import api
from condensate.engine import Verdict
from condensate.errors import Refused
from condensate.eventlog import MAX_LIMIT
from condensate.events import ApprovalAnswered, ApprovalRequested, Stored
from condensate.runtime.thread import Services, Thread

DEFAULT_WAIT = timedelta(minutes=5)
Decision = Literal["allow", "deny"]


async def request(
    runtime: Services,
    thread: Thread,
    *,
    tool: str,
    argument: str,
    detail: str = "",
    call_id: str | None = None,
    wait: timedelta = DEFAULT_WAIT,
) -> Verdict:
    """Log the request and wait for its answer; the deadline passing denies it."""
    event = ApprovalRequested(
        at=runtime.clock(),
        approval_id=f"ap-{uuid.uuid4().hex[:10]}",
        tool=tool,
        argument=argument,
        detail=detail,
        call_id=call_id,
        deadline=runtime.clock() + wait,
    )
    (stored,) = await runtime.append(thread, event)
    with anyio.move_on_after(wait.total_seconds()):
        while event.approval_id in thread.projection.approvals:
            await thread.changed.wait()
    answered = await _answer_of(runtime, thread, event.approval_id, stored.seq)
    if answered is None:
        with anyio.CancelScope(shield=True):
            await runtime.append(
                thread,
                ApprovalAnswered(
                    at=runtime.clock(),
                    approval_id=event.approval_id,
                    decision="deny",
                    by="deadline",
                    reason=f"nobody answered within {_seconds(wait)}",
                ),
            )
        return Verdict(False, f"Denied: nobody answered within {_seconds(wait)}.", "deadline")
    reason = answered.reason or ("allowed" if answered.decision == "allow" else "denied")
    if answered.decision == "allow":
        return Verdict(True, reason, answered.by)
    return Verdict(False, f"Denied by the {answered.by}: {reason}.", answered.by)


async def _answer_of(
    runtime: Services, thread: Thread, approval_id: str, after: int
) -> ApprovalAnswered | None:
    """The answer the log holds for ``approval_id``, logged after its request at ``after``;
    the view keeps only what is pending. The turn that asked waits, so few events follow."""
    if approval_id in thread.projection.approvals:
        return None
    while True:
        page = await runtime.log.tail(thread.thread_id, after=after, limit=MAX_LIMIT)
        for item in page.events:
            if isinstance(item.event, ApprovalAnswered) and item.event.approval_id == approval_id:
                return item.event
        if not page.has_more:
            return None
        after = page.next_after


async def answer(
    runtime: Services,
    thread: Thread,
    approval_id: str,
    decision: Decision,
    *,
    reason: str = "",
    by: Literal["operator", "runtime"] = "operator",
) -> Stored:
    """Allow or deny a pending request; an unknown or already answered id is refused."""
    async with thread.lock:
        if approval_id not in thread.projection.approvals:
            raise Refused(
                code="unknown-approval",
                detail=f"Thread {thread.thread_id} has no pending approval {approval_id!r}.",
                status=404,
            )
        event = ApprovalAnswered(
            at=runtime.clock(),
            approval_id=approval_id,
            decision=decision,
            by=by,
            reason=reason,
        )
        (stored,) = await runtime.append(thread, event)
    return stored


async def deny_pending(runtime: Services, thread: Thread, reason: str) -> None:
    """Deny every request still pending (the engine that asked is gone: a restart)."""
    pending = list(thread.projection.approvals)
    if pending:
        await runtime.append(
            thread,
            [
                ApprovalAnswered(
                    at=runtime.clock(), approval_id=a, decision="deny", by="runtime", reason=reason
                )
                for a in pending
            ],
        )


def pending(thread: Thread) -> list[api.Approval]:
    """What ``GET /threads/:id/approvals`` shows: each pending request, oldest first."""
    return [
        api.Approval(
            id=a.approval_id,
            tool=a.tool,
            argument=a.argument,
            detail=a.detail,
            call_id=a.call_id,
            requested_at=a.at,
            deadline=a.deadline,
        )
        for a in thread.projection.approvals.values()
    ]


def _seconds(wait: timedelta) -> str:
    return f"{int(wait.total_seconds())} s"
