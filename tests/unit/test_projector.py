"""The projector: events fold into the view; window records apply as design.md §4 says."""

from __future__ import annotations

import pytest

from condensate.core.projector import DROP_NOTICE, pinnable, project, snapshot
from condensate.core.render import render_window
from condensate.events import MessagePinned, Window, WindowTrigger
from condensate.testing.threads import ThreadBuilder

TRIGGER = WindowTrigger(used=1, line=1, ceiling=1, window=1, freed=0, reason="test")


def window(b: ThreadBuilder, kind, **fields) -> Window:
    event = Window(at=b.tick(), window_kind=kind, cut=b.seq, trigger=TRIGGER, **fields)
    b.add(event, 300 if fields.get("summary") else 0)
    return event


def test_messages_and_results_become_entries_in_order():
    """User, assistant and tool events become view entries in log order, and the view's
    tokens are their sum."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.call("read", "a.py", 1_000)
    b.reply("done", 40)
    assert [e.role for e in b.view.entries] == ["user", "assistant", "tool", "assistant"]
    assert b.view.view_tokens == 100 + 30 + 1_000 + 40
    assert b.view.brief_seq == b.view.entries[0].seq


def test_bookkeeping_events_stay_out_of_the_view():
    """Usage, turns, asks and system lines are not shown to the model."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.usage()
    b.line("note")
    b.ask()
    assert [e.role for e in b.view.entries] == ["user"]


def test_microcompact_turns_named_results_into_receipts():
    """A microcompact record replaces each named result by its receipt and frees its tokens."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, result = b.call("read", "a.py", 1_000)
    before = b.view.view_tokens
    window(b, "microcompact", cleared=(result.seq,))
    entry = b.view.entries[b.view.position(result.seq)]  # type: ignore[index]
    assert entry.event is None
    assert entry.receipt is not None
    assert "read(a.py)" in entry.receipt
    assert b.view.view_tokens < before - 900
    assert b.view.tiers_since_summary == ["microcompact"]


def test_collapse_receipts_say_how_an_action_ended():
    """A collapsed command's receipt says whether it failed or completed."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, failed = b.call("shell", "pytest", 1_000, error=True)
    _, passed = b.call("shell", "make", 1_000)
    window(b, "collapse", cleared=(failed.seq, passed.seq))
    receipts = [e.receipt for e in b.view.entries if e.receipt]
    assert "failed" in receipts[0]
    assert "completed" in receipts[1]


def test_summary_replaces_the_older_part_and_keeps_brief_and_pins():
    """A summary record replaces everything before keep_from with one summary, but the brief
    and pinned messages stay, verbatim and in order."""
    b = ThreadBuilder()
    b.turn("the brief", 100)
    b.call("read", "a.py", 1_000)
    pin = b.turn("a pinned rule", 20, pinned=True)
    b.call("read", "b.py", 1_000)
    keep = b.turn("latest steer", 30)
    b.call("shell", "make", 500)
    window(b, "summary", keep_from=keep.seq, summary="what happened", author="curator")
    roles = [e.role for e in b.view.entries]
    assert roles == ["user", "user", "summary", "user", "assistant", "tool"]
    assert b.view.entries[1].seq == pin.seq
    assert b.view.entries[3].seq == keep.seq
    assert b.view.tiers_since_summary == []


def test_a_new_summary_replaces_the_previous_one():
    """A later summary covers the earlier summary; only one summary stands in the view."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.call("read", "a.py", 1_000)
    k1 = b.turn("one", 30)
    window(b, "summary", keep_from=k1.seq, summary="first", author="curator")
    b.call("read", "b.py", 1_000)
    k2 = b.turn("two", 30)
    window(b, "summary", keep_from=k2.seq, summary="second", author="curator")
    summaries = [e for e in b.view.entries if e.role == "summary"]
    assert len(summaries) == 1
    assert summaries[0].event.summary == "second"  # type: ignore[union-attr]


def test_drop_leaves_a_notice_that_asks_to_reread():
    """A forced drop removes the older part without a summary and tells the model to reread
    the brief, the latest steer and any file."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.call("read", "a.py", 1_000)
    window(b, "drop", author="system", forced=True)
    assert [e.role for e in b.view.entries] == ["user", "notice"]
    text = render_window(b.view)
    assert DROP_NOTICE in text
    for word in ("brief", "latest instruction", "pinned", "file"):
        assert word in DROP_NOTICE


