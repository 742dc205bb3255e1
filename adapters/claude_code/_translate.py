"""Claude Code's stream-json output lines as Condensate log events; pure (no process, no I/O).

A reply arrives one line per content block, each line repeating its API call's usage.
``Replies`` gathers a call's blocks and gives one ``model.usage`` per message id followed by
the ``message.assistant``, and turns each ``tool_result`` into the ``tool.result`` of its
logged call, named by the call's main argument. The engine appends what it is given, in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from condensate.core.receipts import argument_of
from condensate.events import (
    AssistantMessage,
    Event,
    ModelUsage,
    ThinkingBlock,
    ToolCall,
    ToolResult,
)
from condensate.gateway.wire import HELD_MARK

Clock = Callable[[], datetime]


@dataclass
class _Pending:
    """The blocks of one API call's reply, as its lines arrive (one line per block)."""

    message_id: str
    model: str
    usage: dict[str, Any]
    text: list[str] = field(default_factory=list)
    thinking: list[ThinkingBlock] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)


def top_level(line: dict[str, Any]) -> bool:
    """The head's own line; a subagent's lines name the call that started it in
    ``parent_tool_use_id``, keep their own context and are not logged."""
    return line.get("parent_tool_use_id") is None


def unprompted(result: dict[str, Any]) -> bool:
    """A ``result`` of a turn the CLI started by itself, not of a user line it was sent: when a
    background ``Agent`` finishes, claude 2.1.332 prints the subagent's lines, a
    ``task_notification`` and then a whole head turn (``init``, replies, ``result`` with
    ``origin: {"kind": "task-notification"}``), even while no turn of ours is running. A result
    of a user line has no ``origin`` (or ``{"kind": "human"}``)."""
    origin = result.get("origin")
    return isinstance(origin, dict) and origin.get("kind") not in (None, "human")


def reply_of(line: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """An assistant line's message id and message; None for an API error shown as a reply
    (the result carries it), a local note, or the gateway's own reply (the log says why the
    gateway ended the turn)."""
    message = line.get("message") or {}
    if line.get("error") or message.get("model") == "<synthetic>":
        return None
    blocks = message.get("content") or []
    if any(isinstance(b, dict) and str(b.get("text") or "").startswith(HELD_MARK) for b in blocks):
        return None
    return str(message.get("id") or line.get("uuid") or ""), message


def text_without_calls(message: dict[str, Any]) -> bool:
    """The reply has text and no tool call: a safe point to fork a session at."""
    blocks = message.get("content") or []
    return any(isinstance(b, dict) and b.get("type") == "text" for b in blocks) and not any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks
    )


def tool_result_blocks(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A user line's ``tool_result`` blocks (none for a human message)."""
    content = (line.get("message") or {}).get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


class Replies:
    """The top-level replies of a thread's sessions, gathered per API call, and their calls."""

    def __init__(self, *, counts: bool = True) -> None:
        self.pending: _Pending | None = None
        self.calls: dict[str, ToolCall] = {}
        self.open_calls: dict[str, ToolCall] = {}
        """Logged calls still waiting for their result."""
        self.usage_logged: set[str] = set()
        self.counts = counts
        """The CLI's usage snapshots are the calls' counts; off when the gateway logs them."""

    def assistant_line(self, line: dict[str, Any], now: Clock) -> list[Event]:
        """Gather a top-level assistant line; the events of the reply it ends, if it starts
        another. A subagent's line, an API error shown as a reply and a local note give
        nothing and are not gathered."""
        reply = reply_of(line) if top_level(line) else None
        if reply is None:
            return []
        message_id, message = reply
        events = (self.flush(now) or []) if self.starts_another(message_id) else []
        self.gather(message_id, message)
        return events

    def user_line(self, line: dict[str, Any], now: Clock) -> list[Event]:
        """A top-level user line's tool results, after the reply gathered so far (the results
        follow their calls). A human message or a subagent's line gives nothing."""
        blocks = tool_result_blocks(line) if top_level(line) else []
        if not blocks:
            return []
        return [*(self.flush(now) or []), *self.results(blocks, now)]

    def starts_another(self, message_id: str) -> bool:
        """A line of this message ends the reply gathered so far: flush it first."""
        return self.pending is not None and self.pending.message_id != message_id

    def gather(self, message_id: str, message: dict[str, Any]) -> None:
        """Add one assistant line's blocks to the reply it belongs to."""
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

    def flush(self, now: Clock) -> list[Event] | None:
        """The reply gathered so far as events: its usage once per message id, then the reply.
        None when nothing was gathered."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        events: list[Event] = []
        if self.counts and pending.message_id not in self.usage_logged:
            self.usage_logged.add(pending.message_id)
            usage = pending.usage
            events.append(
                ModelUsage(
                    at=now(),
                    input=int(usage.get("input_tokens") or 0),
                    cache_read=int(usage.get("cache_read_input_tokens") or 0),
                    cache_write=int(usage.get("cache_creation_input_tokens") or 0),
                    output=int(usage.get("output_tokens") or 0),
                    model=pending.model,
                    message_id=pending.message_id,
                )
            )
        if pending.text or pending.thinking or pending.calls:
            events.append(
                AssistantMessage(
                    at=now(),
                    text="\n\n".join(t for t in pending.text if t),
                    thinking=tuple(pending.thinking),
                    tool_calls=tuple(pending.calls),
                    message_id=pending.message_id,
                )
            )
        for call in pending.calls:
            self.calls[call.id] = call
            self.open_calls[call.id] = call
        return events

    def results(self, blocks: list[dict[str, Any]], now: Clock) -> list[Event]:
        """Tool result blocks as the results of their logged calls."""
        events: list[Event] = []
        for block in blocks:
            call_id = str(block.get("tool_use_id"))
            if call_id not in self.open_calls:
                continue  # its call was never logged (a synthetic result of a resumed session)
            call = self.open_calls.pop(call_id)
            events.append(
                ToolResult(
                    at=now(),
                    call_id=call_id,
                    tool=call.name,
                    argument=argument_of(call.name, call.arguments),
                    output=_output(block.get("content")),
                    is_error=bool(block.get("is_error")),
                )
            )
        return events

    def interrupted(self, why: str, now: Clock) -> list[Event]:
        """An error result for every logged call still open (the process died before it)."""
        calls, self.open_calls = self.open_calls, {}
        return [
            ToolResult(
                at=now(),
                call_id=call.id,
                tool=call.name,
                argument=argument_of(call.name, call.arguments),
                output=f"Interrupted: {why} before this call finished; it may have run "
                "in part. Check its effect before relying on it.",
                is_error=True,
            )
            for call in calls.values()
        ]


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


def api_retry(line: dict[str, Any]) -> tuple[str, int | None]:
    """A ``system/api_retry`` line (Claude Code retrying a failed API call on its own) as a
    notice's detail, and the HTTP status it retries (None for a connection error).

    claude 2.1.332 prints ``{"type": "system", "subtype": "api_retry", "attempt": 1,
    "max_retries": 10, "retry_delay_ms": 508, "error_status": 401, "error":
    "authentication_failed", ...}`` before each retry."""
    status = line.get("error_status")
    code = int(status) if isinstance(status, int | float) else None
    delay = float(line.get("retry_delay_ms") or 0) / 1000
    detail = (
        f"Claude Code retries a failed API call: attempt {line.get('attempt')} of "
        f"{line.get('max_retries')}, {code if code is not None else 'no status'} "
        f"{line.get('error') or ''}".rstrip()
        + f"; next try in {delay:.1f} s"
    )
    return detail, code
