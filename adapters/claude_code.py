"""The Claude Code engine (``claude``): drives the real ``claude`` CLI as a long-lived child.

One process per Claude session: ``claude -p --input-format stream-json --output-format
stream-json --verbose``, its state in ``$CONDENSATE_HOME/claude/<thread>`` (CLAUDE_CONFIG_DIR)
and its own auto-compaction off, so that a provider's "prompt is too long" reaches us as a
``result`` with ``terminal_reason: "prompt_too_long"`` instead of being compacted away.

A turn sends the human messages logged since the last turn as one user line and reads lines
until the turn's ``result``. Every top-level line becomes log events: one ``model.usage`` per
API call (deduplicated by message id, appended before its reply as the native loop does), the
reply as ``message.assistant``, each ``tool_result`` as ``tool.result``, and the session's
lineage as ``engine.notice``. Subagent lines (``parent_tool_use_id`` set) keep their own context:
they are neither logged as top-level events nor checked.

The checkpoint runs after each top-level tool result. A window interrupts the turn, ends the
process, and starts a new Claude session whose first message is the rendered window: a fork of
the root session at its first safe point (its first assistant text) when there is one and the
window was not forced, else a fresh session. A crash mid-turn resumes the same session once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import structlog

from condensate.engine import EngineEnv, ThreadSpec, TurnContext, TurnOutcome
from condensate.errors import ConfigError
from condensate.events import (
    AssistantMessage,
    EngineNotice,
    Event,
    ModelRefused,
    ModelUsage,
    SystemLine,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    UserMessage,
    Window,
)
from condensate.projector import Projection
from condensate.providers import parse_model
from condensate.render import render_window

log = structlog.get_logger()

PINNED_VERSION = "2.1.332"
"""The version ``package.json`` pins; a CLI of another major.minor is refused."""
INSTALL_HINT = (
    "run `npm ci` in the Condensate repository (it installs the pinned "
    f"@anthropic-ai/claude-code@{PINNED_VERSION}), or `npm install -g "
    f"@anthropic-ai/claude-code@{PINNED_VERSION}`, or point CONDENSATE_CLAUDE_BINARY at one"
)
REPO = Path(__file__).resolve().parents[1]
LINE_LIMIT = 64 * 1024 * 1024
"""A stream-json line holds a whole tool result; asyncio's 64 KiB default is far too small."""
BASELINE_TOKENS = 20_000
"""Claude Code's own system prompt and tool schemas: ~12.5k tokens for claude-opus-5-5 and
~19-22k for claude-sonnet-4-5 (2.1.332, measured against the fake). The first count replaces
this estimate as the meter's anchor."""
MAX_RESTARTS_PER_TURN = 12
STOP_GRACE_SECONDS = 5.0
CONTINUE = (
    "Continue the task from where the conversation above leaves off. Your earlier context was "
    "replaced by this window; reread any file you need before relying on it."
)
RESUMED = (
    "The Claude Code process restarted in the middle of this turn (it exited unexpectedly); "
    "continue the task from where you left off. A tool call that was running may have run in "
    "part: check its effect before relying on it."
)
CLAUDE_MODES = frozenset({"acceptEdits", "bypassPermissions", "plan", "dontAsk", "auto"})
"""Claude Code's own permission modes, passed through as given."""
ARGUMENT_KEYS = ("file_path", "path", "notebook_path", "command", "pattern", "url", "query")

Start = Literal["first", "fresh", "fork", "resume"]

_versions: dict[str, str] = {}


def resolve_binary(configured: str | None) -> str:
    """The CLI to run: the setting, else the repo's pinned one, else ``claude`` on PATH."""
    if configured:
        found = shutil.which(configured)
        if found is None:
            msg = f"CONDENSATE_CLAUDE_BINARY={configured!r} is not an executable; {INSTALL_HINT}."
            raise ConfigError(msg)
        return found
    pinned = REPO / "node_modules" / ".bin" / "claude"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("claude")
    if found is None:
        msg = f"The Claude Code CLI (`claude`) was not found; {INSTALL_HINT}."
        raise ConfigError(msg)
    return found


