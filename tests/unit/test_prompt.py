"""The view as provider messages (prompt.to_messages)."""

from __future__ import annotations

from condensate.core.messages import Text, ToolOutput, ToolUse
from condensate.core.projector import snapshot
from condensate.core.prompt import to_messages
from condensate.events import Window, WindowTrigger
from condensate.testing.threads import ThreadBuilder

TRIGGER = WindowTrigger(used=1, line=1, ceiling=1, window=1, freed=0, reason="test")


def fresh(b: ThreadBuilder):
    """The messages of a copy of the view that has never been converted before."""
    return to_messages(snapshot.load(snapshot.dump(b.view)))


def test_a_batch_and_its_results_alternate_roles():
    """Calls go in an assistant message and their results in the next user message, a steer
    that arrived mid-batch after the results."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.batch([("read", "a.py", 500, False, None), ("read", "b.py", 500, False, None)])
    b.user("a steer", 20)
    messages = to_messages(b.view)
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert isinstance(messages[1].content[0], ToolUse)
    kinds = [type(block) for block in messages[2].content]
    assert kinds == [ToolOutput, ToolOutput, Text]


def test_receipts_answer_their_calls():
    """A cleared result is sent as a tool result carrying its receipt, paired with its call."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, result = b.call("read", "a.py", 1_000)
    b.add(
        Window(
            at=b.tick(),
            window_kind="microcompact",
            cut=b.seq,
            cleared=(result.seq,),
            trigger=TRIGGER,
        ),
        0,
    )
    output = to_messages(b.view)[2].content[0]
    assert isinstance(output, ToolOutput)
    assert output.call_id.startswith("call_")
    assert "receipt" in output.output


def test_incremental_conversion_equals_a_fresh_one_across_windows():
    """Converting as the view grows (and after windows) gives what a fresh conversion gives."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for round_ in range(4):
        for i in range(5):
            b.call("read", f"f{round_}{i}.py", 800)
            assert to_messages(b.view) == fresh(b)
        b.user(f"steer {round_}", 20)
        assert to_messages(b.view) == fresh(b)
        keep = b.turn("keep", 30)
        b.add(
            Window(
                at=b.tick(),
                window_kind="summary",
                cut=b.seq,
                keep_from=keep.seq,
                summary=f"summary {round_}",
                author="curator",
                trigger=TRIGGER,
            ),
            50,
        )
        assert to_messages(b.view) == fresh(b)
