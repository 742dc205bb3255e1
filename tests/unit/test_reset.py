"""The agent-chosen reset (``condensate.core.reset`` and the projector's fold of it): the rules of
a ``condense`` call, and the exact view after a committed reset, rebuilt from the log."""

from __future__ import annotations

from condensate.core import context_tools, reset
from condensate.core.messages import Text, ToolOutput, ToolUse
from condensate.core.projector import project, snapshot
from condensate.core.prompt import to_messages
from condensate.events import (
    AssistantMessage,
    EmergencyReset,
    ModelUsage,
    ResetCommitted,
    ToolCall,
    UserMessage,
)
from condensate.testing.threads import ThreadBuilder

NOTE = "Read notes/release.md. Tests passed; next, review the diff."


def condense(call_id: str = "c9", message: str | None = NOTE) -> ToolCall:
    arguments = {} if message is None else {context_tools.MESSAGE: message}
    return ToolCall(id=call_id, name=reset.TOOL, arguments=arguments)


def worked(b: ThreadBuilder) -> None:
    """A brief, a steer, and some tool work: the history a reset clears."""
    b.user("fix the release", 30)
    b.call("read", "notes.md", 500)
    b.reply("read it", 20)
    b.user("also bump the version", 20)


def condensed(b: ThreadBuilder, call: ToolCall, *, arrived: tuple[str, ...] = ()) -> int:
    """The agent's condense reply (its request held everything so far), user input that
    arrived while the request ran, then the reset batch. The boundary."""
    boundary = b.seq
    b.add(AssistantMessage(at=b.tick(), text="saving done", tool_calls=(call,)), 30)
    for text in arrived:
        b.user(text, 10)
    for event in reset.reset_events(call, boundary, b.tick()):
        b.add(event, 40)
    return boundary


def test_a_lone_condense_call_with_a_short_message_is_valid() -> None:
    """condense alone in its response, with or without a message, is valid."""
    assert reset.problem(condense(), [condense()]) is None
    assert reset.problem(condense(message=None), [condense(message=None)]) is None


def test_condense_beside_another_call_resets_nothing() -> None:
    """condense must be the only call of its response; the refusal names the others."""
    other = ToolCall(id="c1", name="shell", arguments={"command": "ls"})
    why = reset.problem(condense(), [other, condense()])
    assert why is not None
    assert "only tool call" in why
    assert "shell" in why


def test_the_message_limit_counts_utf16_code_units() -> None:
    """16,384 UTF-16 code units fit and one more does not; a character outside the BMP
    counts twice."""
    assert reset.utf16_units("a😀") == 3
    fits = "x" * (context_tools.MAX_MESSAGE_UNITS - 2) + "😀"
    assert reset.problem(condense(message=fits), [condense(message=fits)]) is None
    over = "x" * (context_tools.MAX_MESSAGE_UNITS - 1) + "😀"
    why = reset.problem(condense(message=over), [condense(message=over)])
    assert why is not None
    assert "16,385" in why


def test_the_recovery_text_carries_the_message_only_when_given() -> None:
    """The result holds the recovery instructions, and the message verbatim when there is
    one (no message heading otherwise)."""
    assert reset.recovery(None) == reset.RECOVERY
    assert reset.MESSAGE_HEADING not in reset.recovery(None)
    with_note = reset.recovery("  two\nlines  ")
    assert with_note.startswith(reset.RECOVERY)
    assert with_note.endswith(f"{reset.MESSAGE_HEADING}\n  two\nlines  ")


