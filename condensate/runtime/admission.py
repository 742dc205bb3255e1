"""Admission: what the runtime decides for a CLI's model request the gateway holds because it
would pass the thread's line. The window the request needs is taken here, on the request's
own size (the log's view may lag what the CLI sends by a tool result or two):

- cheap tiers are taken and the request goes on with their receipts in place of the cleared
  results (the gateway applies them to this and every later request of the session);
- a summary or a drop is taken and the request is answered with Condensate's own reply that
  ends the CLI's turn; the engine then starts a session with the window, the spec's way;
- a head that must be asked is asked, and the reply that ends its turn says so (the engine
  tells the head in its follow-up line); its next request goes on, below its hard limit
  (past it the ask is repeated, and the request answered the same way, until it is answered);
- where the spec lets the turn go on uncut (the curator missed, windows are paused, nothing
  can be cut under the ceiling) the request goes on over the line, and that is logged with
  the reason and shown in the thread's status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import anyio
import structlog

from condensate.core import near_limits, reset, window_step
from condensate.core.clamps import digest
from condensate.core.context_tools import CONDENSE
from condensate.core.meter import ContextUsage
from condensate.core.receipts import bare_tool
from condensate.core.staged_warnings import due_warning
from condensate.events import AssistantMessage, ResetCommitted, SystemLine, ToolResult, UserMessage
from condensate.runtime.gateway_port import Clamps, NewestResult, Notice, Notices, ResetCut
from condensate.runtime.thread import Services, Thread

log = structlog.get_logger()

CATCH_UP_SECONDS = 5.0
"""How long a held request waits for the log to hold its newest tool result (the engine
logs the CLI's output as it reads it; the request may get here first). Only a request whose
newest result the view may show otherwise waits (a large one, a ``condense``), and the log
holds it within milliseconds on an idle machine; 2 s was seen to run out on a loaded one,
and the large result then went on unclamped."""
MAX_CUTS = 3
RESTARTING = (
    "Condensate is moving this thread to a new session with its context window; the work "
    "goes on there."
)


@dataclass(frozen=True)
class Admission:
    """Forward the request (with the view's receipts), or end the CLI's turn with ``text``."""

    forward: bool
    text: str = ""


def receipts(thread: Thread) -> Mapping[str, str]:
    """Call id -> what the provider is to see for that result: a receipt, for every result
    the view's cheap tiers cleared; the first page, for a paged output; its head and tail,
    for a clamped one; the result the log holds, for an agent's ``condense`` call
    (``_condense``). Kept until the view changes: a window, a clamped entry, or any event of
    a thread that resets or pages."""
    _shown(thread)
    return thread.receipts


def clamps(thread: Thread) -> Clamps:
    """The clamped texts and calls of the thread's view, as its CLI's requests carry them."""
    _shown(thread)
    return thread.clamps


def _shown(thread: Thread) -> None:
    view = thread.projection
    key = (view.layout, view.last_seq if rewrites(thread) else -1, view.clamped)
    if thread.receipts_at == key:
        return
    shown: dict[str, str] = {}
    texts: dict[str, int] = {}
    calls: dict[str, int] = {}
    for e in view.entries:
        if e.clamped is not None and isinstance(e.event, UserMessage | AssistantMessage):
            if len(e.event.text) > e.clamped:
                texts[digest(e.event.text)] = e.seq
            if isinstance(e.event, AssistantMessage):
                calls.update((c.id, e.seq) for c in e.event.tool_calls)
        if not e.call_id:
            continue
        if e.receipt is not None:
            shown[e.call_id] = e.receipt
        elif e.paged is not None or e.clamped is not None:
            shown[e.call_id] = e.shown_output()
        elif isinstance(e.event, ToolResult) and bare_tool(e.event.tool) == CONDENSE:
            shown[e.call_id] = e.event.output
    thread.receipts = shown
    thread.clamps = Clamps(view.clamp_chars or 0, texts, calls)
    thread.receipts_at = key


def rewrites(thread: Thread) -> bool:
    """The thread's requests are rewritten from its log as it grows (it resets, pages, is
    told when it nears its line, or has clamped an entry: its next large output is clamped
    too), not only when a window is taken: each is parsed, and waits for the log when the
    view may rewrite its newest result (``caught_up``)."""
    spec = thread.spec
    return (
        spec.attached is not None  # its conversation is its log
        or spec.reset is not None
        or spec.output_cap is not None
        or spec.near_limit_warnings
        or thread.projection.clamped > 0
    )


def notices(runtime: Services, thread: Thread, size: int) -> Notices:
    """What the thread's request of ``size`` tokens carries: the notice near its line (a
    thread that asks for them; the request's own size against the line), or an agent-reset
    thread's staged warning (on the last count, as the native loop measures it). The warning
    is kept on the thread until the request's reply is counted, and logged with it."""
    spec = thread.spec
    usage = runtime.usage(thread)
    if spec.reset is None:
        if not spec.near_limit_warnings:
            return Notices()
        measured = replace(usage, used=size)
        level, text = near_limits.level(measured), near_limits.notice(measured)
        if level is None or text is None:
            return Notices()
        # Once a level between two windows: a window lowers the context, and it may rise again.
        return Notices(near=Notice(f"near:{level}:{thread.projection.layout}", text))
    warning = due_warning(thread.projection, spec.reset, usage, runtime.clock())
    thread.warning = warning
    if warning is None:
        return Notices()
    # Each reset cycle warns afresh at the same levels.
    key = f"warning:{thread.projection.resets}:{warning.level}"
    return Notices(warning=Notice(key, warning.text))


def reset_cut(thread: Thread) -> ResetCut | None:
    """Where the provider's view of an agent-reset thread starts again: its latest committed
    reset, when the view starts from one."""
    view = thread.projection
    first = view.entries[0].event if view.entries else None
    if not isinstance(first, ResetCommitted):
        return None
    return ResetCut(first.call_id, reset.NOTICE, thread.profile.info.own_context)


async def caught_up(thread: Thread, newest: NewestResult | None) -> None:
    """Wait (a little) until the log holds the request's newest tool result, when the view
    may show it otherwise: an agent's ``condense`` result (the reset it settles cuts this very
    request), or an output large enough to be paged or clamped, or a call whose argument is
    (the call is logged before its result). Any other request goes on at once (a
    subagent's results, which the log never holds, would only wait)."""
    if newest is None:
        return
    spec = thread.spec
    settles = spec.reset is not None and bare_tool(newest.tool) == CONDENSE
    # A token is at least a character: an output of fewer characters than the cap fits it.
    pages = spec.output_cap is not None and newest.chars > spec.output_cap
    clamp = thread.projection.clamp_chars
    if settles or pages or (clamp is not None and max(newest.chars, newest.arrived) > clamp):
        await _caught_up(thread, [newest.call_id])


def gate(runtime: Services, thread: Thread) -> int | None:
    """The request size above which the runtime decides (0: every request, while a session
    restart is on its way; None: never, for a thread whose engine or agent compacts on its
    own)."""
    spec = thread.spec
    if not thread.profile.settings.windowing() or spec.reset is not None:
        return None
    if spec.attached == "costs":  # a person's session run for its costs and log only
        return None
    return 0 if thread.restart_pending else runtime.usage(thread).line


async def _caught_up(thread: Thread, ids: Sequence[str]) -> None:
    """Wait (a little) until the log holds the request's newest tool result."""
    if not ids:
        return
    newest = ids[-1]
    with anyio.move_on_after(CATCH_UP_SECONDS):
        while not any(e.call_id == newest for e in reversed(thread.projection.entries)):
            await thread.changed.wait()


def _restarting(thread: Thread) -> bool:
    return thread.restart_pending


async def admit(runtime: Services, thread: Thread, size: int, ids: Sequence[str]) -> Admission:
    """Decide, and log Condensate's own answer as such when the request is not forwarded."""
    decided = await _decide(runtime, thread, size, ids)
    if not decided.forward:
        await _line(
            runtime,
            thread,
            "gateway-held",
            f"Condensate held a request of {size:,} tokens and answered it itself, ending "
            f"the CLI's turn: {decided.text}",
        )
    return decided


async def _decide(runtime: Services, thread: Thread, size: int, ids: Sequence[str]) -> Admission:
    if _restarting(thread):
        return Admission(False, RESTARTING)
    await _caught_up(thread, ids)
    await runtime.counted(thread)
    async with thread.lock:
        if _restarting(thread):  # a window another request held for was taken meanwhile
            return Admission(False, RESTARTING)
        done = await window_step.step(runtime.host(thread), thread.profile.planner, size)
        if done.asked is not None:
            return Admission(False, _ask_text(done.usage))
        if done.stop is not None:
            return Admission(False, f"The turn stops here: {done.stop}.")
        restarts = done.restarts
        # A person's own CLI session is not restarted: the gateway sends the summary in
        # place of the older part from this request on (``attached.cut``).
        if restarts is not None and thread.profile.info.restarts:
            await thread.engine.apply_window(restarts)
            return Admission(False, RESTARTING)
        usage = done.usage
        over = None if usage.used <= usage.line else _why_over(done)
        if over is not None and over != thread.over_line:
            # Said once for each new reason, not on every request while it holds.
            code = "over-ceiling" if usage.used > usage.ceiling else "over-line"
            await _line(
                runtime,
                thread,
                code,
                f"A request of {usage.used:,} tokens went on past the thread's "
                f"{'ceiling' if code == 'over-ceiling' else 'line'} (line {usage.line:,}, "
                f"ceiling {usage.ceiling:,}): {over}.",
            )
        thread.over_line = over
        return Admission(True)


def _why_over(done: window_step.Step) -> str:
    if done.missed is not None:
        return f"the summary did not arrive ({done.missed})"
    if done.held is not None:
        return done.held.line[1] if done.held.line is not None else "a window is held back"
    return "nothing in the view can be cut yet"


def _ask_text(usage: ContextUsage) -> str:
    return (
        f"This thread's context holds {usage.used:,} tokens, past its line of "
        f"{usage.line:,}: Condensate asks it to compact before it goes on."
    )


async def _line(runtime: Services, thread: Thread, code: str, text: str) -> None:
    await runtime.append(thread, SystemLine(at=runtime.clock(), code=code, text=text))
