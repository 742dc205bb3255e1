"""What the agent's context tools (``context_tools``) answer, read from its thread's view and
log: the native loop asks through its turn's context, a CLI thread's MCP server through the
daemon (``POST /threads/:id/tools/:name``), so both get the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from condensate.api import INT64_MAX
from condensate.core import clamps, paging, reset
from condensate.core.context_tools import CONDENSE, RECALL
from condensate.core.meter import ContextUsage
from condensate.core.projector import Projection, pinnable
from condensate.core.staged_warnings import budget_of
from condensate.engine import ThreadSpec
from condensate.errors import EventNotFound
from condensate.events import (
    AssistantMessage,
    MessagePinned,
    Stored,
    ToolCall,
    ToolResult,
    UserMessage,
)


class ThreadReader(Protocol):
    """What the answers read: the thread's view, its usage, and its log."""

    @property
    def view(self) -> Projection: ...

    def usage(self) -> ContextUsage: ...

    async def read(self, seq: int) -> Stored:
        """The thread's event at ``seq`` (``EventNotFound`` when none)."""
        ...


async def read_back(ctx: ThreadReader, name: str, args: Mapping[str, Any]) -> tuple[str, bool]:
    """``recall(seq)``: the original of an earlier message or result; ``read_tool_output(ref,
    offset, length)``: a page of a result's output. Read from the log, so that what a window
    cleared or a reset let go is there too; a large one comes a page at a time. The text,
    and whether it is an error."""
    raw = args.get("seq") if name == RECALL else args.get("ref")
    missing = f"There is no event {str(raw)[:40]!r} in this thread's log to read.", True
    try:
        seq = int(str(raw)) if len(str(raw)) <= 20 else 0
        if not 1 <= seq <= INT64_MAX:
            return missing
        stored = await ctx.read(seq)
    except (ValueError, EventNotFound):
        return missing
    event = stored.event
    if isinstance(event, ToolResult):
        text = event.output
    elif isinstance(event, UserMessage):
        text = event.text
    elif isinstance(event, AssistantMessage):
        text = clamps.readable(event.text, [(c.id, c.name, c.arguments) for c in event.tool_calls])
    else:
        return f"Seq {seq} is a {event.kind} event, not a message or a tool result.", True
    size = paging.page_chars(ctx.view.output_cap)
    offset = args.get("offset", 0)
    length = args.get("length", size)
    if not _natural(offset) or not _natural(length) or length < 1:
        return "offset must be an integer of at least 0 and length one of at least 1.", True
    if name == RECALL and len(text) <= size:
        return text, False
    return paging.page(text, offset, min(length, paging.MAX_PAGE_CHARS), seq), False


def usage_answer(ctx: ThreadReader, spec: ThreadSpec) -> dict[str, Any]:
    """``context_usage``'s answer: the next prompt against the line, the ceiling and the
    window; for an agent-reset thread, against its warning budget too."""
    usage = ctx.usage()
    view = ctx.view
    answer: dict[str, Any] = {
        **usage.as_json(),
        "pendingAsk": None if view.ask is None else view.ask.ask_id,
    }
    if spec.reset is not None:
        budget = budget_of(spec.reset, usage)
        answer["budget"] = budget
        answer["ofBudget"] = None if not budget else round(usage.used / budget, 4)
        answer["warnings"] = list(spec.reset.warnings)
        answer["resets"] = view.resets
    return answer


def condense_answer(spec: ThreadSpec, arguments: Mapping[str, Any]) -> tuple[str, bool]:
    """A CLI agent's ``condense`` call, as its MCP server asks: the recovery text when its
    message is valid, else why nothing is reset. The call's response is not in the log yet
    (the CLI logs it with the result), so the rule that the call be alone in it is the
    engine's, when the result is logged (``reset.answer``); the gateway then shows the
    provider the result the log holds."""
    if spec.reset is None:
        return (
            "This thread is not in agent-reset mode: Condensate manages its context, and "
            "condense resets nothing.",
            True,
        )
    call = ToolCall(id="", name=CONDENSE, arguments=dict(arguments))
    why = reset.problem(call, [call])
    if why is not None:
        return why, True
    return reset.recovery(reset.message_of(arguments)), False


def _natural(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def pin_answer(
    view: Projection, arguments: Mapping[str, Any], by: PinnedBy, at: datetime
) -> PinAnswer:
    """``pin(seq)``: the event that pins the message, or why it cannot be pinned."""
    raw = arguments.get("seq")
    if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= INT64_MAX:
        return PinAnswer(f"seq must be the seq of a message, not {str(raw)[:40]!r}.", None)
    if raw in view.protected_seqs:
        return PinAnswer(f"Seq {raw} is kept through every window already.", None, done=True)
    why = pinnable(view, raw)
    if why is not None:
        return PinAnswer(why, None)
    event = MessagePinned(at=at, pinned=raw, by=by)
    return PinAnswer(f"Pinned seq {raw}: it survives every window from now on.", event)


PinnedBy = Literal["operator", "thread"]


@dataclass(frozen=True)
class PinAnswer:
    """What ``pin`` says, and the event to log (None: nothing to pin)."""

    text: str
    event: MessagePinned | None
    done: bool = False
    """Already kept: not an error."""

    @property
    def failed(self) -> bool:
        return self.event is None and not self.done
