"""The Claude Code engine: a thread's turns, checkpoints and sessions.

A turn sends the human messages logged since the last one and reads lines until its
``result``, appending what ``_translate`` makes of them; after each top-level tool result the
checkpoint runs. A window ends the process and starts a new session with it (a fork of the
root session at its first safe point, or a fresh one); a crash mid-turn resumes once.
Reading a turn's lines is ``_reading``'s half of the engine.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, Literal

import structlog

from adapters import _child
from adapters._asks import AskTeller
from adapters._texts import AUTH_STATUSES, CONTINUE, bad_credential, resumed
from adapters.claude_code import _cli, _permissions
from adapters.claude_code._reading import ANTHROPIC_KEY_SETTING, TurnReader, _Read
from adapters.claude_code._translate import (
    Replies,
)
from adapters.cli_turn import Exchange, drive
from condensate.core.queries import has_history, human_since
from condensate.core.render import render_window
from condensate.engine import (
    Checkpoint,
    EngineEnv,
    ThreadSpec,
    TurnContext,
    TurnOutcome,
)
from condensate.events import (
    EngineNotice,
    Window,
)
from condensate.gateway.wire import HELD_MARK

log = structlog.get_logger()

BASELINE_TOKENS = 20_000
"""Claude Code's own system prompt and tool schemas: ~12.5k tokens for claude-opus-5-5 and
~19-22k for claude-sonnet-4-5 (2.1.332, measured against the fake). The first count replaces
this estimate as the meter's anchor."""
Start = Literal["first", "fresh", "fork", "resume"]


def _finished(result: dict[str, Any]) -> bool:
    """A result that ends the turn the model's way: neither cut short by an interrupt nor
    ended by the gateway's own reply."""
    said = str(result.get("result") or "")
    return result.get("subtype") == "success" and not said.startswith(HELD_MARK)


def _exchange(read: _Read) -> Exchange:
    """What a read turn comes to, in the shared turn's terms."""
    result = read.result
    said = str(result.get("result") or "")
    done = Exchange(
        exited=read.how == "exited",
        returncode=read.returncode,
        credential=read.credential,
        stop=read.stop,
        window=read.window,
        finished=_finished(result),
        text=said if said and not said.startswith(HELD_MARK) else "",
    )
    if result.get("terminal_reason") == "prompt_too_long":
        done.overflow = said
    elif result.get("is_error"):
        status = result.get("api_error_status")
        if status in AUTH_STATUSES:
            done.credential = done.credential or bad_credential(
                "Claude Code", int(status), "", ANTHROPIC_KEY_SETTING
            )
        else:
            errors = result.get("errors") or []
            reason = said or "; ".join(map(str, errors))
            detail = f"Claude Code ended the turn with {result.get('subtype')}"
            done.error = f"{detail} ({result.get('terminal_reason')}): {reason}"
    return done


