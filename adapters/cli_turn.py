"""The turn the CLI engines share: one loop over a CLI's sessions, whatever the CLI.

A turn opens with a window check (a compaction queued between turns is taken there) and then
exchanges messages with the CLI until the turn is done: one message sent, the CLI's turn read
to its end. Whatever the CLI, the same rules then apply:

- the operator's interrupt ends the turn ``interrupted``; a refused credential ends it
  ``failed``, said in the log, the provider never asked again;
- a CLI that dies mid-turn is started again and resumes its session, once a turn (or starts
  the session a pending window asked for);
- a prompt the provider refuses as too long forces one window (a second refusal fails the
  turn), and so does any window due: the next session starts with it; when the CLI ended its
  turn by itself meanwhile, the turn is done and the window waits for the next;
- an ask that opened during the turn is told in a follow-up message;
- at most ``MAX_SESSIONS_PER_TURN`` sessions start in one turn.

An engine gives the loop its ``CliSession``: how to start a session, exchange a message, and
clean up after a crash, each the engine's own way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from adapters._asks import AskTeller
from condensate.runtime import emergency
from condensate.engine import (
    INTERRUPTED_BY_OPERATOR,
    Checkpoint,
    EngineEnv,
    TurnContext,
    TurnOutcome,
)
from condensate.events import ModelRefused, SystemLine, TurnOutcomeKind

MAX_SESSIONS_PER_TURN = 12
REFUSED_AGAIN = "the provider refused the prompt again after a forced window"


@dataclass
class Exchange:
    """How one exchange with the CLI (a message sent, its turn read to the end) ended."""

    exited: bool = False
    """The CLI's process ended mid-turn."""
    returncode: int | None = None
    credential: str | None = None
    """The provider refused the credential: the turn fails with this reason."""
    stop: str | None = None
    """A check during the turn said the turn must end here."""
    missed: str | None = None
    """A check during the turn found a window due whose summary did not come."""
    overflow: str | None = None
    """The provider refused the prompt as too long: its message."""
    window: bool = False
    """A window is due: the next session starts with it."""
    finished: bool = False
    """The CLI ended the turn the model's way (neither interrupted nor held by the gateway)."""
    error: str | None = None
    """The CLI ended the turn with an error: the failure, as the log says it."""
    text: str = ""
    """The turn's last assistant text, if it said one."""


class CliSession(Protocol):
    """What a CLI engine gives the shared turn: its state and its own ways."""

    title: str
    """How messages name the CLI ("Claude Code")."""
    env: EngineEnv
    asks: AskTeller
    window_pending: bool
    """A window was taken outside the engine's checks: the next boundary applies it."""

    def interrupted(self) -> bool:
        """The operator interrupted the running turn."""
        ...

    def current_session(self) -> str:
        """The CLI's current session (an ask told in it names it)."""
        ...

    def windowing(self) -> bool:
        """Whether Condensate windows this CLI's threads (off: the CLI compacts by itself)."""
        ...

    def missed(self, reason: str) -> str | None:
        """The turn's failure when a due window's summary did not come; None: go on."""
        ...

    async def check(self, ctx: TurnContext) -> Checkpoint | None:
        """The window check at a turn's start; None when Condensate does not window."""
        ...

    async def opening(self, ctx: TurnContext) -> str:
        """The first message of a turn with no window to apply."""
        ...

    async def start_window(self, ctx: TurnContext, *, forced: bool) -> str:
        """Make the next session start with the window; the message to send in it."""
        ...

    async def window_after_turn(self, ctx: TurnContext) -> None:
        """The CLI ended its turn before a due window could act: apply it for the next."""
        ...

    async def ready(self, ctx: TurnContext) -> None:
        """A running CLI (started, or started again to resume its session)."""
        ...

    async def exchange(self, ctx: TurnContext, message: str) -> Exchange:
        """Send ``message`` and read the CLI's turn to its end."""
        ...

    async def settle(self, ctx: TurnContext, exchange: Exchange, why: str) -> None:
        """The turn ends early (``why``): close what the CLI left open."""
        ...

    async def crashed(self, ctx: TurnContext, exchange: Exchange) -> str:
        """The CLI died mid-turn: close what it left open and note it; the message that
        resumes the session in a new process."""
        ...

    async def after_turn(self, ctx: TurnContext) -> None:
        """The CLI's turn completed: any check the engine runs after a turn."""
        ...

    def unwindowed_overflow(self) -> str:
        """Why the turn fails when the prompt overflows and Condensate does not window."""
        ...


@dataclass
class _Turn:
    """What one turn has been through so far."""

    crashed: bool = False
    refused: bool = False
    last_text: str = ""

    def ended(self, outcome: TurnOutcomeKind, reason: str = "") -> TurnOutcome:
        return TurnOutcome(outcome, reason, self.last_text)


