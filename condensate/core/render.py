"""A window rendered as one message, for engines that restart a session with it (Claude Code
starts a fork or a fresh session with it; Codex injects it as historical context). Pure.

The message holds the brief and pins, the summary (or the drop notice), and the kept tail in
order, verbatim, with a receipt standing where each cleared result was.
"""

from __future__ import annotations

import json

from condensate.core import reset
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

OPEN = "<condensate_window>"
CLOSE = "</condensate_window>"
PREAMBLE = (
    "This session continues a conversation whose earlier context Condensate reduced. The "
    "durable log keeps every original; what follows is what you need to go on. Receipts name "
    "results that were cleared: read or run again whatever you need."
)


def render_window(view: Projection) -> str:
    """The whole view as one message, wrapped in ``<condensate_window>`` tags."""
    parts = [OPEN, PREAMBLE]
    parts += [entry_text(entry, view) for entry in view.entries]
    parts.append(CLOSE)
    return "\n\n".join(p for p in parts if p)


def entry_text(entry: Entry, view: Projection) -> str:
    """One entry as the rendered window shows it (a heading, then its text)."""
    if entry.receipt is not None:
        return f"## Cleared tool result\n{entry.receipt}"
    event = entry.event
    match event:
        case UserMessage():
            title = "Brief" if entry.seq == view.brief_seq else f"User (seq {entry.seq})"
            if event.pinned and entry.seq != view.brief_seq:
                title = f"Pinned (seq {entry.seq})"
            return f"## {title}\n{entry.shown_text()}"
        case AssistantMessage():
            lines = [f"## Assistant (seq {entry.seq})"]
            if event.text:
                lines.append(entry.shown_text())
            lines += [
                f"[tool call {call.id}] {call.name} {json.dumps(call.arguments, sort_keys=True)}"
                for call in entry.shown_calls()
            ]
            return "\n".join(lines)
        case ToolResult():
            status = "error" if event.is_error else "result"
            head = f"## Tool {status} {event.call_id}: {event.tool}({event.argument})"
            return f"{head}\n{entry.shown_output()}"
        case Window(window_kind="summary", summary=summary, author=author):
            return f"## Summary of earlier work (by the {author or 'curator'})\n{summary or ''}"
        case Window():
            return f"## Dropped context\n{drop_notice(event)}"
        case ResetCommitted():
            return f"## Notice\n{reset.NOTICE}"
        case ResetWarned(text=text):
            return f"## Notice\n{text}"
        case EmergencyReset(summary=summary):
            return f"## Notice\n{reset.EMERGENCY_NOTICE}\n\n## Summary of earlier work\n{summary}"
        case _:
            return ""
