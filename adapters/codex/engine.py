"""The Codex engine: a thread's turns, checks and Codex threads.

A turn sends the human messages logged since the last one as a ``turn/start`` and reads
notifications until its ``turn/completed``, appending what ``_translate`` makes of them. After
each counted response (once no command is still running) and after the turn, the window check
runs. A window interrupts the turn, starts a fresh Codex thread in the same app-server and
injects the rendered window as one historical message; the turn goes on there. A crashed
app-server is started again and resumes the same Codex thread, once a turn. Reading a turn's
notifications is ``_reading``'s half of the engine.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import structlog

from adapters import _child
from adapters._asks import AskTeller
from adapters._texts import CONTINUE, resumed
from adapters.codex import _cli
from adapters.codex._reading import TurnReader
from adapters.codex._rpc import AppServer, AppServerError, AppServerExited
from adapters.codex._translate import Responses
from condensate import queries
from condensate.engine import (
    INTERRUPTED_BY_OPERATOR,
    Checkpoint,
    EngineEnv,
    ThreadSpec,
    TurnContext,
    TurnOutcome,
)
from condensate.events import ModelRefused, SystemLine, Window
from condensate.projector import Projection
from condensate.render import render_window

log = structlog.get_logger()

BASELINE_TOKENS = 10_000
"""Codex's own instructions, tool schemas and environment context: ~7.8k tokens for gpt-5.5
(0.171.0, as the fake counts them). The first count replaces this estimate as the anchor."""
MAX_THREADS_PER_TURN = 12
OVERFLOW_WITHOUT_WINDOWING = (
    "the prompt no longer fits the model's window and Condensate's windowing is off "
    "(CONDENSATE_CODEX_WINDOWING=0); Codex did not compact in time"
)


class CodexEngine(TurnReader):
    """Runs turns of one ``codex`` thread through ``codex app-server``."""

    name: ClassVar[str] = "codex"

    def __init__(self, spec: ThreadSpec, env: EngineEnv) -> None:
        _cli.check(spec)  # refused before the thread exists: nothing is logged
        self.spec = spec
        self.env = env
        self.codex_home = env.home / "codex" / env.thread_id
        self.server: AppServer | None = None
        self.codex_thread = ""
        """The Codex thread the turns run in (Codex's id, shown as the session id)."""
        self.turn_id = ""
        self.sent_upto = 0
        """The last seq Codex has seen, as input or inside a window."""
        self.responses = Responses(counts=env.gateway is None)
        self.window_pending = False
        """A window was taken outside the engine's check (an ask's deadline): apply it at the
        next boundary."""
        self.asks = AskTeller("codex")
        self.steer_checked = 0
        """The view held no human message after ``sent_upto`` up to this seq."""
        self.in_turn = False
        self.operator_interrupt = False
        """The operator interrupted the running turn: it ends at Codex's ``turn/completed``."""
        self._interrupt_sent = False
        self._lock = asyncio.Lock()
        self._ctx: TurnContext | None = None
        """The last turn's context, valid between turns (``apply_window`` logs through it)."""

    # -- the protocol ---------------------------------------------------------------------

    def baseline(self, spec: ThreadSpec) -> int:
        return BASELINE_TOKENS

    async def apply_window(self, window: Window, view: Projection) -> None:
        """During a turn, the next boundary starts a Codex thread with the window. Outside a
        turn it starts now: a new thread with the window injected costs no model call. A cheap
        window through the gateway needs nothing: the gateway applies it to the requests."""
        if not self.env.restarts_for(window):
            return
        self.window_pending = True
        if self.in_turn or self._ctx is None:
            return
        async with self._lock:
            await self._ensure_server(self._ctx)
            await self._new_thread(self._ctx, with_window=True)

    async def close(self) -> None:
        await self._end_server()

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        self._ctx = ctx
        self.in_turn = True
        self.operator_interrupt = self._interrupt_sent = False
        try:
            async with self._lock:
                return await self._run_turn(ctx)
        except asyncio.CancelledError:
            # Cancelled mid-turn (an interrupt Codex did not honour in time, or the daemon
            # stopping): the app-server is inside a turn, so it ends here; the next turn
            # resumes the Codex thread in a new one.
            await self._abandon()
            raise
        finally:
            self.in_turn = False

    async def interrupt(self) -> None:
        """The operator's interrupt: ``turn/interrupt``, written without waiting for its
        answer (the turn's reader takes the lines); the turn ends at its ``turn/completed``.
        Before Codex has named the turn, the reader sends it once it has."""
        if not self.in_turn:
            return
        self.operator_interrupt = True
        await self._send_interrupt()

    # -- a turn ---------------------------------------------------------------------------

    async def _run_turn(self, ctx: TurnContext) -> TurnOutcome:
        started = await self._turn_start(ctx)
        if isinstance(started, TurnOutcome):
            return started
        message = started
        crashed = refused = False
        last_text = ""
        for _ in range(MAX_THREADS_PER_TURN):
            if self.interrupted():
                return TurnOutcome("interrupted", INTERRUPTED_BY_OPERATOR, last_text)
            await self._ensure_server(ctx)
            read = await self._read_turn(
                ctx,
                await self.asks.tell(
                    ctx, message, fallback=CONTINUE, where="its input", session_id=self.codex_thread
                ),
            )
            last_text = queries.last_text(ctx.view) or last_text
            if self.interrupted():
                if read.how == "exited":
                    await self._crashed(ctx)
                return TurnOutcome("interrupted", INTERRUPTED_BY_OPERATOR, last_text)
            if read.credential is not None:
                if read.how == "exited":
                    await self._crashed(ctx)
                await ctx.append(
                    SystemLine(
                        at=ctx.now(),
                        code="authentication-failed",
                        text=f"The turn failed: {read.credential}.",
                    )
                )
                return TurnOutcome("failed", read.credential, last_text)
            if read.how == "exited":
                await self._crashed(ctx)
                if crashed:
                    return TurnOutcome(
                        "failed", "codex app-server exited twice in one turn", last_text
                    )
                crashed = True
                message = resumed("Codex app-server")
                continue
            if read.stop is not None:
                return TurnOutcome("stopped", read.stop, last_text)
            if read.missed is not None:
                return TurnOutcome("failed", _missed(read.missed), last_text)
            if read.overflow:
                await ctx.append(
                    ModelRefused(at=ctx.now(), message=str((read.error or {}).get("message")))
                )
                if not self.env.codex_windowing:
                    return TurnOutcome("failed", OVERFLOW_WITHOUT_WINDOWING, last_text)
                if refused:
                    return TurnOutcome(
                        "failed",
                        "the provider refused the prompt again after a forced window",
                        last_text,
                    )
                refused = True
                check = await ctx.checkpoint()
                if check.stop is not None:
                    return TurnOutcome("stopped", check.stop, last_text)
                if check.missed is not None:
                    return TurnOutcome("failed", _missed(check.missed), last_text)
                read.window = True
            if read.window or self.window_pending:
                await self._new_thread(ctx, with_window=True)
                if read.status == "completed" and not self.responses.held:
                    # Codex ended the turn by itself before the window could act: the turn
                    # is done; the next one goes on in the new thread.
                    return TurnOutcome("completed", "", last_text)
                message = CONTINUE
                continue
            if read.status != "completed":
                detail = f"Codex ended the turn {read.status}: {(read.error or {}).get('message')}"
                await ctx.append(SystemLine(at=ctx.now(), code="engine-error", text=detail[:500]))
                return TurnOutcome("failed", detail[:500], last_text)
            after = await self._check(ctx)
            if after is not None and self.env.restarts_for(after.window):
                await self._new_thread(ctx, with_window=True)
            if self.asks.untold(ctx):
                message = ""  # the ask opened during the turn: tell the head in a follow-up
                continue
            return TurnOutcome("completed", "", last_text)
        return TurnOutcome(
            "failed", f"{MAX_THREADS_PER_TURN} Codex threads started in one turn", last_text
        )

    async def _turn_start(self, ctx: TurnContext) -> str | TurnOutcome:
        """The turn's first input. A compaction queued between turns (an operator's answer to
        an ask) is taken here; a view with history and no Codex thread (a daemon restart)
        starts a Codex thread with the view as its window."""
        check = await self._check(ctx)
        if check is not None:
            if check.stop is not None:
                return TurnOutcome("stopped", check.stop, "")
            if check.missed is not None:
                return TurnOutcome("failed", _missed(check.missed), "")
            if self.env.restarts_for(check.window):
                self.window_pending = True
        await self._ensure_server(ctx)
        if self.window_pending or (not self.codex_thread and queries.has_history(ctx.view)):
            await self._new_thread(ctx, with_window=True)
        elif not self.codex_thread:
            await self._new_thread(ctx, with_window=False)
        texts = queries.human_since(ctx.view, self.sent_upto)
        self.sent_upto = ctx.view.last_seq
        return "\n\n".join(texts) or CONTINUE

    async def _check(self, ctx: TurnContext) -> Checkpoint | None:
        """The window check, when Condensate windows this thread."""
        if not self.env.codex_windowing:
            return None
        return await ctx.checkpoint()

    async def _crashed(self, ctx: TurnContext) -> None:
        """The app-server died mid-turn: close what it left open and note it; the next start
        resumes the same Codex thread."""
        events = self.responses.interrupted("the codex app-server exited", ctx.now)
        if events:
            await ctx.append(events)
        server, self.server = self.server, None
        returncode = None
        if server is not None:
            await server.close()  # its stdout closed; make sure the process is gone too
            returncode = server.process.returncode
        await self._notice(
            ctx,
            "cli-exited",
            f"exit {returncode} mid-turn; {_child.stderr_tail(self.codex_home)}",
        )

    # -- the app-server and its threads ---------------------------------------------------

    async def _ensure_server(self, ctx: TurnContext) -> None:
        """A running app-server; a new one resumes the Codex thread the last one ran."""
        if self.server is not None:
            return
        binary = _cli.resolve_binary(self.env.codex_binary)
        version = await asyncio.to_thread(_cli.check_version, binary)
        await asyncio.to_thread(_cli.prepare_home, binary, self.spec, self.env, self.codex_home)
        process = await _child.spawn(
            _cli.command(binary),
            cwd=self.spec.cwd,
            state_dir=self.codex_home,
            env=_cli.environment(self.codex_home, self.env),
            reaper=True,
        )
        server = AppServer(process)
        try:
            await server.initialize()
        except AppServerExited as exc:
            await server.close()
            msg = f"codex app-server exited as it started: {_child.stderr_tail(self.codex_home)}"
            raise AppServerError(msg) from exc
        self.server = server
        log.info("codex_started", thread=ctx.thread_id, pid=process.pid, codex=version)
        if self.codex_thread:
            await self.server.request(
                "thread/resume", {"threadId": self.codex_thread, "excludeTurns": True}
            )
            if self.env.gateway is not None:
                self.env.gateway.session(self.codex_thread)
            await self._notice(
                ctx,
                "session-resumed",
                f"pid={process.pid} codex={version}",
                previous=self.codex_thread,
            )

    async def _new_thread(self, ctx: TurnContext, *, with_window: bool) -> None:
        """A fresh Codex thread with the thread's persona and permissions; with the view
        rendered as one historical message when ``with_window``."""
        assert self.server is not None
        params: dict[str, Any] = {
            "cwd": self.spec.cwd,
            "approvalPolicy": _cli.approval_policy(self.spec.permissions),
            "sandbox": _cli.sandbox_mode(self.spec.permissions),
        }
        if self.spec.persona:
            params["developerInstructions"] = self.spec.persona
        started = await self.server.request("thread/start", params)
        previous = self.codex_thread or None
        self.codex_thread = str((started.get("thread") or {}).get("id") or "")
        self.window_pending = False
        if self.env.gateway is not None:
            self.env.gateway.session(self.codex_thread)
        if with_window:
            window = render_window(ctx.view)
            await self.server.request(
                "thread/inject_items",
                {
                    "threadId": self.codex_thread,
                    "items": [
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": window}],
                        }
                    ],
                },
            )
            self.sent_upto = ctx.view.last_seq
        notice = "session-fresh" if with_window else "session-started"
        detail = f"pid={self.server.pid}"
        await self._notice(ctx, notice, detail, previous=previous)

    async def _end_server(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.close()

    async def _abandon(self) -> None:
        """Kill the app-server at once and forget the calls it was running (the runtime
        closes those the log shows open)."""
        server, self.server = self.server, None
        self.responses.forget()
        if server is not None:
            await _child.kill(server.process)


def _missed(reason: str) -> str:
    return (
        f"a window was due but the curator could not write its summary ({reason}); "
        "Condensate does not fall back to Codex's own compaction"
    )
