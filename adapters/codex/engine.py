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
from typing import Any

import structlog

from adapters import _child
from adapters._asks import AskTeller
from adapters._texts import CONTINUE, resumed
from adapters.cli_turn import Exchange, drive
from adapters.codex import _cli
from adapters.codex._reading import TurnReader
from adapters.codex._rpc import AppServer, AppServerError, AppServerExited
from adapters.codex._translate import Responses
from condensate.core import queries
from condensate.core.render import render_window
from condensate.engine import (
    Checkpoint,
    EngineEnv,
    ThreadSpec,
    TurnContext,
    TurnOutcome,
)
from condensate.events import Window

log = structlog.get_logger()

BASELINE_TOKENS = 10_000
"""Codex's own instructions, tool schemas and environment context: ~7.8k tokens for gpt-5.5
(0.171.0, as the fake counts them). The first count replaces this estimate as the anchor."""
OVERFLOW_WITHOUT_WINDOWING = (
    "the prompt no longer fits the model's window and Condensate's windowing is off "
    "(CONDENSATE_CODEX_WINDOWING=0); Codex did not compact in time"
)


class CodexEngine(TurnReader):
    """Runs turns of one ``codex`` thread through ``codex app-server`` (its turns are
    ``cli_turn``'s; this is their ``CliSession``)."""

    title = "Codex app-server"

    def __init__(self, spec: ThreadSpec, env: EngineEnv) -> None:
        _cli.check(spec)  # refused before the thread exists: nothing is logged
        self.spec = spec
        self.env = env
        self.settings = _cli.settings_of(env)
        self.codex_home = env.home / _cli.STATE_DIR / env.thread_id
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
        self.api_retries = 0
        """The operator interrupted the running turn: it ends at Codex's ``turn/completed``."""
        self._interrupt_sent = False
        self._lock = asyncio.Lock()
        self._ctx: TurnContext | None = None
        """The last turn's context, valid between turns (``apply_window`` logs through it)."""

    # -- the protocol ---------------------------------------------------------------------

    def baseline(self, spec: ThreadSpec) -> int:
        return BASELINE_TOKENS

    async def apply_window(self, window: Window) -> None:
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
                return await drive(self, ctx)
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

    # -- the shared turn's session (``cli_turn.CliSession``) ------------------------------

    def current_session(self) -> str:
        return self.codex_thread

    def windowing(self) -> bool:
        return self.settings.codex_windowing

    def missed(self, reason: str) -> str | None:
        return _missed(reason)

    def unwindowed_overflow(self) -> str:
        return OVERFLOW_WITHOUT_WINDOWING

    async def check(self, ctx: TurnContext) -> Checkpoint | None:
        return await self._check(ctx)

    async def opening(self, ctx: TurnContext) -> str:
        """The turn's input: the human messages since Codex last saw the view. A view with
        history and no Codex thread (a daemon restart) starts one with the view as its
        window."""
        self.api_retries = 0  # a turn starts: its retries are counted afresh
        await self._ensure_server(ctx)
        if not self.codex_thread:
            await self._new_thread(ctx, with_window=queries.has_history(ctx.view))
        texts = queries.human_since(ctx.view, self.sent_upto)
        self.sent_upto = ctx.view.last_seq
        return "\n\n".join(texts) or CONTINUE

    async def start_window(self, ctx: TurnContext, *, forced: bool) -> str:
        """A fresh Codex thread with the window injected: the turn goes on there."""
        await self.window_after_turn(ctx)
        return CONTINUE

    async def window_after_turn(self, ctx: TurnContext) -> None:
        await self._ensure_server(ctx)
        await self._new_thread(ctx, with_window=True)

    async def ready(self, ctx: TurnContext) -> None:
        await self._ensure_server(ctx)

    async def exchange(self, ctx: TurnContext, message: str) -> Exchange:
        read = await self._read_turn(ctx, message)
        error = read.error or {}
        done = Exchange(
            exited=read.how == "exited",
            credential=read.credential,
            stop=read.stop,
            missed=read.missed,
            overflow=str(error.get("message")) if read.overflow else None,
            window=read.window,
            finished=read.status == "completed" and not self.responses.held,
            text=queries.last_text(ctx.view),
        )
        if read.how != "exited" and read.status != "completed":
            done.error = f"Codex ended the turn {read.status}: {error.get('message')}"
        return done

    async def settle(self, ctx: TurnContext, exchange: Exchange, why: str) -> None:
        if exchange.exited:
            exchange.returncode = await self._crashed(ctx)

    async def crashed(self, ctx: TurnContext, exchange: Exchange) -> str:
        exchange.returncode = await self._crashed(ctx)
        return resumed("Codex app-server")

    async def after_turn(self, ctx: TurnContext) -> None:
        """The check after a turn: a window it takes starts a Codex thread for the next."""
        after = await self._check(ctx)
        if after is not None and self.env.restarts_for(after.window):
            await self._new_thread(ctx, with_window=True)

    async def _check(self, ctx: TurnContext) -> Checkpoint | None:
        """The window check, when Condensate windows this thread."""
        if not self.settings.codex_windowing:
            return None
        return await ctx.checkpoint()

    async def _crashed(self, ctx: TurnContext) -> int | None:
        """The app-server died mid-turn: close what it left open and note it; the next start
        resumes the same Codex thread. Its exit status."""
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
        return returncode

    # -- the app-server and its threads ---------------------------------------------------

    async def _ensure_server(self, ctx: TurnContext) -> None:
        """A running app-server; a new one resumes the Codex thread the last one ran (an
        app-server that exited after its last turn is noted first)."""
        returncode = None if self.server is None else await _child.exit_status(self.server.process)
        if self.server is not None and returncode is not None:
            await self.server.close()
            self.server = None
            detail = f"exit {returncode} between turns; {_child.stderr_tail(self.codex_home)}"
            await self._notice(ctx, "cli-exited", detail)
        if self.server is not None:
            return
        binary = _cli.resolve_binary(self.settings.codex_binary)
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
        # No "sandbox": Codex would take it over the config's permission profile, and
        # its older sandbox settings cannot keep a command from reading.
        params: dict[str, Any] = {
            "cwd": self.spec.cwd,
            "approvalPolicy": _cli.approval_policy(self.spec.permissions),
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
