"""What ``GET /threads/:id/tail`` answers: a page of the log, each event as the log stores
it with its seq and its tokens beside its fields. Pure.

Each kind of event is its own closed shape (a ``Logged...`` model: the event's class in
``condensate.events`` with ``seq`` and ``tokens``), and an event is one of them by its
``kind``. So the document says what every kind carries, schemathesis checks every event a
tail sends, and a client reads each one typed. The tail sends events upcast to their current
version, which these shapes describe. Two kinds have a ``tokens`` field of their own (the
baseline's size, a refusal's count): their tail entry sends that one in place of the event's
count, as the tail always has.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field

from condensate import events
from condensate.api.answer import Answer


class _Logged(BaseModel):
    """Where an event stands in its thread's log."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    seq: int
    tokens: int
    """What the event adds to a view that shows it, counted once when it was appended."""


class LoggedThreadCreated(events.ThreadCreated, _Logged): ...


class LoggedBaselineMeasured(events.BaselineMeasured, _Logged): ...


class LoggedTurnStarted(events.TurnStarted, _Logged): ...


class LoggedTurnEnded(events.TurnEnded, _Logged): ...


class LoggedUserMessage(events.UserMessage, _Logged): ...


class LoggedAssistantMessage(events.AssistantMessage, _Logged): ...


class LoggedToolResult(events.ToolResult, _Logged): ...


class LoggedModelUsage(events.ModelUsage, _Logged): ...


class LoggedModelRefused(events.ModelRefused, _Logged): ...


class LoggedWindow(events.Window, _Logged): ...


class LoggedAskOpened(events.AskOpened, _Logged): ...


class LoggedAskAnswered(events.AskAnswered, _Logged): ...


class LoggedCompactionRequested(events.CompactionRequested, _Logged): ...


class LoggedApprovalRequested(events.ApprovalRequested, _Logged): ...


class LoggedApprovalAnswered(events.ApprovalAnswered, _Logged): ...


class LoggedChildSpawned(events.ChildSpawned, _Logged): ...


class LoggedChildJoined(events.ChildJoined, _Logged): ...


class LoggedEngineNotice(events.EngineNotice, _Logged): ...


class LoggedSystemLine(events.SystemLine, _Logged): ...


class LoggedResetRequested(events.ResetRequested, _Logged): ...


class LoggedResetCommitted(events.ResetCommitted, _Logged): ...


class LoggedEmergencyReset(events.EmergencyReset, _Logged): ...


class LoggedResetWarned(events.ResetWarned, _Logged): ...


class LoggedMessagePinned(events.MessagePinned, _Logged): ...


class LoggedSnapshotTaken(events.SnapshotTaken, _Logged): ...


LoggedEvent = Annotated[
    LoggedThreadCreated
    | LoggedBaselineMeasured
    | LoggedTurnStarted
    | LoggedTurnEnded
    | LoggedUserMessage
    | LoggedAssistantMessage
    | LoggedToolResult
    | LoggedModelUsage
    | LoggedModelRefused
    | LoggedWindow
    | LoggedAskOpened
    | LoggedAskAnswered
    | LoggedCompactionRequested
    | LoggedApprovalRequested
    | LoggedApprovalAnswered
    | LoggedChildSpawned
    | LoggedChildJoined
    | LoggedEngineNotice
    | LoggedSystemLine
    | LoggedResetRequested
    | LoggedResetCommitted
    | LoggedEmergencyReset
    | LoggedResetWarned
    | LoggedMessagePinned
    | LoggedSnapshotTaken,
    Field(discriminator="kind"),
]
"""An event of the tail, by its kind."""

LOGGED: dict[str, type[_Logged]] = {
    shape.model_fields["kind"].default: shape for shape in get_args(get_args(LoggedEvent)[0])
}
"""Each kind with its logged shape (``condensate.events.EVENT_TYPES``, with seq and tokens)."""


def logged(stored: events.Stored) -> dict[str, Any]:
    """A stored event's fields as its tail entry holds them, for ``TailPage`` to validate
    (in pydantic's core: as fast as dumping the event was). An event with a ``tokens``
    field of its own (``baseline.measured``, ``model.refused``) keeps that one."""
    return {"seq": stored.seq, "tokens": stored.tokens, **vars(stored.event)}


class TailPage(Answer):
    """A page of the log: read on after ``nextAfter`` while ``hasMore``."""

    events: list[LoggedEvent]
    next_after: int = Field(alias="nextAfter")
    has_more: bool = Field(alias="hasMore")
