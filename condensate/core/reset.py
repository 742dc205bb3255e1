"""The agent-chosen reset: the ``condense`` tool, its rules and its texts. Pure: no I/O.

An agent-reset thread (``ResetPolicy``) is never cut by the planner: it is warned instead
(``staged_warnings``). Its agent writes its notes with its own tools, then calls
``condense(message_to_future_self?)``. A valid call (the only call of its response, its
message at most 16,384 UTF-16 code units) resets the view: what follows the fixed context is
the environment's notice, the agent's real call, its result (the recovery instructions, and
the message when one was given), and every genuine user message that arrived after the
request that produced the call. Nothing else is kept: no summary, no prefix. The log keeps
everything, and the view is rebuilt from it exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from condensate.core.context_tools import CONDENSE, MAX_MESSAGE_UNITS, MESSAGE
from condensate.events import Event, ResetCommitted, ResetRequested, ToolCall, ToolResult

TOOL = CONDENSE

NOTICE = "The agent triggered context condensation."
"""The first message of the view after a reset: the environment's, not the human's."""

EMERGENCY_NOTICE = (
    "The environment triggered emergency context condensation after the model provider "
    "returned a context-window error.\nEarlier active history was replaced by the summary "
    "below. Your notes may be incomplete. Take a deep breath, read the summary and your notes, "
    "and check unfinished user requests before continuing. The user may not know this happened."
)
"""The first message of the view after an emergency condensation (the summary follows)."""

RECOVERY = (
    "Context condensation complete: you triggered it, and your earlier conversation history "
    "is gone from your context (Condensate's log keeps it). Take a deep breath, read your "
    "notes, and continue the user's work where you left off. The user may not know this "
    "happened; if your notes are missing or incomplete, look around, or ask the user honestly."
)
MESSAGE_HEADING = "Your message to your future self:"


def utf16_units(text: str) -> int:
    """How many UTF-16 code units ``text`` takes (a character outside the BMP takes two)."""
    return len(text.encode("utf-16-le")) // 2


def message_of(arguments: Mapping[str, Any]) -> str | None:
    """The message to a future self a call carries; None when it carries none."""
    value = arguments.get(MESSAGE)
    return value if isinstance(value, str) and value != "" else None


def problem(call: ToolCall, calls: Sequence[ToolCall]) -> str | None:
    """Why a ``condense`` call resets nothing, or None when it is valid."""
    if len(calls) > 1:
        others = ", ".join(c.name for c in calls if c.id != call.id)
        return (
            "condense must be the only tool call in its response, so that a reset never "
            f"splits a batch of actions; this response also called {others}. Nothing was "
            "reset: let those calls finish, then call condense alone."
        )
    raw = call.arguments.get(MESSAGE)
    if raw is not None and not isinstance(raw, str):
        return f"{MESSAGE} must be a string. Nothing was reset."
    message = message_of(call.arguments)
    if message is not None and (units := utf16_units(message)) > MAX_MESSAGE_UNITS:
        return (
            f"The message to your future self is {units:,} UTF-16 code units; at most "
            f"{MAX_MESSAGE_UNITS:,} fit. Nothing was reset: shorten it (or save it to a file "
            "and point to it), then call condense again."
        )
    return None


def recovery(message: str | None) -> str:
    """The ``condense`` result the agent reads after the reset."""
    if message is None:
        return RECOVERY
    return f"{RECOVERY}\n\n{MESSAGE_HEADING}\n{message}"


def reset_events(call: ToolCall, boundary: int, at: datetime) -> list[Event]:
    """A valid call's events, to be written as one batch: the request, the call's result,
    and the committed record (so that no kill leaves a reset half made)."""
    message = message_of(call.arguments)
    return [
        ResetRequested(at=at, call_id=call.id, message=message, boundary=boundary),
        ToolResult(
            at=at, call_id=call.id, tool=call.name, output=recovery(message), category="control"
        ),
        ResetCommitted(at=at, call_id=call.id, boundary=boundary),
    ]


def answer(call: ToolCall, calls: Sequence[ToolCall], boundary: int, at: datetime) -> list[Event]:
    """A ``condense`` call's events, on any engine: the reset (``reset_events``), or an
    error result and nothing reset. ``calls`` are every call of its response; ``boundary``
    the last seq the request that produced it held."""
    if (why := problem(call, calls)) is not None:
        return [ToolResult(at=at, call_id=call.id, tool=call.name, output=why, is_error=True)]
    return reset_events(call, boundary, at)


NO_EMERGENCY = (
    "the provider refused the prompt as too long for the model's window, and this agent-reset "
    "thread has no emergency condenser (its reset policy names no emergencyModel): nothing "
    "was cut and the history is kept"
)
BLOCKED = (
    "the provider refused the prompt as too long again, and an emergency condensation was "
    "made since the last model response that succeeded: another is not made automatically "
    "(it could only buy more summaries of what does not fit); the history is kept"
)


def fixed_too_large(baseline: int, window: int) -> str:
    """Why no reset can help: the fixed context alone fills the window."""
    return (
        f"the fixed context alone (the system prompt and tool definitions, {baseline:,} tokens) "
        f"fills the model's {window:,}-token window: no condensation of the history can make "
        "the prompt fit; shorten the persona or the tools"
    )


def exhausted(failures: list[str]) -> str:
    """Why the emergency condenser gave up."""
    return (
        f"the emergency condenser failed all {len(failures)} tries ({'; '.join(failures)}); "
        "nothing was cut and the history is kept"
    )
