"""The view as provider messages, for the native loop. Pure.

Entries map to blocks: user text, assistant text, thinking and tool calls, tool results (a
cleared one carries its receipt), the summary and the drop notice as user text. Consecutive
blocks of one role merge into one message, so a batch's results travel together in the user
message right after the calls, as the Messages API requires.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from condensate.core import reset
from condensate.core.messages import Block, Message, Text, Thinking, ToolOutput, ToolUse
from condensate.core.projector import Entry, Projection, drop_notice
from condensate.events import (
    AssistantMessage,
    EmergencyReset,
    ResetCommitted,
    ResetWarned,
    ToolResult,
    UserMessage,
    Window,
)

SUMMARY_OPEN = "<summary>"
SUMMARY_CLOSE = "</summary>"


def _blocks(entry: Entry) -> tuple[str, list[Block]]:
    event = entry.event
    if entry.role == "tool":
        if entry.receipt is not None:
            return "user", [ToolOutput(entry.call_id, entry.receipt)]
        assert isinstance(event, ToolResult)
        return "user", [ToolOutput(event.call_id, entry.shown_output(), event.is_error)]
    match event:
        case UserMessage():
            return "user", [Text(entry.shown_text())]
        case AssistantMessage():
            blocks: list[Block] = [Thinking(t.text, t.signature) for t in event.thinking]
            if event.text:
                blocks.append(Text(entry.shown_text()))
            blocks += [ToolUse(c.id, c.name, c.arguments) for c in entry.shown_calls()]
            return "assistant", blocks
        case Window(window_kind="summary", summary=summary):
            text = (
                "Condensate replaced the earlier part of this conversation with this summary:\n"
                f"{SUMMARY_OPEN}\n{summary or ''}\n{SUMMARY_CLOSE}"
            )
            return "user", [Text(text)]
        case Window():
            return "user", [Text(drop_notice(event))]
        case ResetCommitted():
            return "user", [Text(reset.NOTICE)]
        case ResetWarned(text=text):
            return "user", [Text(text)]
        case EmergencyReset(summary=summary):
            return "user", [Text(reset.EMERGENCY_NOTICE), Text(summary)]
        case _:
            return "user", []


@dataclass
class _Converted:
    """The messages of ``entries[:count]`` while the view's layout stays ``layout``."""

    layout: int
    count: int
    messages: list[Message]


def to_messages(view: Projection) -> list[Message]:
    """The history part of the next prompt (the baseline goes in ``system`` and ``tools``).

    Between windows the view only grows, so the messages are kept on the view and extended
    by the new entries: a call costs what was appended since the last one, not the view."""
    memo = view.memo
    if not isinstance(memo, _Converted) or memo.layout != view.layout:
        memo = _Converted(view.layout, 0, [])
    messages = memo.messages
    for entry in view.entries[memo.count :]:
        role, blocks = _blocks(entry)
        if not blocks:
            continue
        if messages and messages[-1].role == role:
            messages[-1] = Message(role, _merge(messages[-1].content, blocks))
        else:
            messages.append(Message(role, tuple(blocks)))  # type: ignore[arg-type]
    memo.count = len(view.entries)
    view.memo = memo
    return list(messages)


def shared_through(previous: Sequence[Message], now: Sequence[Message]) -> int | None:
    """The last message ``now`` shares with ``previous`` (compared by value), or None when
    they share none: where the provider's cache of the previous request ends in this one."""
    shared = 0
    for before, after in zip(previous, now, strict=False):
        if before != after:
            break
        shared += 1
    return shared - 1 if shared else None


def with_notice(messages: list[Message], text: str) -> list[Message]:
    """``messages`` with ``text`` as user text at the end, as ``to_messages`` will render a
    notice entry logged after them (merged into a last user message), so that the history
    of the next request is what this one sent."""
    if messages and messages[-1].role == "user":
        return [*messages[:-1], Message("user", _merge(messages[-1].content, [Text(text)]))]
    return [*messages, Message("user", (Text(text),))]


def _merge(first: tuple[Block, ...], second: list[Block]) -> tuple[Block, ...]:
    """Tool outputs first: the Messages API wants a batch's results before any text."""
    blocks = [*first, *second]
    outputs = [b for b in blocks if isinstance(b, ToolOutput)]
    others = [b for b in blocks if not isinstance(b, ToolOutput)]
    return (*outputs, *others)