def check_version(binary: str) -> str:
    """``claude --version``'s version, once per binary; refuses another major.minor."""
    if binary in _versions:
        return _versions[binary]
    try:
        done = subprocess.run(  # noqa: S603 - the operator's configured binary
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        msg = f"Could not run {binary} --version ({exc}); {INSTALL_HINT}."
        raise ConfigError(msg) from exc
    version = done.stdout.strip().split(" ", 1)[0]
    wanted = PINNED_VERSION.rsplit(".", 1)[0]
    if done.returncode != 0 or version.rsplit(".", 1)[0] != wanted:
        shown = version or done.stderr.strip()[:200] or f"exit {done.returncode}"
        msg = (
            f"{binary} is Claude Code {shown!r}, but Condensate drives {wanted}.x "
            f"(pinned {PINNED_VERSION}); {INSTALL_HINT}."
        )
        raise ConfigError(msg)
    _versions[binary] = version
    return version


def permission_mode(permissions: str) -> str:
    """A thread's permissions as a Claude Code ``--permission-mode``.

    ``default`` becomes ``bypassPermissions``: Condensate answers no permission prompts yet,
    and a headless Claude Code in its own ``default`` mode silently denies every write and
    every command that is not read-only, so an unattended thread could do nothing. Claude
    Code's own mode names pass through.
    """
    if permissions == "default":
        return "bypassPermissions"
    if permissions in CLAUDE_MODES:
        return permissions
    known = ", ".join(sorted({"default", *CLAUDE_MODES}))
    msg = f"Permissions {permissions!r} mean nothing to Claude Code; use one of: {known}."
    raise ConfigError(msg)


@dataclass
class _Pending:
    """The blocks of one API call's reply, as its lines arrive (one line per block)."""

    message_id: str
    model: str
    usage: dict[str, Any]
    text: list[str] = field(default_factory=list)
    thinking: list[ThinkingBlock] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)


@dataclass
class _Read:
    """How reading a turn ended."""

    how: Literal["result", "exited"]
    result: dict[str, Any] = field(default_factory=dict)
    window: bool = False
    """A window is due: the turn was interrupted to start a new session with it."""
    stop: str | None = None
    returncode: int | None = None


