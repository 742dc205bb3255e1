"""What a summary must keep word for word, and when the planner takes one (spec: "When a
window is taken", "Reduction strategies"; design.md §5): the verbatim record's error cap, the
summary estimate that counts the record, and no second summary before a model call."""

from __future__ import annotations

from condensate.core.meter import ContextUsage, ModelWindow, measure
from condensate.core.planner import Cut, Decision, HoldBack, PlannerSettings, Stop, plan
from condensate.core.probes import Item, verbatim_items, with_verbatim_record, within_bound
from condensate.core.projector import PAUSE_CODE
from condensate.core.summary import replaced_entries
from condensate.core.tiers import (
    VERBATIM_ERROR_CHARS,
    VERBATIM_FAILURES_CHARS,
    VERBATIM_HEADING,
    TierSettings,
    cheap_clearing,
    failure_share,
    summary_cut,
    verbatim_error,
)
from condensate.core.tokens import estimate
from condensate.events import EngineNotice, UserMessage, Window
from condensate.testing.threads import ThreadBuilder
from tests.profiles import shaped

WINDOW = 200_000  # api: ceiling 80,000, line 71,808
SETTINGS = PlannerSettings()
CAPPED = estimate("x" * VERBATIM_ERROR_CHARS)
"""The most a failed call's error adds to a summary's verbatim record."""


def usage(b: ThreadBuilder) -> ContextUsage:
    return measure(b.view, ModelWindow(WINDOW, True), shaped(b.view.engine).ceilings)


def decide(b: ThreadBuilder) -> Decision:
    """The planner's decision, with the settings the thread's engine is planned with."""
    return plan(b.view, usage(b), shaped(b.view.engine, planner=SETTINGS).planner, b.clock)


def take(
    b: ThreadBuilder, decision: Decision, summary: str = "summary", tokens: int = 2_000
) -> Window:
    """Carry a cut out the way the runtime does: append its window event."""
    assert isinstance(decision, Cut)
    author = decision.author or ("curator" if decision.kind == "summary" else None)
    text = summary if decision.needs_curator else None
    event = decision.window(b.seq, b.tick(), summary=text, author=author)
    b.add(event, tokens if event.summary else 0)
    return event


def fill_to(b: ThreadBuilder, target: int) -> None:
    """Add assistant notes (no model call counted) until the next prompt is at least
    ``target`` tokens."""
    while usage(b).used < target:
        b.reply("notes", 400)


def summarized(b: ThreadBuilder) -> Window:
    """A thread over the line, counted once, then cut by Condensate's own summary."""
    b.turn("brief", 100)
    fill_to(b, 75_000)
    b.usage()
    decision = decide(b)
    assert isinstance(decision, Cut)
    assert decision.kind == "summary"
    event = take(b, decision)
    assert usage(b).used <= usage(b).line
    return event


# -- verbatim_error ------------------------------------------------------------------------------


def test_verbatim_error_keeps_a_short_error_whole():
    """An error text up to VERBATIM_ERROR_CHARS is kept exactly as it is."""
    output = "Traceback (most recent call last):\n" + "e" * (VERBATIM_ERROR_CHARS - 40)
    assert len(output) <= VERBATIM_ERROR_CHARS
    assert verbatim_error(output, 7) == output


def test_verbatim_error_at_exactly_the_cap_is_whole():
    """An error of exactly VERBATIM_ERROR_CHARS characters is not cut."""
    output = "z" * VERBATIM_ERROR_CHARS
    assert verbatim_error(output, 7) == output


def test_verbatim_error_keeps_head_and_tail_of_a_long_error():
    """A long error keeps its first and last VERBATIM_ERROR_CHARS // 2 characters, with a
    note naming the seq and how many characters were cut between them."""
    half = VERBATIM_ERROR_CHARS // 2
    head, middle, tail = "H" * half, "m" * 10_000, "T" * half
    kept = verbatim_error(head + middle + tail, 42)
    first, note, last = kept.split("\n")
    assert first == head
    assert last == tail
    assert "10000 characters cut" in note
    assert "seq 42" in note
    assert "m" not in kept.replace(note, "")