def test_snapshot_then_replay_equals_full_replay():
    """The view after snapshot + replay equals the view after a full replay."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.call("read", "a.py", 1_000)
    b.usage()
    middle = len(b.log)
    saved = snapshot.dump(b.view)
    _, r = b.call("read", "b.py", 1_000)
    window(b, "microcompact", cleared=(r.seq,))
    k = b.turn("steer", 30)
    window(b, "summary", keep_from=k.seq, summary="s", author="curator")
    b.spawn("c1")
    resumed = snapshot.load(saved).apply_all(b.log[middle:])
    assert resumed == project(b.log)
    assert render_window(resumed) == render_window(b.view)


def test_snapshot_round_trips_after_windows():
    """A snapshot taken after windows restores the same state."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, r = b.call("read", "a.py", 1_000)
    window(b, "collapse", cleared=(r.seq,))
    b.ask()
    b.request("microcompact")
    assert snapshot.load(snapshot.dump(b.view)) == b.view


def test_events_out_of_order_are_refused():
    """Folding an event with a seq at or below the last one is a programming error."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    with pytest.raises(ValueError, match="arrived after"):
        b.view.apply(b.log[0])


def test_child_spawn_protects_from_the_spawning_message_until_joined():
    """An unjoined child's spawn keeps the batch that spawned it protected; a join frees it."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    spawn = b.spawn("c1")
    assert b.view.protect_from == b.view.position(spawn.seq - 2)
    b.join("c1")
    assert b.view.protect_from is None


def test_a_pinned_message_and_the_current_task_survive_a_summary_and_a_drop():
    """A message pinned after the fact (message.pinned) and the latest human message (the
    current task) stay, verbatim and in order, through a summary and a forced drop, as the
    brief does; a pin of a tool result pins nothing."""
    b = ThreadBuilder()
    brief = b.turn("brief", 100)
    b.call("read", "a.py", 1_000)
    decision = b.reply("DECISION: keep the CSV header", 40)
    _, result = b.call("read", "b.py", 1_000)
    task = b.turn("now add --output", 30)
    b.call("read", "c.py", 1_000)
    b.add(MessagePinned(at=b.tick(), pinned=decision.seq), 0)
    b.add(MessagePinned(at=b.tick(), pinned=result.seq), 0)
    assert b.view.protected_seqs == {brief.seq, decision.seq, task.seq}
    window(b, "summary", summary="earlier work", author="curator")
    kept = [e.seq for e in b.view.entries if e.role != "summary"]
    assert kept == [brief.seq, decision.seq, task.seq]
    b.call("read", "d.py", 1_000)
    window(b, "drop", author="system", forced=True)
    assert [e.seq for e in b.view.entries if e.role in ("user", "assistant")] == [
        brief.seq,
        decision.seq,
        task.seq,
    ]


def test_a_seq_past_the_last_event_is_no_event_to_pin():
    """Pinning a seq the thread never had says so, not that a window let it go."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    last = b.view.last_seq
    assert pinnable(b.view, last + 90) == (
        f"Seq {last + 90} is no event of the thread (its events run 1 to {last})."
    )
    assert pinnable(b.view, 0) is not None


def test_a_refusal_holds_for_its_turn_and_a_new_turn_tries_again():
    """A first call refused with a claim far past what the prompt holds forces its turn's
    window; the next turn starts with no refusal standing, so it calls the provider again
    instead of stopping on the old claim."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.refused(tokens=200_001, limit=200_000)
    assert b.view.refusal == 200_001
    b.end("stopped")
    assert b.view.refusal == 200_001
    b.turn("try again", 20)
    assert b.view.refusal is None