def test_a_committed_reset_starts_the_view_with_notice_call_result_and_later_input() -> None:
    """After the reset the view is exactly: the notice, the agent's own condense message
    (its id and arguments), the call's result, and the user messages logged after the
    request that produced the call, in order; the brief and everything else are gone."""
    b = ThreadBuilder()
    worked(b)
    boundary = condensed(b, condense(), arrived=("one more thing", "and another"))
    view = b.view
    roles = [e.role for e in view.entries]
    assert roles == ["notice", "assistant", "tool", "user", "user"]
    notice, call, result, *later = view.entries
    assert isinstance(notice.event, ResetCommitted)
    assert isinstance(call.event, AssistantMessage)
    assert call.event.tool_calls == (condense(),)
    assert result.call_id == "c9"
    assert [e.event.text for e in later if isinstance(e.event, UserMessage)] == [
        "one more thing",
        "and another",
    ]
    assert all(e.seq > boundary for e in later)
    assert view.resets == 1
    assert view.anchor is None


def test_the_reset_view_reaches_the_provider_in_that_order() -> None:
    """As provider messages: the notice as user text, the assistant's condense call, then the
    call's result with the message and the later user input after it."""
    b = ThreadBuilder()
    worked(b)
    condensed(b, condense(), arrived=("one more thing",))
    first, second, third = to_messages(b.view)
    assert (first.role, first.content) == ("user", (Text(reset.NOTICE),))
    assert second.role == "assistant"
    assert second.content[-1] == ToolUse("c9", reset.TOOL, {context_tools.MESSAGE: NOTE})
    assert third.role == "user"
    output, steer = third.content
    assert isinstance(output, ToolOutput)
    assert (output.call_id, output.output) == ("c9", reset.recovery(NOTE))
    assert steer == Text("one more thing")


def test_input_after_the_reset_follows_it_and_a_second_reset_starts_over() -> None:
    """A message logged after the commit is appended to the new view; a second reset clears
    the first one's exchange too and counts a second cycle."""
    b = ThreadBuilder()
    worked(b)
    condensed(b, condense("c1"))
    b.user("next task", 10)
    b.reply("on it", 10)
    condensed(b, condense("c2", message=None))
    view = b.view
    assert [e.role for e in view.entries] == ["notice", "assistant", "tool"]
    assert view.entries[1].event is not None
    assert isinstance(view.entries[1].event, AssistantMessage)
    assert view.entries[1].event.tool_calls[0].id == "c2"
    assert view.resets == 2


def test_a_commit_for_another_call_resets_nothing() -> None:
    """A committed record must name the requested call: one that does not (or has no
    request before it) leaves the view as it was."""
    b = ThreadBuilder()
    worked(b)
    before = [e.seq for e in b.view.entries]
    b.add(ResetCommitted(at=b.tick(), call_id="nobody", boundary=1), 0)
    assert [e.seq for e in b.view.entries] == before
    assert b.view.resets == 0


def test_a_reset_view_is_rebuilt_from_the_log_and_a_snapshot_exactly() -> None:
    """A full replay and a snapshot taken after the reset both give the same view."""
    b = ThreadBuilder()
    worked(b)
    condensed(b, condense(), arrived=("one more thing",))
    b.user("after", 10)
    replayed = project(b.log)
    restored = snapshot.load(snapshot.dump(b.view))
    assert [(e.seq, e.role) for e in replayed.entries] == [(e.seq, e.role) for e in b.view.entries]
    assert restored.entries == b.view.entries
    assert restored.resets == replayed.resets == 1


def test_an_emergency_reset_blocks_another_until_a_main_model_response_succeeds() -> None:
    """After an emergency reset the view is the summary and the later input; the block holds
    through new input, a side call's count and a restart (snapshot or full replay), and a
    main-model count lifts it."""
    b = ThreadBuilder()
    worked(b)
    boundary = b.seq
    b.user("arrived during it", 10)
    b.add(EmergencyReset(at=b.tick(), summary="S", boundary=boundary, model="m", attempts=1), 5)
    assert [e.role for e in b.view.entries] == ["summary", "user"]
    assert b.view.emergency_blocked
    b.user("new input", 10)
    b.add(ModelUsage(at=b.tick(), input=5, side=True), 0)
    assert b.view.emergency_blocked
    assert project(b.log).emergency_blocked
    assert snapshot.load(snapshot.dump(b.view)).emergency_blocked
    b.usage()
    assert not b.view.emergency_blocked