async def drive(session: CliSession, ctx: TurnContext) -> TurnOutcome:
    """Run one turn of a CLI thread to its end."""
    opened = await _opening(session, ctx)
    if isinstance(opened, TurnOutcome):
        return opened
    message = opened
    turn = _Turn()
    for _ in range(MAX_SESSIONS_PER_TURN):
        if session.interrupted():
            return turn.ended("interrupted", INTERRUPTED_BY_OPERATOR)
        await session.ready(ctx)
        if session.interrupted():
            return turn.ended("interrupted", INTERRUPTED_BY_OPERATOR)
        told = await session.asks.tell(
            ctx,
            message,
            fallback="Continue.",
            where="its next message",
            session_id=session.current_session(),
        )
        exchange = await session.exchange(ctx, told)
        turn.last_text = exchange.text or turn.last_text
        then = await _next(session, ctx, exchange, turn)
        if isinstance(then, TurnOutcome):
            return then
        message = then
    return turn.ended(
        "failed", f"{MAX_SESSIONS_PER_TURN} {session.title} sessions started in one turn"
    )


async def _next(
    session: CliSession, ctx: TurnContext, exchange: Exchange, turn: _Turn
) -> str | TurnOutcome:
    """How the turn goes on after ``exchange``: the next message to send, or its end."""
    if session.interrupted():
        await session.settle(ctx, exchange, "the operator interrupted the turn")
        return turn.ended("interrupted", INTERRUPTED_BY_OPERATOR)
    if exchange.credential is not None:
        await session.settle(ctx, exchange, "the provider refused the credential")
        text = f"The turn failed: {exchange.credential}."
        await ctx.append(SystemLine(at=ctx.now(), code="authentication-failed", text=text))
        return turn.ended("failed", exchange.credential)
    if exchange.exited:
        resume = await session.crashed(ctx, exchange)
        if exchange.window or session.window_pending:
            return await session.start_window(ctx, forced=False)
        if turn.crashed:
            reason = f"the {session.title} process exited twice in one turn"
            return turn.ended("failed", f"{reason} (last exit {exchange.returncode})")
        turn.crashed = True
        return resume
    if exchange.stop is not None:
        return turn.ended("stopped", exchange.stop)
    if exchange.missed is not None and (failure := session.missed(exchange.missed)):
        return turn.ended("failed", failure)
    if exchange.overflow is not None:
        return await _overflowed(session, ctx, exchange.overflow, turn)
    if exchange.window or session.window_pending:
        if exchange.finished:
            await session.window_after_turn(ctx)
            return turn.ended("completed")
        return await session.start_window(ctx, forced=False)
    if exchange.error is not None:
        detail = exchange.error[:500]
        await ctx.append(SystemLine(at=ctx.now(), code="engine-error", text=detail))
        return turn.ended("failed", detail)
    await session.after_turn(ctx)
    if session.asks.untold(ctx):
        return ""  # the ask opened during the turn: tell it in a follow-up
    return turn.ended("completed")


async def _overflowed(
    session: CliSession, ctx: TurnContext, message: str, turn: _Turn
) -> str | TurnOutcome:
    """The provider refused the prompt as too long: one forced window, or the turn's end. An
    agent-reset thread is never windowed: its emergency condenser summarizes the view, and the
    next session starts from it (or the turn stops, its history kept)."""
    await ctx.append(ModelRefused(at=ctx.now(), message=message[:500]))
    policy = ctx.spec.reset
    if policy is not None:
        stop = await emergency.condense(ctx, policy, ctx.usage().window, ctx.view.last_seq)
        if stop is not None:
            return turn.ended("failed", stop)
        return await session.start_window(ctx, forced=True)
    if not session.windowing():
        return turn.ended("failed", session.unwindowed_overflow())
    if turn.refused:
        return turn.ended("failed", REFUSED_AGAIN)
    turn.refused = True
    check = await ctx.checkpoint()
    if check.stop is not None:
        return turn.ended("stopped", check.stop)
    if check.missed is not None and (failure := session.missed(check.missed)):
        return turn.ended("failed", failure)
    return await session.start_window(ctx, forced=True)


async def _opening(session: CliSession, ctx: TurnContext) -> str | TurnOutcome:
    """The turn's first message; a compaction queued between turns (an operator's answer to
    an ask) is taken here, at the turn's start."""
    check = await session.check(ctx)
    if check is not None:
        if check.stop is not None:
            return TurnOutcome("stopped", check.stop, "")
        if check.missed is not None and (failure := session.missed(check.missed)):
            return TurnOutcome("failed", failure, "")
        if session.env.restarts_for(check.window):
            session.window_pending = True
    if session.window_pending:
        return await session.start_window(ctx, forced=False)
    return await session.opening(ctx)
