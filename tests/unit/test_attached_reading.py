"""A person's session reads each request's conversation for the log (``attached``): what it
shares with the last request heard is not read again, and what it logs is what a fresh read
of the whole conversation gives."""

from __future__ import annotations

from datetime import UTC, datetime

from condensate.core.messages import Message, Text, ToolOutput, ToolUse
from condensate.events import ToolResult
from condensate.runtime.attached import Heard, events_of, placed_for

AT = datetime(2026, 12, 5, tzinfo=UTC)


def conversation(steps: int, output: str = "ok") -> list[tuple[int, Message]]:
    """A person's message, then ``steps`` calls each followed by its result."""
    messages = [Message("user", (Text("count the files"),))]
    for i in range(steps):
        messages.append(Message("assistant", (ToolUse(f"c{i}", "Bash", {"command": f"ls {i}"}),)))
        messages.append(Message("user", (ToolOutput(f"c{i}", f"{output} {i}"),)))
    return list(enumerate(messages))


def keys(heard: Heard) -> list[str]:
    return [p.key for p in heard.placed]


def test_a_conversation_that_goes_on_reuses_the_shared_events_and_reads_the_rest() -> None:
    """The second request adds a call in one message and its result in the next: the events
    are a fresh read's (the result named by its call), and the shared ones are the same
    objects the first read made."""
    first = placed_for(conversation(3)[:-1], AT, Heard())
    second = placed_for(conversation(3), AT, first)
    assert keys(second) == [p.key for p in events_of(conversation(3), AT)]
    assert all(a is b for a, b in zip(first.placed, second.placed, strict=False))
    result = second.placed[-1].event
    assert isinstance(result, ToolResult)
    assert (result.tool, result.argument) == ("Bash", "ls 2")


def test_a_conversation_changed_in_an_earlier_message_is_read_again_from_there() -> None:
    """A result edited in the middle (the CLI's own rewrite): the events from that message on
    are read again and equal a fresh read's; the ones before it are reused."""
    first = placed_for(conversation(4), AT, Heard())
    edited = conversation(4)
    edited[4] = (4, Message("user", (ToolOutput("c1", "changed"),)))
    second = placed_for(edited, AT, first)
    assert keys(second) == [p.key for p in events_of(edited, AT)]
    assert keys(second) != keys(first)
    assert second.placed[0] is first.placed[0]
    assert second.placed[4] is not first.placed[4]


def test_a_shorter_conversation_keeps_only_the_events_of_what_it_holds() -> None:
    """A request with fewer messages than the last (a side request, a rewind): its events are
    those of its own messages alone."""
    first = placed_for(conversation(4), AT, Heard())
    shorter = placed_for(conversation(2), AT, first)
    assert keys(shorter) == [p.key for p in events_of(conversation(2), AT)]
