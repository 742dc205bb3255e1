"""Questions the runtime and the engines ask of a thread's view: its open tool calls, its last
reply, its spec, the human messages since a point, and whether one still waits for an answer.
Pure: no I/O."""

from __future__ import annotations

from condensate.core.projector import Projection
from condensate.events import AssistantMessage, UserMessage


def unanswered_input(view: Projection) -> bool:
    """A human message arrived after the last model reply of the turn that just ended."""
    for entry in reversed(view.entries):
        if entry.role == "assistant":
            return False
        if entry.role == "user" and entry.seq != view.brief_seq:
            return True
    return False


def untaken_input(view: Projection) -> bool:
    """A brief or message was acknowledged after the latest turn started and after the last
    reply, so no turn has read it: a kill between the 201/202 and the turn's start leaves
    one. A steer the running turn answered before it ended is followed by that reply."""
    if view.turn_open:
        return False
    for entry in reversed(view.entries):
        if entry.seq <= view.turn_started_seq or entry.role == "assistant":
            return False
        if entry.role == "user":
            return True
    return False


def open_calls(view: Projection) -> list[tuple[str, str]]:
    """(call id, tool) of every call in the view that has no result yet."""
    answered = {e.call_id for e in view.entries if e.role == "tool"}
    calls: list[tuple[str, str]] = []
    for entry in view.entries:
        if isinstance(entry.event, AssistantMessage):
            calls += [(c.id, c.name) for c in entry.event.tool_calls if c.id not in answered]
    return calls


def human_since(view: Projection, seq: int) -> list[str]:
    """The texts of the human messages in the view after ``seq``, oldest first; read from the
    end, so asking often costs only what arrived since."""
    texts: list[str] = []
    for entry in reversed(view.entries):
        if entry.seq <= seq:
            break
        if isinstance(entry.event, UserMessage):
            texts.append(entry.event.text)
    return texts[::-1]


def has_history(view: Projection) -> bool:
    """The model has replied at least once in the view."""
    return any(isinstance(e.event, AssistantMessage) for e in view.entries)


def last_text(view: Projection) -> str:
    """The text of the latest assistant reply that has any: a child's answer to its parent."""
    for entry in reversed(view.entries):
        if isinstance(entry.event, AssistantMessage) and entry.event.text:
            return entry.event.text
    return ""
