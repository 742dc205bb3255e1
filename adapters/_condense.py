"""An agent-reset CLI thread's ``condense`` call, settled when its CLI logs the result.

The call reaches Condensate through its MCP server, which answers the recovery text when the
message is valid (``tool_answers.condense_answer``); the rest of the rule (the call alone in
its response) needs the response, which the CLI logs with the result. So the engine settles
the call there, the way the native loop does (``reset.answer``): the CLI's result is
replaced by the reset's events, written in the same batch, or by an error result and nothing
reset. The gateway shows the provider the result the log holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from condensate.core import reset
from condensate.core.context_tools import CONDENSE
from condensate.core.projector import Projection
from condensate.core.receipts import bare_tool
from condensate.engine import ThreadSpec
from condensate.events import AssistantMessage, Event, ToolCall, ToolResult


def settled(
    events: Sequence[Event], view: Projection, spec: ThreadSpec, boundary: int, at: datetime
) -> list[Event]:
    """``events`` with each successful ``condense`` result of an agent-reset thread settled
    by ``reset.answer``; ``boundary`` is the last seq the CLI had been given. A result the MCP
    server already refused stays as it is."""
    if spec.reset is None:
        return list(events)
    out: list[Event] = []
    for event in events:
        if not (
            isinstance(event, ToolResult)
            and bare_tool(event.tool) == CONDENSE
            and not event.is_error
        ):
            out.append(event)
            continue
        found = _response_of(event.call_id, events, view)
        if found is None:
            out.append(event)  # its call was never logged: nothing to reset to
            continue
        call, calls = found
        out += reset.answer(call, calls, boundary, at)
    return out


def _response_of(
    call_id: str, events: Sequence[Event], view: Projection
) -> tuple[ToolCall, tuple[ToolCall, ...]] | None:
    """The call ``call_id`` and every call of its response: in the batch, else in the view."""
    messages = [e for e in events if isinstance(e, AssistantMessage)]
    messages += [e.event for e in reversed(view.entries) if isinstance(e.event, AssistantMessage)]
    for message in messages:
        for call in message.tool_calls:
            if call.id == call_id:
                return call, message.tool_calls
    return None