class ClaudeCodeEngine:
    """Runs turns of one ``claude`` thread through the Claude Code CLI."""

    name: ClassVar[str] = "claude"

    def __init__(self, spec: ThreadSpec, env: EngineEnv) -> None:
        self.spec = spec
        self.env = env
        self.config_dir = env.home / "claude" / env.thread_id
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
        self.calls: dict[str, ToolCall] = {}
        self.open_calls: dict[str, ToolCall] = {}
        self.usage_logged: set[str] = set()
        self.pending: _Pending | None = None
        self._requests = 0

    # -- the protocol ---------------------------------------------------------------------

    def baseline(self, spec: ThreadSpec) -> int:
        return BASELINE_TOKENS

    async def apply_window(self, window: Window, view: Projection) -> None:
        """The next boundary (a tool result, or the next turn) starts a session with it."""
        self.window_pending = True

    async def close(self) -> None:
        await self._end_process()

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        if self.window_pending:
            await self._end_process()
            message = await self._window_start(ctx, forced=False)
        else:
            message = self._opening(ctx)
        crashed = False
        refused = False
        last_text = ""
        for _ in range(MAX_RESTARTS_PER_TURN):
            if self.process is None:
                await self._start(ctx)
            await self._send_user(message)
            read = await self._read_turn(ctx)
            if read.how == "exited":
                await self._close_open_calls(ctx, "the Claude Code process exited")
                await ctx.append(
                    EngineNotice(
                        at=ctx.now(),
                        engine="claude",
                        notice="cli-exited",
                        detail=f"exit {read.returncode} mid-turn; {self._stderr_tail()}",
                        seat="main",
                        session_id=self.session_id or None,
                    )
                )
                await self._end_process()
                if read.window or self.window_pending:
                    message = await self._window_start(ctx, forced=False)
                    continue
                if crashed:
                    return TurnOutcome(
                        "failed",
                        "the Claude Code process exited twice in one turn "
                        f"(last exit {read.returncode})",
                        last_text,
                    )
                crashed = True
                self.next_start = "resume" if self.session_id else "fresh"
                message = RESUMED if self.session_id else self._window_message(ctx)
                continue
            result = read.result
            last_text = str(result.get("result") or "") or last_text
            if read.stop is not None:
                return TurnOutcome("stopped", read.stop, last_text)
            if result.get("terminal_reason") == "prompt_too_long":
                await ctx.append(
                    ModelRefused(at=ctx.now(), message=str(result.get("result") or "")[:500])
                )
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
                await self._end_process()
                message = await self._window_start(ctx, forced=True)
                continue
            if read.window or self.window_pending:
                await self._end_process()
                message = await self._window_start(ctx, forced=False)
                continue
            if result.get("is_error"):
                errors = result.get("errors") or []
                reason = str(result.get("result") or "; ".join(map(str, errors)) or "")
                detail = f"Claude Code ended the turn with {result.get('subtype')}"
                detail += f" ({result.get('terminal_reason')}): {reason}"[:500]
                await ctx.append(SystemLine(at=ctx.now(), code="engine-error", text=detail))
                return TurnOutcome("failed", detail, last_text)
            return TurnOutcome("completed", "", last_text)
        return TurnOutcome(
            "failed", f"{MAX_RESTARTS_PER_TURN} Claude sessions started in one turn", last_text
        )

    # -- what to send -------------------------------------------------------------------

    def _opening(self, ctx: TurnContext) -> str:
        """The turn's user line: the messages logged since the CLI last saw the view. An
        engine without a session over a view with history (a daemon restart) starts a fresh
        session with the view rendered as a window."""
        view = ctx.view
        if self.process is None and self.next_start == "first" and _has_history(view):
            self.next_start = "fresh"
            return self._window_message(ctx)
        texts = [
            e.event.text
            for e in view.entries
            if e.seq > self.sent_upto and isinstance(e.event, UserMessage)
        ]
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
        self.window_pending = False
        self.next_start = self._fork_or_fresh(forced=forced)
        return self._window_message(ctx)

    # -- the process ----------------------------------------------------------------------

    def _command(self, binary: str, start: Start, new_session: str | None) -> list[str]:
        args = [
            binary,
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            parse_model(self.spec.model).name,
            "--permission-mode",
            permission_mode(self.spec.permissions),
        ]
        if self.spec.tools:
            args += ["--allowedTools", ",".join(self.spec.tools)]
        if self.spec.persona:
            args += ["--append-system-prompt", self.spec.persona]
        if start == "resume":
            args += ["--resume", self.session_id]
        elif start == "fork":
            assert self.root_safe_uuid is not None
            args += [
                "--resume",
                self.root_session_id,
                "--fork-session",
                f"--resume-session-at={self.root_safe_uuid}",
            ]
        if new_session is not None:
            args += ["--session-id", new_session]
        return args

    def _environment(self) -> dict[str, str]:
        # The child inherits the daemon's environment (PATH, HOME, locale) less Condensate's
        # own settings and anything that would make it believe it runs inside Claude Code.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CONDENSATE_") and k not in ("CLAUDECODE", "ANTHROPIC_AUTH_TOKEN")
        }
        env.update(
            {
                "CLAUDE_CONFIG_DIR": str(self.config_dir),
                "ANTHROPIC_BASE_URL": self.env.anthropic_base_url,
                "ANTHROPIC_API_KEY": self.env.anthropic_api_key,
                "DISABLE_AUTO_COMPACT": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "IS_SANDBOX": "1",
            }
        )
        return env

    async def _start(self, ctx: TurnContext) -> None:
        binary = resolve_binary(self.env.claude_binary)
        version = await asyncio.to_thread(check_version, binary)
        start = self.next_start
        if start == "resume" and not self.session_id:
            start = "fresh"
        if start == "fork" and self.root_safe_uuid is None:
            start = "fresh"
        new_session = None if start == "resume" else str(uuid.uuid4())
        self.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        command = self._command(binary, start, new_session)
        with (self.config_dir / "stderr.log").open("ab") as stderr:
            self.process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=self.spec.cwd,
                env=self._environment(),
                limit=LINE_LIMIT,
            )
        previous = self.session_id or None
        if new_session is not None:
            self.session_id = new_session
            self.measured = False
        if start in ("first", "fresh"):
            self.root_session_id = self.session_id
            self.root_first_message = ""
            self.root_safe_uuid = None
        self.calls.clear()
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

    async def _end_process(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            await _stop(process)

    async def _write(self, data: dict[str, Any]) -> None:
        assert self.process is not None
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.process.stdin.write((json.dumps(data) + "\n").encode())
            await self.process.stdin.drain()

    async def _send_user(self, text: str) -> None:
        await self._write(
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "parent_tool_use_id": None,
                "session_id": self.session_id,
            }
        )

    async def _interrupt(self) -> None:
        self._requests += 1
        await self._write(
            {
                "type": "control_request",
                "request_id": f"condensate_{self._requests}_{uuid.uuid4().hex[:8]}",
                "request": {"subtype": "interrupt"},
            }
        )

    def _stderr_tail(self) -> str:
        path = self.config_dir / "stderr.log"
        if not path.exists():
            return "no stderr"
        tail = path.read_bytes()[-400:].decode(errors="replace").strip()
        return f"stderr: {tail}" if tail else "no stderr"

    # -- reading a turn -------------------------------------------------------------------

    async def _read_turn(self, ctx: TurnContext) -> _Read:
        process = self.process
        assert process is not None
        assert process.stdout is not None
        window = False
        stop: str | None = None
        while True:
            raw = await process.stdout.readline()
            if not raw:
                await self._flush(ctx)
                returncode = await process.wait()
                return _Read("exited", window=window, stop=stop, returncode=returncode)
            try:
                line = json.loads(raw)
            except ValueError:
                log.info("claude_plain_line", thread=ctx.thread_id, line=raw[:300].decode())
                continue
            if not isinstance(line, dict):
                continue
            kind = line.get("type")
            if kind == "system" and line.get("subtype") == "init":
                await self._init(ctx, line)
            elif kind == "assistant" and line.get("parent_tool_use_id") is None:
                await self._assistant(ctx, line)
            elif kind == "user" and line.get("parent_tool_use_id") is None:
                if not await self._tool_results(ctx, line) or window or stop is not None:
                    continue
                if self.window_pending:
                    window = True
                    await self._interrupt()
                    continue
                check = await ctx.checkpoint()
                if check.stop is not None:
                    stop = check.stop
                    await self._interrupt()
                elif check.window is not None:
                    window = True
                    await self._interrupt()
            elif kind == "result":
                await self._flush(ctx)
                return _Read("result", result=line, window=window, stop=stop)

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

    async def _assistant(self, ctx: TurnContext, line: dict[str, Any]) -> None:
        message = line.get("message") or {}
        if line.get("error") or message.get("model") == "<synthetic>":
            return  # an API error shown as a reply (the result carries it) or a local note
        message_id = str(message.get("id") or line.get("uuid") or "")
        if self.pending is not None and self.pending.message_id != message_id:
            await self._flush(ctx)
        if self.root_session_id == self.session_id:
            if not self.root_first_message:
                self.root_first_message = message_id
            blocks = message.get("content") or []
            if (
                self.root_safe_uuid is None
                and message_id == self.root_first_message
                and any(isinstance(b, dict) and b.get("type") == "text" for b in blocks)
                and not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)
            ):
                self.root_safe_uuid = str(line.get("uuid") or "") or None
        if self.pending is None:
            self.pending = _Pending(
                message_id, str(message.get("model") or ""), dict(message.get("usage") or {})
            )
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            match block.get("type"):
                case "text":
                    self.pending.text.append(str(block.get("text") or ""))
                case "thinking":
                    self.pending.thinking.append(
                        ThinkingBlock(
                            text=str(block.get("thinking") or ""),
                            signature=str(block.get("signature") or ""),
                        )
                    )
                case "tool_use":
                    call = ToolCall(
                        id=str(block.get("id")),
                        name=str(block.get("name")),
                        arguments=dict(block.get("input") or {}),
                    )
                    self.pending.calls.append(call)
                case _:
                    pass

    async def _flush(self, ctx: TurnContext) -> None:
        """Log the reply gathered so far: its usage once per message id, then the reply."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        events: list[Event] = []
        if pending.message_id not in self.usage_logged:
            self.usage_logged.add(pending.message_id)
            usage = pending.usage
            events.append(
                ModelUsage(
                    at=ctx.now(),
                    input=int(usage.get("input_tokens") or 0),
                    cache_read=int(usage.get("cache_read_input_tokens") or 0),
                    cache_write=int(usage.get("cache_creation_input_tokens") or 0),
                    output=int(usage.get("output_tokens") or 0),
                    model=pending.model,
                    message_id=pending.message_id,
                )
            )
            self.measured = True
        if pending.text or pending.thinking or pending.calls:
            events.append(
                AssistantMessage(
                    at=ctx.now(),
                    text="\n\n".join(t for t in pending.text if t),
                    thinking=tuple(pending.thinking),
                    tool_calls=tuple(pending.calls),
                    message_id=pending.message_id,
                )
            )
        for call in pending.calls:
            self.calls[call.id] = call
            self.open_calls[call.id] = call
        await ctx.append(events)

    async def _tool_results(self, ctx: TurnContext, line: dict[str, Any]) -> bool:
        """Log a user line's tool results; says whether it had any."""
        content = (line.get("message") or {}).get("content")
        if not isinstance(content, list):
            return False
        blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if not blocks:
            return False
        await self._flush(ctx)
        events: list[Event] = []
        for block in blocks:
            call_id = str(block.get("tool_use_id"))
            if call_id not in self.open_calls:
                continue  # its call was never logged (a synthetic result of a resumed session)
            call = self.open_calls.pop(call_id)
            events.append(
                ToolResult(
                    at=ctx.now(),
                    call_id=call_id,
                    tool=call.name,
                    argument=_argument(call.arguments),
                    output=_output(block.get("content")),
                    is_error=bool(block.get("is_error")),
                )
            )
        if events:
            await ctx.append(events)
        return bool(events)

    async def _close_open_calls(self, ctx: TurnContext, why: str) -> None:
        """Every logged call gets its result, even when the process died before giving one."""
        await self._flush(ctx)
        calls, self.open_calls = self.open_calls, {}
        if calls:
            await ctx.append(
                [
                    ToolResult(
                        at=ctx.now(),
                        call_id=call.id,
                        tool=call.name,
                        argument=_argument(call.arguments),
                        output=f"Interrupted: {why} before this call finished; it may have run "
                        "in part. Check its effect before relying on it.",
                        is_error=True,
                    )
                    for call in calls.values()
                ]
            )


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close stdin and let the CLI flush its transcript; then SIGTERM, then SIGKILL."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, RuntimeError):
            process.stdin.close()
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None:
            with contextlib.suppress(ProcessLookupError):
                signal_it()
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_SECONDS)
        except TimeoutError:
            continue
        return


def _has_history(view: Projection) -> bool:
    return any(isinstance(e.event, AssistantMessage) for e in view.entries)


def _argument(arguments: dict[str, Any]) -> str:
    for key in ARGUMENT_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value if len(value) <= 200 else value[:197] + "..."
    return ""


def _output(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type')}]")
            else:
                parts.append(str(block))
        return "\n".join(parts)
    return json.dumps(content)