class ClaudeCodeEngine(TurnReader):
    """Runs turns of one ``claude`` thread through the Claude Code CLI (its turns are
    ``cli_turn``'s; this is their ``CliSession``)."""

    title = "Claude Code"

    def __init__(self, spec: ThreadSpec, env: EngineEnv) -> None:
        _permissions.check(spec)  # refused before the thread exists: nothing is logged
        self.spec = spec
        self.env = env
        self.config_dir = env.home / _cli.STATE_DIR / env.thread_id
        self.process: asyncio.subprocess.Process | None = None
        self.session_id = ""
        self.root_session_id = ""
        self.root_first_message = ""
        self.root_safe_uuid: str | None = None
        """The first assistant text line of the root session: where a fork cuts it."""
        self.measured = False
        """The current session had a call the provider counted."""
        self.sent_upto = 0
        """The last seq the CLI has seen, as a message or inside a window."""
        self.next_start: Start = "first"
        self.window_pending = False
        """A window was taken outside the turn (an ask's deadline): apply it at the next
        boundary."""
        self.replies = Replies(counts=env.gateway is None)
        self._requests = 0
        self.asks = AskTeller("claude")
        self.in_turn = False
        self.operator_interrupt = False
        self.api_retries = 0
        """The operator interrupted the running turn: it ends at the CLI's next result."""
        self.prestarted = False
        """``apply_window`` outside a turn already started the new session's process; the
        next turn writes the window as its first message."""
        self._restart = asyncio.Lock()
        self._ctx: TurnContext | None = None
        """The last turn's context: the runtime's handle on this thread, valid between turns
        (``apply_window`` logs the new session's notice through it)."""

    # -- the protocol ---------------------------------------------------------------------

    def baseline(self, spec: ThreadSpec) -> int:
        return BASELINE_TOKENS

    async def apply_window(self, window: Window) -> None:
        """During a turn, the next boundary (a tool result, or the turn's result) starts a
        session with the window. Outside a turn the session restarts now: the old process
        ends and the new one (a fork of the root, or fresh) starts at once; the window is its
        first message, written when the thread next has something to say (sending it now
        would only buy a model call whose reply nobody waits for)."""
        if not self.env.restarts_for(window):
            return
        self.window_pending = True
        if self.in_turn or self._ctx is None:
            return
        async with self._restart:  # a turn that starts meanwhile waits for the new session
            await self._end_process()
            self.next_start = self._fork_or_fresh(forced=False)
            await self._start(self._ctx)
            self.prestarted = True

    async def close(self) -> None:
        await self._end_process()

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        self._ctx = ctx
        self.in_turn = True
        self.operator_interrupt = False
        try:
            async with self._restart:  # a restart begun outside the turn finishes first
                pass
            return await drive(self, ctx)
        except asyncio.CancelledError:
            # Cancelled mid-turn (an interrupt the CLI did not honour in time, or the daemon
            # stopping): the CLI is somewhere inside its turn, so it ends here; the next turn
            # resumes its session in a new process.
            await self._abandon()
            raise
        finally:
            self.in_turn = False

    async def interrupt(self) -> None:
        """The operator's interrupt: Claude Code's ``interrupt`` control request; the turn
        ends when the CLI's result line for it arrives."""
        if not self.in_turn:
            return
        self.operator_interrupt = True
        if self.process is not None:
            await self._interrupt()

    # -- the shared turn's session (``cli_turn.CliSession``) ------------------------------

    def current_session(self) -> str:
        return self.session_id

    def windowing(self) -> bool:
        return True

    def missed(self, reason: str) -> str | None:
        """A missed summary does not end the turn: the gateway holds what would overflow."""
        return None

    def unwindowed_overflow(self) -> str:
        return ""  # Condensate always windows Claude Code

    async def check(self, ctx: TurnContext) -> Checkpoint | None:
        return await ctx.checkpoint()

    async def opening(self, ctx: TurnContext) -> str:
        self.api_retries = 0  # a turn starts: its retries are counted afresh
        return self._opening(ctx)

    async def start_window(self, ctx: TurnContext, *, forced: bool) -> str:
        return await self._window_start(ctx, forced=forced)

    async def window_after_turn(self, ctx: TurnContext) -> None:
        self.window_pending = True  # the next turn starts its session with the window

    async def ready(self, ctx: TurnContext) -> None:
        returncode = None if self.process is None else await _child.exit_status(self.process)
        if returncode is not None:
            await self._exited_between_turns(ctx, returncode)
        if self.process is None:
            await self._start(ctx)

    async def _exited_between_turns(self, ctx: TurnContext, returncode: int) -> None:
        """The CLI exited after its last turn (the OOM killer, a kill): the exit is noted
        and the next process resumes its session."""
        await self._note_exit(ctx, f"exit {returncode} between turns")
        await self._end_process()
        self.next_start = "resume" if self.session_id else "fresh"

    async def _note_exit(self, ctx: TurnContext, how: str) -> None:
        """A ``cli-exited`` notice: how it exited, and the tail of its stderr."""
        await ctx.append(
            EngineNotice(
                at=ctx.now(),
                engine="claude",
                notice="cli-exited",
                detail=f"{how}; {_cli.stderr_tail(self.config_dir)}",
                seat="main",
                session_id=self.session_id or None,
            )
        )

    async def exchange(self, ctx: TurnContext, message: str) -> Exchange:
        await self._send_user(message)
        return _exchange(await self._read_turn(ctx))

    async def settle(self, ctx: TurnContext, exchange: Exchange, why: str) -> None:
        await self._close_open_calls(ctx, why)
        if exchange.exited:
            await self._end_process()

    async def crashed(self, ctx: TurnContext, exchange: Exchange) -> str:
        """Close what the CLI left open, note its exit; the next process resumes the session
        (or, before it had one, starts fresh with the view as its window)."""
        await self._close_open_calls(ctx, "the Claude Code process exited")
        await self._note_exit(ctx, f"exit {exchange.returncode} mid-turn")
        await self._end_process()
        if self.session_id:
            self.next_start = "resume"
            return resumed("Claude Code")
        self.next_start = "fresh"
        return self._window_message(ctx)

    async def after_turn(self, ctx: TurnContext) -> None:
        return None  # the checkpoint ran after each tool result

    # -- what to send -------------------------------------------------------------------

    def _opening(self, ctx: TurnContext) -> str:
        """The turn's user line: the messages logged since the CLI last saw the view. An
        engine without a session over a view with history (a daemon restart) starts a fresh
        session with the view rendered as a window."""
        view = ctx.view
        if self.process is None and self.next_start == "first" and has_history(view):
            self.next_start = "fresh"
            return self._window_message(ctx)
        texts = human_since(view, self.sent_upto)
        self.sent_upto = view.last_seq
        return "\n\n".join(texts) or "Continue."

    def _window_message(self, ctx: TurnContext) -> str:
        self.sent_upto = ctx.view.last_seq
        return f"{render_window(ctx.view)}\n\n{CONTINUE}"

    def _fork_or_fresh(self, *, forced: bool) -> Start:
        """Fork the root at its first safe point, unless that would only rebuild a prompt the
        provider refused (forced), the session has no counted call yet, or the root has no
        safe point (its first reply began with a tool call)."""
        if forced or not self.measured or self.root_safe_uuid is None:
            return "fresh"
        return "fork"

    async def _window_start(self, ctx: TurnContext, *, forced: bool) -> str:
        """End the session and say how the next one starts; the message it opens with."""
        self.window_pending = False
        if self.prestarted and not forced:
            self.prestarted = False  # apply_window already started the new session
        else:
            self.prestarted = False
            await self._end_process()
            self.next_start = self._fork_or_fresh(forced=forced)
        return self._window_message(ctx)

    # -- the process ----------------------------------------------------------------------

    async def _start(self, ctx: TurnContext) -> None:
        binary = _cli.resolve_binary(_cli.settings_of(self.env).claude_binary)
        version = await asyncio.to_thread(_cli.check_version, binary)
        start = self.next_start
        if start == "resume" and not self.session_id:
            start = "fresh"
        if start == "fork" and self.root_safe_uuid is None:
            start = "fresh"
        new_session = None if start == "resume" else str(uuid.uuid4())
        self.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        command = _cli.command(
            binary,
            self.spec,
            resume={"resume": self.session_id, "fork": self.root_session_id}.get(start),
            fork_at=self.root_safe_uuid if start == "fork" else None,
            new_session=new_session,
            mcp_config=self._mcp_config(),
        )
        self.process = await _cli.spawn(
            command,
            cwd=self.spec.cwd,
            state_dir=self.config_dir,
            env=_cli.environment(self.config_dir, self.env),
            reaper=True,
        )
        previous = self.session_id or None
        if new_session is not None:
            self.session_id = new_session
            self.measured = False
        if self.env.gateway is not None:
            self.env.gateway.session(self.session_id)
        if start in ("first", "fresh"):
            self.root_session_id = self.session_id
            self.root_first_message = ""
            self.root_safe_uuid = None
        self.replies.calls.clear()
        self.next_start = "resume"
        notice = {
            "first": "session-started",
            "fresh": "session-fresh",
            "fork": "session-forked",
            "resume": "session-resumed",
        }[start]
        detail = f"pid={self.process.pid} claude={version}"
        if start == "fork":
            detail += f" root={self.root_session_id} at={self.root_safe_uuid}"
        await ctx.append(
            EngineNotice(
                at=ctx.now(),
                engine="claude",
                notice=notice,
                detail=detail,
                seat="main",
                session_id=self.session_id,
                previous_session_id=previous,
            )
        )
        log.info(
            "claude_started",
            thread=ctx.thread_id,
            how=start,
            pid=self.process.pid,
            session=self.session_id,
            previous=previous,
        )

    def _mcp_config(self) -> Path | None:
        """Condensate's tools for the thread (``context_tools.offered``), when there is a
        daemon to serve them."""
        if not self.env.daemon_url:
            return None
        return _cli.write_mcp_config(self.config_dir, self.spec, self.env)

    async def _end_process(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            await _cli.stop(process)

    async def _abandon(self) -> None:
        """Kill the CLI at once and forget the reply it was in (the runtime closes the calls
        the log shows open)."""
        process, self.process = self.process, None
        self.replies.pending = None
        self.replies.open_calls.clear()
        if process is not None:
            await _child.kill(process)

    async def _send_user(self, text: str) -> None:
        assert self.process is not None
        await _cli.write(self.process, _cli.user_line(text, self.session_id))
