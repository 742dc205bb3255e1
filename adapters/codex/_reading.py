"""Reading one Codex turn: ``turn/start``, then the app-server's notifications until the
turn's ``turn/completed``, each appended as what ``_translate`` makes of it; the window check
after each counted response once no command runs; human messages logged meanwhile sent as
``turn/steer``; retries Codex makes on its own logged, and an authentication error ending the
turn. A mixin of the engine: it reads and writes the engine's thread state, and knows nothing
of starting app-servers or Codex threads.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import structlog

from adapters._condense import settled
from adapters._texts import AUTH_STATUSES, bad_credential, retrying
from adapters.codex import _cli
from adapters.codex._rpc import AppServer, AppServerError, AppServerExited
from adapters.codex._translate import (
    Responses,
    _command,
    compacted,
    http_status,
    is_overflow,
    retry_detail,
    usage_of,
)
from condensate.core import queries
from condensate.engine import EngineEnv, ThreadSpec, TurnContext
from condensate.events import EngineNotice, Event

log = structlog.get_logger()

OPENAI_KEY_SETTING = "CONDENSATE_OPENAI_API_KEY"
"""Where the key Codex gets comes from (the daemon's setting, else OPENAI_API_KEY)."""


@dataclass
class _Read:
    """How reading a turn ended."""

    how: Literal["completed", "exited"]
    status: str = ""
    error: dict[str, Any] | None = None
    overflow: bool = False
    window: bool = False
    """A window is due: the turn was interrupted to start a Codex thread with it."""
    stop: str | None = None
    missed: str | None = None
    credential: str | None = None
    """The provider refused the key: the turn was interrupted and fails with this."""


class TurnReader:
    """The notification-reading half of the Codex engine (its thread state is declared here
    and set by the engine)."""

    spec: ThreadSpec
    env: EngineEnv
    settings: _cli.CodexSettings
    server: AppServer | None
    codex_thread: str
    turn_id: str
    sent_upto: int
    steer_checked: int
    responses: Responses
    window_pending: bool
    operator_interrupt: bool
    _interrupt_sent: bool
    api_retries: int
    """The retries Codex made on its own in the running turn."""

    def _settled(self, ctx: TurnContext, events: list[Event]) -> list[Event]:
        """The events, with an agent's ``condense`` result settled (``_condense``)."""
        return settled(events, ctx.view, self.spec, self.sent_upto, ctx.now())

    def interrupted(self) -> bool:
        """The operator interrupted the running turn (a method: it changes while we wait)."""
        return self.operator_interrupt

    async def _send_interrupt(self) -> None:
        if self._interrupt_sent or self.server is None or not self.turn_id:
            return
        self._interrupt_sent = True
        with contextlib.suppress(AppServerError):
            await self.server.send(
                "turn/interrupt", {"threadId": self.codex_thread, "turnId": self.turn_id}
            )

    async def _read_turn(self, ctx: TurnContext, text: str) -> _Read:
        """Start a turn with ``text`` and follow it to its end, checking for a window after
        each counted response once no command is running."""
        server = self.server
        assert server is not None
        for stale in server.drain():
            log.debug("codex_between_turns", thread=ctx.thread_id, method=stale.get("method"))
        read = _Read("completed")
        self.turn_id = ""
        self.responses.held = False
        if self.spec.permissions == "ask":
            server.approver = partial(self._approve, ctx)
        try:
            started = await server.request(
                "turn/start",
                {
                    "threadId": self.codex_thread,
                    "input": [{"type": "text", "text": text, "text_elements": []}],
                },
            )
            self.turn_id = str((started.get("turn") or {}).get("id") or "")
            check_due = interrupting = False
            while True:
                if self.interrupted():
                    await self._send_interrupt()  # asked for before Codex named the turn
                    interrupting = True
                note = await server.next_notification()
                params = note.get("params") or {}
                if params.get("threadId", self.codex_thread) != self.codex_thread:
                    continue
                match note.get("method"):
                    case "item/started":
                        self.responses.item_started(params.get("item") or {})
                    case "item/completed":
                        await self._item_completed(ctx, params.get("item") or {})
                    case "thread/tokenUsage/updated":
                        usage = usage_of(params)
                        if usage is not None:
                            model = _cli.model_slug(self.spec)
                            counted = self.responses.counted(usage, model, ctx.now)
                            await ctx.append(self._settled(ctx, counted))
                            check_due = self.settings.codex_windowing
                    case "error":
                        read.overflow = read.overflow or is_overflow(params.get("error"))
                        await self._error(ctx, params, read)
                    case "turn/completed":
                        if await self._turn_completed(ctx, params, read):
                            return read
                        continue
                    case _:
                        pass
                due = check_due or self.window_pending
                if due and not interrupting and not self.responses.running:
                    check_due = False
                    interrupting = await self._mid_turn_check(ctx, read)
                if not interrupting:
                    await self._steer(ctx)
        except AppServerExited:
            read.how = "exited"
            return read

    async def _approve(self, ctx: TurnContext, method: str, params: dict[str, Any]) -> bool:
        """Codex asks before running a command or applying a patch: the operator decides."""
        if method.startswith("item/fileChange"):
            tool, argument = (
                "apply_patch",
                str(params.get("reason") or params.get("grantRoot") or ""),
            )
        else:
            tool, argument = "shell", _command(params)
        verdict = await ctx.approve(
            tool,
            argument,
            detail=json.dumps(params)[:4000],
            call_id=str(params.get("itemId") or "") or None,
        )
        return verdict.allowed

    async def _error(self, ctx: TurnContext, params: dict[str, Any], read: _Read) -> None:
        """A retry Codex makes on its own is logged; an authentication error ends the turn
        now (retrying a refused key only delays the failure), naming the setting to fix."""
        detail = retry_detail(params)
        if detail is not None:
            await self._notice(ctx, "api-retry", detail)
            self.api_retries += 1
            told = retrying("Codex", self.api_retries, detail, ctx.now())
            if told is not None:
                await ctx.append(told)
        status = http_status(params.get("error"))
        if status not in AUTH_STATUSES or read.credential is not None:
            return
        assert status is not None
        read.credential = bad_credential("Codex", status, "", OPENAI_KEY_SETTING)
        if self.server is not None and self.turn_id:
            with contextlib.suppress(AppServerError):
                await self.server.send(
                    "turn/interrupt", {"threadId": self.codex_thread, "turnId": self.turn_id}
                )

    async def _turn_completed(self, ctx: TurnContext, params: dict[str, Any], read: _Read) -> bool:
        """Our turn's ``turn/completed`` (True) fills ``read`` and closes the calls it left
        open; another turn's is passed by (False)."""
        turn = params.get("turn") or {}
        if turn.get("id") != self.turn_id:
            return False
        read.status = str(turn.get("status") or "")
        read.error = turn.get("error")
        read.overflow = read.overflow or is_overflow(read.error)
        leftover = self.responses.interrupted("the turn ended", ctx.now)
        if leftover:
            await ctx.append(leftover)
        return True

    async def _steer(self, ctx: TurnContext) -> None:
        """Human messages logged during the turn join it (``turn/steer``), as they would join
        a native turn at its next call. One Codex cannot take stays for the next turn."""
        view = ctx.view
        texts = queries.human_since(view, max(self.sent_upto, self.steer_checked))
        if not texts:
            self.steer_checked = view.last_seq  # the next notification reads only what is new
            return
        assert self.server is not None
        try:
            await self.server.request(
                "turn/steer",
                {
                    "threadId": self.codex_thread,
                    "expectedTurnId": self.turn_id,
                    "input": [{"type": "text", "text": "\n\n".join(texts), "text_elements": []}],
                },
            )
        except AppServerExited:
            raise
        except AppServerError as exc:
            log.info("codex_steer_refused", thread=ctx.thread_id, error=str(exc))
            return
        self.sent_upto = view.last_seq

    async def _mid_turn_check(self, ctx: TurnContext, read: _Read) -> bool:
        """Check between responses; interrupts the turn when it must end here. Says whether
        it did."""
        if self.window_pending:
            read.window = True
        else:
            check = await ctx.checkpoint()
            read.stop = check.stop
            read.missed = check.missed
            read.window = self.env.restarts_for(check.window)
        if not (read.window or read.stop or read.missed):
            return False
        assert self.server is not None
        try:
            await self.server.request(
                "turn/interrupt", {"threadId": self.codex_thread, "turnId": self.turn_id}
            )
        except AppServerExited:
            raise
        except AppServerError as exc:
            # The turn ended on its own meanwhile (the gateway ended it): its turn/completed
            # is on its way, and the window is applied after it all the same.
            log.info("codex_interrupt_refused", thread=ctx.thread_id, error=str(exc))
        return True

    async def _item_completed(self, ctx: TurnContext, item: dict[str, Any]) -> None:
        if item.get("type") != "contextCompaction":
            results = self.responses.item_completed(item, ctx.now)
            if results:
                await ctx.append(self._settled(ctx, results))
            return
        await ctx.append(compacted(ctx.view.ask, self.codex_thread, ctx.now))

    async def _notice(
        self, ctx: TurnContext, notice: str, detail: str, previous: str | None = None
    ) -> None:
        await ctx.append(
            EngineNotice(
                at=ctx.now(),
                engine="codex",
                notice=notice,
                detail=detail,
                seat="main",
                session_id=self.codex_thread or None,
                previous_session_id=previous,
            )
        )
