"""Reading one Claude Code turn: the CLI's stream-json lines until the turn's ``result``,
each appended as what ``_translate`` makes of it, with the checkpoint after each top-level
tool result, retries the CLI makes on its own logged (an authentication error among them ends
the turn), and the root session's first safe point noted for forks. A mixin of the engine:
it reads and writes the engine's session state, and knows nothing of starting processes.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from adapters._condense import settled
from adapters._texts import AUTH_STATUSES, bad_credential, retrying
from adapters.claude_code import _cli
from adapters.claude_code._translate import (
    Replies,
    api_retry,
    reply_of,
    text_without_calls,
    top_level,
    unprompted,
)
from condensate.core.receipts import argument_of
from condensate.engine import EngineEnv, TurnContext
from condensate.events import AssistantMessage, EngineNotice, Event, ModelUsage, ToolResult

log = structlog.get_logger()

ANTHROPIC_KEY_SETTING = "CONDENSATE_ANTHROPIC_API_KEY"
"""Where the key Claude Code gets comes from (the daemon's setting, else ANTHROPIC_API_KEY)."""


@dataclass
class _Read:
    """How reading a turn ended."""

    how: Literal["result", "exited"]
    result: dict[str, Any] = field(default_factory=dict)
    window: bool = False
    """A window is due: the turn was interrupted to start a new session with it."""
    stop: str | None = None
    returncode: int | None = None
    credential: str | None = None
    """The provider refused the credential: the turn was interrupted and fails with this."""


def _parsed(ctx: TurnContext, raw: bytes) -> dict[str, Any]:
    """One stdout line as JSON; a plain line (a warning the CLI printed) is logged and read
    as nothing."""
    try:
        line = json.loads(raw)
    except ValueError:
        log.info("claude_plain_line", thread=ctx.thread_id, line=raw[:300].decode())
        return {}
    return line if isinstance(line, dict) else {}


class TurnReader:
    """The line-reading half of the Claude Code engine (its session state is declared here
    and set by the engine)."""

    process: asyncio.subprocess.Process | None
    env: EngineEnv
    replies: Replies
    session_id: str
    root_session_id: str
    root_first_message: str
    root_safe_uuid: str | None
    measured: bool
    sent_upto: int
    window_pending: bool
    operator_interrupt: bool
    _requests: int
    api_retries: int
    """The retries the CLI made on its own in the running turn."""

    def interrupted(self) -> bool:
        """The operator interrupted the running turn (a method: it changes while we wait)."""
        return self.operator_interrupt

    async def _interrupt(self) -> None:
        """Claude Code's ``interrupt`` control request: the turn ends at its result."""
        self._requests += 1
        assert self.process is not None
        await _cli.write(self.process, _cli.interrupt_line(self._requests))

    async def _read_turn(self, ctx: TurnContext) -> _Read:
        process = self.process
        assert process is not None
        assert process.stdout is not None
        read = _Read("result")
        while True:
            raw = await process.stdout.readline()
            if not raw:
                await self._flush(ctx)
                read.how = "exited"
                read.returncode = await process.wait()
                return read
            line = _parsed(ctx, raw)
            kind = line.get("type")
            if kind == "system" and line.get("subtype") == "init":
                await self._init(ctx, line)
            elif kind == "system" and line.get("subtype") == "api_retry":
                refused = await self._api_retry(ctx, line)
                if refused is not None and read.credential is None:
                    # Retrying a refused key only delays the failure (ten tries, minutes):
                    # the turn ends now, naming the setting to fix.
                    read.credential = refused
                    await self._interrupt()
            elif kind == "control_request":
                await self._control_request(ctx, line)
            elif kind == "assistant" and top_level(line):
                await self._assistant(ctx, line)
            elif kind == "user" and top_level(line):
                if await self._tool_results(ctx, line):
                    await self._after_results(ctx, read)
            elif kind == "result":
                await self._flush(ctx)
                if unprompted(line):
                    # A turn the CLI ran by itself (a background subagent finished), maybe
                    # while no turn of ours was reading: its replies are the head's and are
                    # logged, but its result does not end the turn we are waiting on.
                    log.info("claude_unprompted_turn", thread=ctx.thread_id, origin=line["origin"])
                    continue
                read.result = line
                return read

    async def _after_results(self, ctx: TurnContext, read: _Read) -> None:
        """The checkpoint after a top-level tool result: a window or a stop interrupts the
        turn (once); nothing is checked once the turn is ending anyway."""
        if read.window or read.stop is not None or self.interrupted():
            return
        if self.window_pending:
            read.window = True
            await self._interrupt()
            return
        check = await ctx.checkpoint()
        if check.stop is not None:
            read.stop = check.stop
            await self._interrupt()
        elif self.env.restarts_for(check.window):
            read.window = True
            await self._interrupt()

    async def _control_request(self, ctx: TurnContext, line: dict[str, Any]) -> None:
        """A request from the CLI: a permission prompt (``can_use_tool``, under ``ask``) is
        an approval the operator answers; the CLI waits for it. Nothing else is answered."""
        assert self.process is not None
        request = line.get("request") or {}
        number = str(line.get("request_id") or "")
        if request.get("subtype") != "can_use_tool":
            log.warning(
                "claude_request_refused", thread=ctx.thread_id, subtype=request.get("subtype")
            )
            await _cli.write(self.process, _cli.control_error(number, request.get("subtype")))
            return
        tool_input = request.get("input") or {}
        verdict = await ctx.approve(
            str(request.get("tool_name") or ""),
            argument_of(
                str(request.get("tool_name") or ""),
                tool_input if isinstance(tool_input, dict) else {},
            ),
            detail=json.dumps(tool_input)[:4000],
            call_id=str(request.get("tool_use_id") or "") or None,
        )
        if self.process is not None:  # the CLI may have been ended while the operator thought
            await _cli.write(self.process, _cli.permission_answer(number, verdict, tool_input))

    async def _api_retry(self, ctx: TurnContext, line: dict[str, Any]) -> str | None:
        """Log a retry the CLI makes on its own; the reason to fail the turn when it retries
        an authentication error."""
        detail, status = api_retry(line)
        self.api_retries += 1
        told = retrying("Claude Code", self.api_retries, detail, ctx.now())
        await ctx.append(
            [
                EngineNotice(
                    at=ctx.now(),
                    engine="claude",
                    notice="api-retry",
                    detail=detail,
                    seat="main",
                    session_id=self.session_id or None,
                ),
                *([] if told is None else [told]),
            ]
        )
        if status not in AUTH_STATUSES:
            return None
        assert status is not None
        error = str(line.get("error") or "")
        return bad_credential("Claude Code", status, error, ANTHROPIC_KEY_SETTING)

    async def _init(self, ctx: TurnContext, line: dict[str, Any]) -> None:
        session = str(line.get("session_id") or "")
        if session and session != self.session_id:
            await ctx.append(
                EngineNotice(
                    at=ctx.now(),
                    engine="claude",
                    notice="session-changed",
                    detail="Claude Code reported a session id other than the one it was given",
                    seat="main",
                    session_id=session,
                    previous_session_id=self.session_id or None,
                )
            )
            if self.root_session_id == self.session_id:
                self.root_session_id = session
            self.session_id = session
            if self.env.gateway is not None:
                self.env.gateway.session(session)

    async def _assistant(self, ctx: TurnContext, line: dict[str, Any]) -> None:
        reply = reply_of(line)
        if reply is None:
            return
        message_id, message = reply
        await self._log(ctx, self.replies.assistant_line(line, ctx.now))
        if self.root_session_id == self.session_id:
            if not self.root_first_message:
                self.root_first_message = message_id
            if (
                self.root_safe_uuid is None
                and message_id == self.root_first_message
                and text_without_calls(message)
            ):
                self.root_safe_uuid = str(line.get("uuid") or "") or None

    async def _log(self, ctx: TurnContext, events: list[Event]) -> None:
        """Append translated events; a counted call marks the session as measured."""
        if not events:
            return
        # Through the gateway a reply's count is logged before the CLI sees its end.
        counted = ModelUsage if self.env.gateway is None else AssistantMessage
        if any(isinstance(e, counted) for e in events):
            self.measured = True
        await ctx.append(settled(events, ctx.view, ctx.spec, self.sent_upto, ctx.now()))

    async def _flush(self, ctx: TurnContext) -> None:
        """Log the reply gathered so far: its usage once per message id, then the reply."""
        await self._log(ctx, self.replies.flush(ctx.now) or [])

    async def _tool_results(self, ctx: TurnContext, line: dict[str, Any]) -> bool:
        """Log a user line's tool results; says whether it had any of a logged call."""
        events = self.replies.user_line(line, ctx.now)
        await self._log(ctx, events)
        return any(isinstance(e, ToolResult) for e in events)

    async def _close_open_calls(self, ctx: TurnContext, why: str) -> None:
        """Every logged call gets its result, even when the process died before giving one."""
        await self._flush(ctx)
        events = self.replies.interrupted(why, ctx.now)
        if events:
            await ctx.append(events)
