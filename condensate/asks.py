"""Asks and queued compactions: opening an ask when a head crosses its line, cutting on the
curator's summary when nobody answers by the deadline, answering (by the thread or an
operator) or queueing a compaction, and what ``GET /threads/:id/compact`` shows."""

from __future__ import annotations

import uuid
from typing import Literal

import anyio

from condensate import api
from condensate.core.planner import Ask
from condensate.core.preview import Preview, Pricing, preview
from condensate.core.prices import price_of
from condensate.core.tokens import bare_model
from condensate.errors import Refused
from condensate.events import AskAnswered, AskMode, AskOpened, CompactionRequested, Stored
from condensate.runtime.thread import Services, Thread


async def open_ask(runtime: Services, thread: Thread, ask: Ask) -> None:
    """Log the ask; its deadline runs in the runtime's task group."""
    event = AskOpened(
        at=runtime.clock(),
        ask_id=f"ask-{uuid.uuid4().hex[:8]}",
        deadline=ask.deadline,
        used=ask.usage.used,
        line=ask.usage.line,
        seat="main",
    )
    await runtime.append(thread, event)
    runtime.spawn_task(ask_deadline, runtime, thread, event, name=f"ask {event.ask_id}")


async def ask_deadline(runtime: Services, thread: Thread, ask: AskOpened) -> None:
    """Nobody answered in time: the runtime cuts on its own curator summary, and the engine
    applies the window its own way."""
    await anyio.sleep(max((ask.deadline - runtime.clock()).total_seconds(), 0))
    current = thread.projection.ask
    if current is None or current.ask_id != ask.ask_id:
        return
    async with thread.lock:
        done = await runtime.checkpoint(thread)
    if done.window is not None:
        await thread.engine.apply_window(done.window)


def compaction(runtime: Services, thread: Thread) -> api.Compaction:
    """The pending ask, any requested compaction, and a preview of a cut."""
    view = thread.projection
    usage = runtime.usage(thread)
    shown: Preview = preview(
        view, usage, thread.profile.planner, pricing(runtime, thread), now=runtime.clock()
    )
    requested = view.requested
    return api.Compaction(
        ask=view.ask,
        requested=None
        if requested is None
        else api.Requested(
            seq=requested.seq,
            mode=requested.mode,
            by=requested.by,
            keep_from=requested.keep_from,
            summary=requested.summary,
        ),
        preview=api.preview_answer(shown),
        usage=api.CompactionUsage(used=usage.used, line=usage.line, ceiling=usage.ceiling),
    )


def pricing(runtime: Services, thread: Thread) -> Pricing:
    """The thread's model's prices, and its curator's (the first model of the chain); the
    write price a rewrite pays is the lifetime the thread's own calls mostly wrote."""
    settings = runtime.settings
    curator = settings.curator_model or thread.spec.model
    model = bare_model(thread.spec.model)
    bills = [
        bill
        for key, bill in thread.projection.billed.items()
        if bare_model(key.partition("|")[2]) == model
    ]
    hour = sum(b.cache_write_1h for b in bills)
    return Pricing(
        thread.spec.model,
        price_of(thread.spec.model, settings.prices),
        curator,
        price_of(curator, settings.prices),
        settings.curator().max_tokens,
        one_hour_writes=2 * hour > sum(b.cache_write for b in bills),
    )


async def answer(
    runtime: Services,
    thread: Thread,
    *,
    mode: AskMode,
    by: Literal["thread", "operator"],
    keep_from: int | None = None,
    summary: str | None = None,
    reason: str = "",
) -> Stored:
    """Answer the pending ask, or with nothing pending queue a compaction. An agent-reset
    thread's context is its agent's to condense: asked for anything, it is refused."""
    if thread.spec.reset is not None:
        raise Refused(
            code="agent-controlled-condensation",
            status=409,
            detail=f"Thread {thread.thread_id!r} condenses its own context (agent-reset mode): "
            "ask its agent to save its notes and call its condense tool instead.",
        )
    async with thread.lock:
        ask = thread.projection.ask
        if ask is not None:
            (stored,) = await runtime.append(
                thread,
                AskAnswered(
                    at=runtime.clock(),
                    ask_id=ask.ask_id,
                    mode=mode,
                    by=by,
                    summary=summary,
                    keep_from=keep_from,
                    reason=reason,
                ),
            )
        elif mode == "decline":
            raise Refused(
                code="nothing-pending", detail="There is no pending ask to decline.", status=409
            )
        else:
            (stored,) = await runtime.append(
                thread,
                CompactionRequested(
                    at=runtime.clock(),
                    mode=mode,
                    by=by,
                    summary=summary,
                    keep_from=keep_from,
                    reason=reason,
                ),
            )
    return stored
