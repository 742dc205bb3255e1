"""What a view holds: its entries (each event as the model sees it, with what a tier or a
clamp did to it), the anchor and window records, a requested compaction, and the notices that
stand where a drop took messages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from condensate.core import clamps, paging, receipts
from condensate.events import (
    AssistantMessage,
    CompactionMode,
    Event,
    ToolCall,
    ToolResult,
    UserMessage,
    Window,
)

Role = Literal["user", "assistant", "tool", "summary", "notice"]

DROP_NOTICE = (
    "[Condensate dropped the earlier part of this conversation without a summary: the prompt "
    "reached the model's hard limit and no summary could be written in time. The brief, your "
    "latest instruction and pinned messages are kept; before relying on anything else from "
    "before this point, reread any file you need.]"
)
SLIDE_NOTICE = (
    "[Condensate dropped the messages before seq {keep_from} without a summary: none could be "
    "written in time and the prompt would have passed its ceiling. The brief, your latest "
    "instruction and pinned messages are kept; recall(seq=N) brings back any earlier one.]"
)
PAUSE_CODE = "window-paused"
CANNOT_HELP_CODE = "windows-cannot-help"


@dataclass(slots=True)
class Entry:
    """One item of the model-facing history. A cleared tool result keeps only its receipt."""

    seq: int
    role: Role
    tokens: int
    full_tokens: int
    event: Event | None
    batch: int = 0
    """For a tool result, the seq of the assistant message that made the call."""
    receipt: str | None = None
    category: receipts.Category | None = None
    call_id: str = ""
    """For a tool result, the call it answers (kept when the result is cleared)."""
    paged: int | None = None
    """For a tool result over the thread's output cap, the characters the view shows."""
    read_key: str | None = None
    """For a re-readable result, what it read (its tool and its call's arguments): a later
    result of the same key supersedes it."""
    clamped: int | None = None
    """The thread's clamp in characters, when a text, an output or an argument of this
    entry is longer: the view shows its head and tail (``clamps``)."""

    def shown_output(self) -> str:
        """A tool result's output as the view shows it: its first page when it is paged,
        its head and tail when it is clamped."""
        assert isinstance(self.event, ToolResult)
        if self.paged is not None:
            return paging.shown(self.event.output, self.paged, self.seq)
        if self.clamped is not None:
            return clamps.clamp(self.event.output, self.clamped, self.seq)
        return self.event.output

    def shown_text(self) -> str:
        """A user or an assistant message's text as the view shows it."""
        assert isinstance(self.event, UserMessage | AssistantMessage)
        if self.clamped is None:
            return self.event.text
        return clamps.clamp(self.event.text, self.clamped, self.seq)

    def shown_calls(self) -> tuple[ToolCall, ...]:
        """An assistant message's calls as the view shows them (long arguments clamped)."""
        assert isinstance(self.event, AssistantMessage)
        cap = self.clamped
        if cap is None:
            return self.event.tool_calls
        return tuple(
            c.model_copy(update={"arguments": clamps.clamp_value(c.arguments, cap, self.seq)})
            if clamps.has_long_string(c.arguments, cap)
            else c
            for c in self.event.tool_calls
        )


@dataclass(slots=True)
class Anchor:
    """The provider's count of the last prompt, and the local size of the view it measured."""

    seq: int
    count: int
    view_tokens: int


@dataclass(slots=True)
class WindowRecord:
    seq: int
    call: int
    """How many model calls the thread had made when the window was taken."""
    at: datetime
    kind: str
    forced: bool
    used: int
    freed: int
    requested: bool = False
    """Asked for (by the thread, an operator or an ask), not planned by Condensate."""


@dataclass(slots=True)
class Requested:
    """A compaction the thread or an operator asked for (queued, or an answer to an ask)."""

    seq: int
    mode: CompactionMode
    by: Literal["thread", "operator"]
    summary: str | None
    keep_from: int | None
    ask_id: str | None


def drop_notice(window: Window) -> str:
    """What stands where a drop took the earlier messages: a forced drop's notice (the model's
    hard limit), or the sliding window's one line (the summary did not arrive)."""
    if window.forced or window.keep_from is None:
        return DROP_NOTICE
    return SLIDE_NOTICE.format(keep_from=window.keep_from)