def test_verbatim_error_cut_counts_the_dropped_characters_exactly():
    """One character over the cap drops exactly one character."""
    output = "a" * (VERBATIM_ERROR_CHARS // 2) + "b" + "c" * (VERBATIM_ERROR_CHARS // 2)
    kept = verbatim_error(output, 3)
    assert "[... 1 characters cut here; the log keeps them at seq 3]" in kept
    assert "b" not in kept.split("\n")[0] + kept.split("\n")[2]


# -- verbatim_items and the record ---------------------------------------------------------------


def test_verbatim_items_keep_human_messages_whole_and_failures_capped():
    """A human message is an item word for word however long; a failed call's error goes
    through verbatim_error; successful results and the model's own words are no items."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    long_steer = "please keep the public API stable " * 500
    b.user(long_steer, 3_000)
    b.call("read", "ok.py", 500, output="all fine")
    error = "E" * 3_000 + "middle of a huge failing run" + "F" * 5_000
    _, failed = b.call("shell", "pytest -x", 4_000, error=True, output=error)
    b.reply("I will fix it", 40)
    b.user("now this", 10)  # the current task: it stays in the view, no item
    items = verbatim_items(replaced_entries(b.view, None))
    assert items == [
        f'Human: "{long_steer}"',
        f"Failed shell(pytest -x):\n{verbatim_error(error, failed.seq)}",
    ]
    assert "middle of a huge failing run" not in items[1]
    assert len(items[1]) < len(error)


def test_verbatim_items_skip_messages_from_the_runtime_or_a_parent():
    """Only human messages are kept word for word, not the runtime's or a parent's."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.add(UserMessage(at=b.tick(), text="runtime note", author="runtime"), 20)
    b.add(UserMessage(at=b.tick(), text="parent says", author="parent"), 20)
    b.user("human says", 20)
    b.user("now this", 10)  # the current task: it stays in the view, no item
    assert verbatim_items(replaced_entries(b.view, None)) == ['Human: "human says"']


def test_verbatim_record_appends_only_what_the_summary_left_out():
    """The record under VERBATIM_HEADING holds each item the model did not copy (neither
    the item nor its body appears in the text)."""
    items = ['Human: "use sqlite"', 'Human: "no new deps"', "Failed shell(make):\nboom"]
    text = with_verbatim_record("The human said: use sqlite. make failed: boom", items)
    head, _, record = text.partition(f"\n\n{VERBATIM_HEADING}\n")
    assert head == "The human said: use sqlite. make failed: boom"
    assert record == 'Human: "no new deps"'


def test_verbatim_record_is_not_added_when_nothing_is_missing():
    """A summary that copied every item comes back unchanged."""
    text = 'Human: "use sqlite"'
    assert with_verbatim_record(text, ['Human: "use sqlite"']) == text


def test_an_earlier_summarys_record_is_carried_into_the_next():
    """The items of an earlier summary's verbatim record are items again when that summary
    is itself summarized."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    record = with_verbatim_record("notes", ['Human: "keep it"', "Failed shell(make):\nboom"])
    fill_to(b, 75_000)
    take(b, decide(b), summary=record)
    b.user("later", 20)
    b.user("now this", 10)  # the current task: it stays in the view, no item
    assert verbatim_items(replaced_entries(b.view, None)) == [
        'Human: "keep it"',
        "Failed shell(make):\nboom",
        'Human: "later"',
    ]


# -- SummaryCut.verbatim -------------------------------------------------------------------------


def test_summary_cut_counts_replaced_human_messages():
    """Human messages the summary replaces count whole toward its verbatim part; the brief
    (which stays) and the model's words do not."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.user("one", 700)
    b.reply("thinking", 5_000)
    b.user("two", 300)
    b.user("now this", 10)  # the current task stays: it counts for nothing
    cut = summary_cut(b.view, 0, None)
    assert cut is not None
    assert cut.keep_from is None
    assert cut.verbatim == 700 + 300


def test_summary_cut_does_not_count_kept_human_messages():
    """A human message in the kept range is not part of the summary's verbatim record."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.user("replaced", 700)
    b.reply("thinking", 5_000)
    kept = b.user("kept", 300)
    cut = summary_cut(b.view, 300, None)
    assert cut is not None
    assert cut.keep_from == kept.seq
    assert cut.verbatim == 700


def test_summary_cut_does_not_count_pinned_or_other_authors():
    """Pinned messages stay (they are not replaced) and runtime or parent messages are not
    kept word for word: neither counts."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.user("pinned", 900, pinned=True)
    b.add(UserMessage(at=b.tick(), text="runtime", author="runtime"), 800)
    b.add(UserMessage(at=b.tick(), text="parent", author="parent"), 700)
    b.reply("thinking", 2_000)
    cut = summary_cut(b.view, 0, None)
    assert cut is not None
    assert cut.verbatim == 0


def test_summary_cut_counts_failures_but_not_successes():
    """A failed call's error counts toward the verbatim part; a successful result of the
    same size does not."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.call("shell", "make", 1_500, error=True)
    b.call("shell", "make", 1_500)
    cut = summary_cut(b.view, 0, None)
    assert cut is not None
    assert cut.verbatim == 1_500


def test_summary_cut_caps_each_failure_at_the_verbatim_error_size():
    """A failure larger than the verbatim cap counts as the capped text, not its size."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.call("shell", "pytest", 20_000, error=True)
    cut = summary_cut(b.view, 0, None)
    assert cut is not None
    assert cut.verbatim == CAPPED
    assert cut.verbatim < 20_000


def test_summary_cut_bounds_all_failures_together():
    """Ten failures a summary replaces share the failures' bound: their word-for-word part
    counts that much, however large each error was."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(10):
        b.call("shell", "pytest", 20_000, error=True)
    cut = summary_cut(b.view, 0, None)
    assert cut is not None
    assert cut.verbatim == estimate("x" * VERBATIM_FAILURES_CHARS)


def test_summary_cut_counts_an_earlier_summarys_record_by_its_text():
    """An earlier summary adds the estimate of its record (the text after
    VERBATIM_HEADING), not its whole size; one without a record adds nothing."""
    record = 'Human: "keep it"\n\nFailed shell(make):\n' + "boom " * 400
    text = f"what happened so far\n\n{VERBATIM_HEADING}\n{record}"
    b = ThreadBuilder()
    b.turn("brief", 100)
    fill_to(b, 75_000)
    take(b, decide(b), summary=text, tokens=10_000)
    b.reply("later", 400)
    cut = summary_cut(b.view, 0, None)
    assert cut is not None
    assert cut.verbatim == estimate(record)

    plain = ThreadBuilder()
    plain.turn("brief", 100)
    fill_to(plain, 75_000)
    take(plain, decide(plain), summary="what happened so far", tokens=10_000)
    plain.reply("later", 400)
    cut = summary_cut(plain.view, 0, None)
    assert cut is not None
    assert cut.verbatim == 0


# -- the summary estimate in the planner ---------------------------------------------------------


def failing_view(error: bool) -> ThreadBuilder:
    """Thirty large results of a control tool (no cheap tier clears one), failed or not,
    then notes that fill the kept tail: just over the line."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for i in range(30):
        b.call("recall", f"q{i}", 2_100, error=error)
    for _ in range(25):
        b.reply("notes", 400)
    assert usage(b).line < usage(b).used <= usage(b).limit
    return b


def test_failures_in_the_replaced_range_cost_a_summary_their_bound():
    """The summary must carry every failed call's error, each within its share: it is
    planned to free that much less than over the same results succeeding."""
    view = failing_view(error=True)
    failed = decide(view)
    passed = decide(failing_view(error=False))
    assert isinstance(failed, Cut)
    assert isinstance(passed, Cut)
    assert failed.keep_from is not None
    replaced = [e for e in view.view.entries if e.role == "tool" and e.seq < failed.keep_from]
    n = len(replaced)
    assert n > 12  # more failures than the shared bound divides into: each keeps the floor
    assert passed.freed - failed.freed == estimate("x" * n * failure_share(n))


def test_the_same_results_succeeding_leave_room_for_a_summary():
    """Successful results of the same size are summarized away: a summary is taken."""
    d = decide(failing_view(error=False))
    assert isinstance(d, Cut)
    assert d.kind == "summary"
    assert d.needs_curator


def human_view(author: str) -> ThreadBuilder:
    b = ThreadBuilder()
    b.turn("brief", 100)
    for i in range(20):
        if author == "human":
            b.user(f"long paste {i}", 3_000)
        else:
            b.reply(f"long notes {i}", 3_000)
    for _ in range(25):
        b.reply("notes", 400)
    assert usage(b).line < usage(b).used <= usage(b).limit
    return b


def test_long_human_messages_in_the_replaced_range_can_make_a_summary_too_large():
    """Human messages are kept whole in the summary: many long ones leave no summary worth
    taking (under the ceiling the prompt goes on uncut, the reason said)."""
    d = decide(human_view("human"))
    assert isinstance(d, HoldBack)
    assert d.detail.startswith("even a summary leaves")


def test_the_same_sizes_from_the_assistant_are_summarized():
    """The assistant's own words of the same sizes are not kept word for word: a summary
    is taken."""
    d = decide(human_view("assistant"))
    assert isinstance(d, Cut)
    assert d.kind == "summary"


# -- no second summary before a model call -------------------------------------------------------


def test_right_after_a_summary_a_prompt_still_over_the_line_is_held_back():
    """With no model call counted since Condensate's own summary, a prompt over the line
    again is held back with a pause line, not summarized a second time."""
    b = ThreadBuilder()
    summarized(b)
    fill_to(b, 75_000)
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert d.why == "paused"
    assert "summary was just taken" in d.detail
    assert d.line is not None
    assert d.line[0] == PAUSE_CODE


def test_right_after_a_summary_a_prompt_over_the_ceiling_stops():
    """With no model call counted since the summary, a prompt over the ceiling stops the
    turn, naming the ceiling."""
    b = ThreadBuilder()
    summarized(b)
    fill_to(b, 81_000)
    u = usage(b)
    assert u.used > u.limit
    d = decide(b)
    assert isinstance(d, Stop)
    assert "summary was just taken" in d.reason
    assert str(u.limit) in d.reason


def test_right_after_a_drop_a_prompt_over_the_line_is_held_back():
    """A drop (a summary the curator missed) counts as a summary just taken."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    fill_to(b, 75_000)
    b.usage()
    d = decide(b)
    assert isinstance(d, Cut)
    take(b, d.as_drop())
    fill_to(b, 75_000)
    held = decide(b)
    assert isinstance(held, HoldBack)
    assert "summary was just taken" in held.detail


def test_once_a_model_call_is_counted_a_summary_is_taken_again():
    """A model call counted after the summary lifts the rule: the ladder's summary is
    taken."""
    b = ThreadBuilder()
    summarized(b)
    fill_to(b, 75_000)
    assert isinstance(decide(b), HoldBack)
    b.usage()
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"


def test_once_a_model_call_is_counted_a_prompt_over_the_ceiling_is_summarized():
    """Over the ceiling, too, a counted call lets the summary through instead of a stop."""
    b = ThreadBuilder()
    summarized(b)
    fill_to(b, 81_000)
    assert isinstance(decide(b), Stop)
    b.usage()
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"


def test_a_requested_summary_does_not_hold_the_next_one_back():
    """After a summary someone asked for, a prompt over the line gets Condensate's own
    summary with no model call in between."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.request("summary", summary="asked for")
    asked = decide(b)
    assert isinstance(asked, Cut)
    assert asked.request is not None
    take(b, asked, tokens=500)
    assert b.view.windows[-1].requested
    fill_to(b, 75_000)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"
    assert d.request is None


def test_huge_failures_count_only_their_capped_error_toward_the_summary():
    """Failures far above the verbatim cap count as their capped text: a summary that keeps
    three 20,000-token failures word for word is still taken."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for i in range(3):
        b.call("recall", f"q{i}", 20_000, error=True)
    for _ in range(25):
        b.reply("notes", 400)
    assert usage(b).used > usage(b).line
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"


def test_verbatim_items_keep_every_failure_its_head_and_tail_within_its_share():
    """Every failed call stays in the record (the spec: keep every failed call with its error
    text): six errors of 4,027 characters share VERBATIM_FAILURES_CHARS, each its head and
    tail with a note of the cut and the seq that holds it whole; every human message stays
    whole."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    errors = [f"Error number {i}\n" + "x" * 4_000 + f"\nlast line {i}" for i in range(6)]
    seqs = []
    for i, error in enumerate(errors):
        _, result = b.call("shell", f"pytest -k t{i}", 2_000, error=True, output=error)
        seqs.append(result.seq)
        b.user(f"steer {i}", 10)
    b.user("now this", 10)  # the current task: it stays in the view, no item
    items = verbatim_items(replaced_entries(b.view, None))
    failures = [item for item in items if item.startswith("Failed ")]
    assert [item for item in items if item.startswith("Human: ")] == [
        f'Human: "steer {i}"' for i in range(6)
    ]
    share = failure_share(6)
    assert share == VERBATIM_FAILURES_CHARS // 6
    assert len(failures) == 6
    for i, failure in enumerate(failures):
        call, _, kept = failure.partition(":\n")
        assert call == f"Failed shell(pytest -k t{i})"
        assert kept.startswith(f"Error number {i}\n")
        assert kept.endswith(f"last line {i}")
        cut = len(errors[i]) - 2 * (share // 2)
        assert f"[... {cut} characters cut here; the log keeps them at seq {seqs[i]}]" in kept
        assert len(kept) <= share + 100


def test_a_failure_an_earlier_summary_kept_is_cut_again_naming_its_seq():
    """A failure carried from an earlier summary's record, cut again to a smaller share,
    still names the seq its first cut named."""
    earlier = (
        "Failed shell(x):\n"
        + "a" * 3_000
        + "\n[... 9 characters cut here; the log keeps them at seq 42]\n"
        + "b" * 3_000
    )
    items = [Item(earlier, None)] + [
        Item(f"Failed shell(y{i}):\n" + "c" * 5_000, i + 100) for i in range(9)
    ]
    kept = within_bound(items)
    assert "the log keeps them at seq 42]" in kept[0].text
    assert len(kept) == 10


def test_cheap_tiers_leave_what_a_cli_session_started_with_alone():
    """On a CLI engine, results logged before the latest session that started with a rendered
    window (session-fresh, session-forked) are text inside that session's first message: no
    cheap tier clears them (no receipt could reach the provider), later ones it may."""
    b = ThreadBuilder(engine="claude")
    b.turn("brief", 100)
    before = [b.call("read", f"old{i}.py", 3_000)[1] for i in range(4)]
    b.add(EngineNotice(at=b.tick(), engine="claude", notice="session-fresh", detail="pid=1"), 0)
    after = [b.call("read", f"new{i}.py", 3_000)[1] for i in range(TierSettings().keep_pairs + 5)]
    cleared = cheap_clearing(b.view, "microcompact", TierSettings(), None).cleared
    assert cleared
    assert not set(cleared) & {s.seq for s in before}
    assert set(cleared) <= {s.seq for s in after}
