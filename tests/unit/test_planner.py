"""The planner's rules, one behaviour a test (spec: "When a window is taken", "Reduction
strategies", "Head threads"; design.md §5)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from condensate.core import tiers
from condensate.core.ceilings import CeilingSettings
from condensate.core.meter import ContextUsage, ModelWindow, measure
from condensate.core.planner import (
    Ask,
    Cut,
    HoldBack,
    PlannerSettings,
    Proceed,
    Stop,
    deadline,
    plan,
)
from condensate.core.projector import PAUSE_CODE
from condensate.events import Engine, ToolResult
from condensate.testing.threads import ThreadBuilder
from tests.profiles import shaped

WINDOW = 200_000  # api: ceiling 80,000, line 71,808
SETTINGS = PlannerSettings()


def usage(b: ThreadBuilder, window: int = WINDOW, **caps: int) -> ContextUsage:
    ceilings = shaped(b.view.engine, CeilingSettings(**caps)).ceilings
    return measure(b.view, ModelWindow(window, True), ceilings)


def decide(b: ThreadBuilder, window: int = WINDOW, **caps: int):
    """The planner's decision, with the settings the thread's engine is planned with."""
    return plan(
        b.view, usage(b, window, **caps), shaped(b.view.engine, planner=SETTINGS).planner, b.clock
    )


def take(b: ThreadBuilder, decision, summary: str = "summary of earlier work", tokens=500):
    """Carry a cut out the way the runtime does: append its window event."""
    assert isinstance(decision, Cut)
    author = decision.author or ("curator" if decision.kind == "summary" else None)
    text = summary if decision.needs_curator else None
    event = decision.window(b.seq, b.tick(), summary=text, author=author)
    b.add(event, tokens if event.summary else 0)
    return event


def fill_to(b: ThreadBuilder, target: int) -> None:
    """Add assistant notes until the next prompt is at least ``target`` tokens."""
    while usage(b).used < target:
        b.reply("notes", 400)


def reads(b: ThreadBuilder, n: int, tokens: int = 1_500, tool: str = "read") -> None:
    for i in range(n):
        b.call(tool, f"file{i}.py", tokens)


def test_below_the_line_nothing_happens():
    """A prompt under the line is sent as it is."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 10)
    assert isinstance(decide(b), Proceed)


def test_microcompact_is_tried_first():
    """Over the line, re-readable results are cleared first when that frees enough."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 50)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "microcompact"
    assert d.freed >= 0.1 * d.usage.used
    take(b, d)
    assert usage(b).used <= usage(b).line


def test_microcompact_that_frees_under_ten_percent_hands_on_to_collapse():
    """A cheap tier freeing less than 10 % of the context is passed over."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 3, 1_000)  # little to reread...
    reads(b, 50, 1_500, tool="shell")  # ...much action output
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "collapse"


def test_microcompact_that_leaves_the_prompt_over_hands_on():
    """A cheap tier that frees enough but still lands over the line is passed over."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 10, 1_500)  # frees over 10 %, yet not enough
    reads(b, 50, 1_500, tool="shell")
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "collapse"
    assert d.freed >= d.usage.used - d.usage.line


def test_summary_is_the_last_tier_and_always_taken():
    """When neither cheap tier gets under the line, a summary is taken."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(200):
        b.reply("thinking out loud", 400)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"
    assert d.needs_curator
    take(b, d, tokens=2_000)
    assert usage(b).used <= usage(b).line


def test_a_tier_that_ran_since_the_last_summary_is_not_repeated():
    """After a microcompact, the next window skips microcompact even if it would help."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 50)
    take(b, decide(b))
    reads(b, 50)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "collapse"


def test_a_collapse_is_never_followed_by_microcompact():
    """After a collapse, neither cheap tier runs again before a summary."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 3, 1_000)
    reads(b, 50, 1_500, tool="shell")
    assert decide(b).kind == "collapse"
    take(b, decide(b))
    b.turn("next", 50)
    reads(b, 60)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"


def test_a_summary_resets_the_ladder():
    """After a summary, microcompact may run again."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 50)
    take(b, decide(b))
    for _ in range(200):
        b.reply("notes", 400)
    take(b, decide(b), tokens=2_000)
    for _ in range(4):
        b.turn("go on", 50)
    reads(b, 60)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "microcompact"


EARLY = replace(
    SETTINGS, tiers=replace(SETTINGS.tiers, early_share=0.10, target_share=0.3, keep_pairs=1)
)
"""The departures of issue 15: a cheap window under the line, above 0.3 of it, once it frees
a tenth of it, one recent result kept."""


def decide_early(b: ThreadBuilder):
    return plan(b.view, usage(b), shaped(b.view.engine, planner=EARLY).planner, b.clock)


def choosing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, choosing what a cheap tier clears (a pass over the whole view) fails."""

    def fail(*_: object) -> tiers.Clearing:
        msg = "chose what to clear under the line"
        raise AssertionError(msg)

    monkeypatch.setattr(tiers, "cheap_clearing", fail)


def test_an_early_window_is_taken_once_it_pays_for_itself(monkeypatch: pytest.MonkeyPatch):
    """With early windows set, a collapse is taken under the line once it frees their share
    of the line; after it, what it left (the recent results) could not pay for another, and
    the planner, past the target again, says so without choosing what to clear."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 20)
    line = usage(b).line
    assert 0.3 * line < usage(b).used <= line
    d = decide_early(b)
    assert isinstance(d, Cut)
    assert (d.kind, d.reason) == ("collapse", "collapse: pays for itself")
    assert d.freed >= 0.10 * line
    take(b, d)
    while usage(b).used <= 0.3 * line:
        b.reply("notes", 400)
    choosing_fails(monkeypatch)
    assert isinstance(decide_early(b), Proceed)


def test_under_the_line_the_early_check_reads_only_what_was_appended(
    monkeypatch: pytest.MonkeyPatch,
):
    """Results no cheap tier clears (small ones, failures) fill the prompt past the target:
    every call under the line is planned without choosing what to clear, on a bound kept as
    the view grows."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    choosing_fails(monkeypatch)
    small = SETTINGS.tiers.small_result_tokens - 1
    while usage(b).used < 0.8 * usage(b).line:
        b.call("shell", "pytest -q", small)
        b.call("shell", "pytest -q", 2_000, error=True)
        assert isinstance(decide_early(b), Proceed)


def test_the_bound_holds_a_small_read_once_a_later_one_supersedes_it():
    """A read too small for a cheap tier is still cleared once a later read of the same
    thing supersedes it: what the planner rules a tier out by counts it then (and every
    result a tier might clear once it is older), and no failure, small result of another
    kind, or small read nothing supersedes yet."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    small = SETTINGS.tiers.small_result_tokens - 1
    assert small >= SETTINGS.tiers.dedupe_min_tokens
    _, first = b.call("read", "a.py", small)
    b.call("shell", "make check", 3_000, error=True)
    b.call("shell", "make check", small)
    assert tiers.most_freed(b.view, "microcompact", SETTINGS.tiers) == 0
    b.call("read", "a.py", small)
    reads(b, SETTINGS.tiers.keep_pairs)
    whole = small + SETTINGS.tiers.keep_pairs * 1_500
    for tier in ("microcompact", "collapse"):
        clearing = tiers.cheap_clearing(b.view, tier, SETTINGS.tiers, None)
        assert clearing.cleared == (first.seq,)
        assert tiers.most_freed(b.view, tier, SETTINGS.tiers) == whole >= clearing.freed


def test_cheap_tiers_leave_small_recent_and_control_results():
    """Cheap tiers never clear small results, the ``keep_pairs`` most recent results, the
    latest batch's results (what the model reads next), or memory and control results."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, small = b.call("read", "tiny.py", 100)
    _, control = b.call("recall", "notes", 5_000)
    reads(b, 50)
    pairs = SETTINGS.tiers.keep_pairs
    recent = [b.call("read", f"recent{i}.py", 3_000)[1] for i in range(pairs)]
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "microcompact"
    for kept in (small, control, *recent):
        assert kept.seq not in d.cleared


def test_the_latest_batch_is_never_cleared():
    """Every result of the latest batch stays, however many more than ``keep_pairs``: the
    model has not read them yet."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 50)
    size = SETTINGS.tiers.keep_pairs + 2
    _, *latest = b.batch([("read", f"batch{i}.py", 3_000, False, None) for i in range(size)])
    d = decide(b)
    assert isinstance(d, Cut)
    assert SETTINGS.tiers.keep_pairs < len(latest)
    assert not {r.seq for r in latest} & set(d.cleared)


def test_cheap_tiers_keep_failed_calls():
    """A failed call's error text stays through microcompact and collapse: only a summary,
    which keeps it verbatim, replaces it."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, failed_read = b.call("read", "gone.py", 2_000, error=True)
    _, failed_test = b.call("shell", "pytest", 3_000, error=True)
    reads(b, 3, 1_000)
    reads(b, 50, 1_500, tool="shell")
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "collapse"
    assert failed_read.seq not in d.cleared
    assert failed_test.seq not in d.cleared


def test_microcompact_clears_only_rereadable_results():
    """Microcompact clears reads and searches, not commands or edits."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, command = b.call("shell", "make", 5_000)
    _, edit = b.call("edit", "a.py", 5_000)
    reads(b, 50)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "microcompact"
    assert command.seq not in d.cleared
    assert edit.seq not in d.cleared


def test_summary_keeps_the_recent_part_from_a_safe_boundary():
    """A summary's kept range starts at a user message or the assistant message of a batch,
    and a parallel batch is never split."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for i in range(150):  # small results: no cheap tier can help
        b.batch([("shell", f"a{i}", 150, False, None), ("shell", f"b{i}", 150, False, None)])
        b.reply("ok", 200)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"
    assert d.keep_from is not None
    position = b.view.position(d.keep_from)
    assert position is not None
    assert b.view.entries[position].role in ("user", "assistant")
    batches = {e.batch for e in b.view.entries[position:] if e.role == "tool"}
    assert all(b.view.position(seq) >= position for seq in batches)  # type: ignore[operator]


def test_unjoined_child_keeps_its_spawn_verbatim():
    """A cut never reaches the spawn of a child that has not been joined, nor anything
    after it."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(120):
        b.reply("early notes", 400)
    spawn = b.spawn("c1")
    for _ in range(80):
        b.reply("later notes", 400)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"
    assert d.keep_from is not None
    assert d.keep_from <= spawn.seq - 2  # the spawning assistant message
    take(b, d, tokens=1_000)
    kept = {e.seq for e in b.view.entries}
    assert all(s.seq in kept for s in b.log if s.seq >= spawn.seq - 2 and s.tokens > 0)


def test_unjoined_child_holds_the_window_when_nothing_above_is_worth_cutting():
    """With nothing worth cutting above an unjoined child's spawn, the window waits."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.spawn("c1")
    for _ in range(190):  # over the line, under the ceiling
        b.reply("notes after the spawn", 400)
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert d.why == "child"


def test_a_child_hold_back_never_lets_the_prompt_pass_the_ceiling():
    """Held back by an unjoined child at the ceiling, the turn stops with a reason instead of
    sending a prompt over it."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.spawn("c1")
    for _ in range(200):
        b.reply("notes after the spawn", 400)
    d = decide(b)
    assert isinstance(d, Stop)
    assert "unjoined child" in d.reason
    assert "ceiling" in d.reason


def test_a_joined_child_no_longer_holds_back():
    """Once the child is joined, its spawn can be summarized like anything else."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.spawn("c1")
    for _ in range(200):
        b.reply("notes after the spawn", 400)
    b.join("c1")
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"


def test_forced_window_cuts_through_an_unjoined_child():
    """A refusal cuts anyway, even above an unjoined child's spawn."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.spawn("c1")
    for _ in range(200):
        b.reply("notes after the spawn", 400)
    b.refused(tokens=90_000, limit=80_000)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.forced
    assert d.kind == "summary"


def test_thrash_three_windows_within_three_calls_pauses():
    """A window on each of three model calls in a row pauses windowing with a system line,
    written once; three calls later the pause has passed."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for kind_round in range(3):
        for _ in range(200 if kind_round else 1):
            b.reply("notes", 400)
        reads(b, 60)
        b.usage()
        take(b, decide(b), tokens=2_000)
    fill_to(b, 75_000)  # over the line, under the ceiling
    b.usage()
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert d.why == "paused"
    assert d.line is not None
    assert d.line[0] == PAUSE_CODE
    b.line(*d.line)
    again = decide(b)
    assert isinstance(again, HoldBack)
    assert again.line is None  # written once per pause
    for _ in range(3):
        b.usage()
    assert isinstance(decide(b), Cut)


def test_a_pause_yields_at_the_ceiling():
    """Windowing paused or not, a prompt over the working ceiling is cut, not sent."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for kind_round in range(3):
        for _ in range(200 if kind_round else 1):
            b.reply("notes", 400)
        reads(b, 60)
        b.usage()
        take(b, decide(b), tokens=2_000)
    fill_to(b, 81_000)
    b.usage()
    assert isinstance(decide(b), Cut)


def test_requested_compactions_are_not_thrashing():
    """Summaries the thread or an operator asked for do not count toward a pause."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(3):
        b.request("summary", summary="asked for")
        take(b, decide(b))
    fill_to(b, 75_000)
    assert isinstance(decide(b), Cut)


def test_windows_spread_over_calls_do_not_pause():
    """Windows taken several calls apart, as a long autonomous turn takes them, are not
    thrashing."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(4):
        reads(b, 60)
        for _ in range(3):
            b.usage()
        d = decide(b)
        assert isinstance(d, Cut)
        take(b, d, tokens=2_000)


def test_thrash_three_summaries_within_ten_minutes_pauses():
    """Three summaries within ten minutes pause windowing, however many calls apart."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(3):
        for _ in range(40):
            b.reply("notes", 2_000)
        d = decide(b)
        assert d.kind == "summary"
        take(b, d, tokens=2_000)
        for _ in range(5):
            b.usage()
    fill_to(b, 75_000)
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert "summaries within 10 minutes" in d.detail
    b.tick(11 * 60)
    assert isinstance(decide(b), Cut)


def test_thrash_a_summary_that_freed_little_pauses():
    """A summary that freed under 10 % pauses windowing for the next three calls."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(200):
        b.reply("notes", 400)
    b.usage()
    take(b, decide(b), tokens=57_000)  # a summary nearly as large as what it replaced
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert "freed only" in d.detail
    for _ in range(4):
        b.usage()
    assert not isinstance(decide(b), HoldBack)


def test_forced_window_ignores_a_pause():
    """At the model's hard limit a window is forced even while windowing is paused."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(200):
        b.reply("notes", 400)
    take(b, decide(b), tokens=70_000)
    reads(b, 80, 2_000)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.forced


def test_baseline_that_leaves_no_room_means_windows_cannot_help():
    """When even a raised ceiling leaves under a quarter free, no window is taken: the
    turn stops and says that windows cannot help."""
    b = ThreadBuilder(baseline=150_000)
    b.turn("brief", 100)
    reads(b, 12, 2_000)
    d = decide(b, window=180_000)
    # Raised to the window, the line is the hard limit: reporting means stopping the turn.
    assert isinstance(d, Stop)
    assert "Windows cannot help" in d.reason


def test_baseline_raises_the_ceiling_before_windows_are_taken():
    """A baseline over three quarters of the ceiling raises it instead of cutting."""
    b = ThreadBuilder(baseline=70_000)
    b.turn("brief", 100)
    reads(b, 5, 1_000)
    u = usage(b)
    assert u.ceiling > 80_000
    assert isinstance(decide(b), Proceed)


def test_refusal_clears_the_largest_kept_results_until_it_fits():
    """A refused prompt clears the largest kept results, any age, until it fits."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, big = b.call("read", "huge.log", 30_000)
    reads(b, 10, 1_000)
    _, recent_big = b.call("shell", "cat big", 30_000)
    b.refused(tokens=110_000, limit=90_000)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.forced
    assert d.kind == "collapse"
    assert big.seq in d.cleared
    assert recent_big.seq in d.cleared
    take(b, d)
    assert usage(b).used <= usage(b).line


def test_refusal_that_clearing_cannot_fix_takes_a_forced_summary_then_a_drop():
    """When clearing results is not enough the forced window is a summary; if the curator
    misses it, the same range is dropped without one."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(250):
        b.reply("notes", 400)
    b.refused()
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.forced
    assert d.kind == "summary"
    drop = d.as_drop()
    assert drop.kind == "drop"
    event = take(b, drop)
    assert event.author == "system"
    assert b.view.entries[1].role == "notice"
    assert usage(b).used <= usage(b).line


def test_a_refusal_is_forced_even_under_our_own_line():
    """A refusal forces a window even when the local count was under the ceiling."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 20, 2_000)
    b.refused()
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.forced


def test_a_refusal_claiming_far_more_than_the_prompt_holds_still_gets_a_window():
    """A refusal whose number is far above the prompt (a provider miscount, 10M tokens for a
    60k prompt) forces a summary sized on what the prompt holds, not a stop that would wedge
    the thread on every later turn."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    for _ in range(150):
        b.reply("notes", 400)
    b.refused(tokens=10_000_000, limit=200_000)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.forced
    assert d.kind == "summary"
    assert d.freed < usage(b).measured
    take(b, d)
    assert b.view.refusal is None
    assert usage(b).used <= usage(b).line


def test_nothing_to_cut_stops_the_turn_with_a_reason():
    """When no tier can cut and the prompt is still over the ceiling, the turn stops with a
    reason."""
    b = ThreadBuilder()
    b.turn("brief " * 10, 79_000)  # 81,000 with the baseline: over the 80,000 ceiling
    d = decide(b)
    assert isinstance(d, Stop)
    assert d.reason


def test_summary_that_cannot_fit_stops_instead_of_sending_over():
    """If even a summary leaves the prompt over the line, and it is over the ceiling, the
    turn stops."""
    b = ThreadBuilder()
    b.turn("brief", 60_000)
    for _ in range(50):  # 82,000 with the baseline
        b.reply("notes", 400)
    d = decide(b)
    assert isinstance(d, Stop)
    assert "over the line" in d.reason


def test_nothing_to_cut_under_the_ceiling_goes_on_uncut():
    """Over the line but under the ceiling, a prompt no tier can cut is held back, not
    stopped: the turn stops only when the next prompt would pass the ceiling. The reason is
    written once a turn."""
    b = ThreadBuilder()
    b.turn("brief " * 10, 75_000)  # 77,000: over the 71,808 line, under the 80,000 ceiling
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert d.why == "nothing-to-cut"
    assert d.line is not None
    b.line(*d.line)
    again = decide(b)
    assert isinstance(again, HoldBack)
    assert again.line is None


def test_a_summary_that_cannot_fit_under_the_ceiling_goes_on_uncut():
    """A summary that would leave the prompt over the line is not taken; under the ceiling
    the turn goes on uncut instead of stopping."""
    b = ThreadBuilder()
    b.turn("brief", 60_000)
    for _ in range(40):  # 78,000 with the baseline
        b.reply("notes", 400)
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert "over the line" in d.detail


def test_a_head_whose_ask_went_unanswered_goes_on_uncut_under_its_hard_limit():
    """A head past its line whose ask went unanswered, with nothing a summary can cut and the
    prompt still under its hard limit, is held back rather than stopped."""
    b = ThreadBuilder(engine="claude", head=True)
    b.turn("brief", 185_000)  # over the 183,616 line, under the 191,808 hard limit
    b.ask("a1", minutes=5)
    b.tick(6 * 60)
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert d.why == "nothing-to-cut"


def test_claude_head_is_asked_not_cut():
    """A Claude Code head over its line is asked to compact, with the deadline formula."""
    b = ThreadBuilder(engine="claude", head=True)
    b.turn("brief", 100)
    reads(b, 120, 1_500)
    d = decide(b)
    assert isinstance(d, Ask)
    assert d.deadline - b.clock == deadline(d.usage.used)


def test_head_line_is_the_window_less_reserve_and_tool_room():
    """A head is not asked at the working ceiling, only at its own line."""
    b = ThreadBuilder(engine="codex", head=True)
    b.turn("brief", 100)
    reads(b, 100, 1_500)  # far over the 80k ceiling, under 200k - reserve - room
    u = usage(b)
    assert u.line == WINDOW - 8_192 - 8_192
    assert isinstance(decide(b), Proceed)


def test_pending_ask_waits_until_its_deadline_then_the_runtime_cuts():
    """While an ask is open the head is not cut; after the deadline a curator summary is."""
    b = ThreadBuilder(engine="claude", head=True)
    b.turn("brief", 100)
    for _ in range(460):
        b.reply("notes", 400)
    b.ask("a1", minutes=5)
    d = decide(b)
    assert isinstance(d, HoldBack)
    assert d.why == "ask-pending"
    b.tick(6 * 60)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "summary"
    assert d.ask == "a1"
    assert d.needs_curator
    take(b, d, tokens=2_000)
    assert b.view.ask is None


def test_declined_ask_is_not_repeated_in_the_same_turn():
    """A head that declines is not asked again until its next turn."""
    b = ThreadBuilder(engine="codex", head=True)
    b.turn("brief", 100)
    for _ in range(460):
        b.reply("notes", 400)
    b.ask("a1")
    b.answer("a1", "decline", by="thread")
    assert isinstance(decide(b), HoldBack)
    b.turn("next", 50)
    assert isinstance(decide(b), Ask)


def past_the_hard_limit(engine: Engine) -> ThreadBuilder:
    """A head whose next prompt is past the model's window less the output reserve (191,808
    of 200,000), no refusal from the provider."""
    b = ThreadBuilder(engine=engine, head=True)
    b.turn("brief", 100)
    fill_to(b, 193_000)
    assert usage(b).used > usage(b).hard_limit
    return b


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_a_cli_head_past_its_hard_limit_is_asked_not_cut(engine):
    """On Claude Code and Codex a head is not cut on Condensate's own initiative, even past
    its hard limit: it is asked to compact."""
    b = past_the_hard_limit(engine)
    assert isinstance(decide(b), Ask)


def test_an_open_ask_past_the_hard_limit_is_repeated_not_sent():
    """A head past its hard limit with an ask open is asked again (the request held, its
    deadline the ask's own), neither cut nor let through to a provider that would refuse it."""
    b = past_the_hard_limit("claude")
    opened = b.ask("a1", minutes=5)
    d = decide(b)
    assert isinstance(d, Ask)
    assert d.deadline == opened.event.deadline  # type: ignore[union-attr]


def test_a_head_that_declined_stops_past_its_hard_limit():
    """A head that declined this turn is not cut and not asked again; past its hard limit
    the turn stops with the reason rather than send a prompt the provider would refuse."""
    b = past_the_hard_limit("codex")
    b.ask("a1")
    b.answer("a1", "decline", by="thread")
    d = decide(b)
    assert isinstance(d, Stop)
    assert "declined" in d.reason


def test_past_the_hard_limit_an_unanswered_ask_ends_in_a_forced_window():
    """Once the ask's deadline passes with the prompt past the hard limit, the runtime cuts on
    its own and the window is forced (a curator miss drops); the cut closes the ask."""
    b = past_the_hard_limit("claude")
    b.ask("a1", minutes=5)
    b.tick(6 * 60)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.forced
    assert d.ask == "a1"
    take(b, d, tokens=2_000)
    assert b.view.ask is None


def test_native_head_is_compacted_automatically_at_its_line():
    """On the api engine a head is cut down the ladder at its line, nobody is asked."""
    b = ThreadBuilder(engine="api", head=True)
    b.turn("brief", 100)
    reads(b, 121, 1_500)
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "microcompact"


def test_thread_summary_is_taken_before_the_next_call_as_written():
    """A head's own compact_context summary is used as written, author thread, in place of
    the curator, even under the line."""
    b = ThreadBuilder(engine="api", head=True)
    b.turn("brief", 100)
    reads(b, 10)
    keep = b.turn("keep this", 50)
    b.call("read", "x.py", 500)
    b.request("summary", summary="my own notes", keep_from=keep.seq + 2)  # a tool result
    d = decide(b)
    assert isinstance(d, Cut)
    assert (d.kind, d.summary, d.author) == ("summary", "my own notes", "thread")
    assert d.keep_from == keep.seq + 1  # snapped back to the assistant message of its batch
    event = take(b, d)
    assert event.request is not None
    assert b.view.requested is None
    # The brief and the current task (the latest human message) stand before the summary.
    assert [e.role for e in b.view.entries][:3] == ["user", "user", "summary"]
    assert b.view.entries[1].seq == keep.seq


def test_requested_microcompact_is_taken_at_the_next_boundary():
    """A queued microcompact is carried out before the next call, whatever the line."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, SETTINGS.tiers.keep_pairs + 10)
    b.request("microcompact", by="operator")
    d = decide(b)
    assert isinstance(d, Cut)
    assert d.kind == "microcompact"
    assert d.cleared
    take(b, d)
    assert all(e.receipt is not None for e in b.view.entries if e.seq in d.cleared)


def test_operator_answer_to_an_ask_is_taken_and_credited():
    """An operator's summary answering an ask is used as written, author operator."""
    b = ThreadBuilder(engine="claude", head=True)
    b.turn("brief", 100)
    for _ in range(460):
        b.reply("notes", 400)
    b.ask("a1")
    b.answer("a1", "summary", by="operator", summary="operator notes")
    d = decide(b)
    assert isinstance(d, Cut)
    assert (d.author, d.summary, d.ask) == ("operator", "operator notes", "a1")


@pytest.mark.parametrize(
    ("used", "seconds"),
    [(0, 180), (1, 190), (10_000, 190), (10_001, 200), (120_000, 300), (1_000_000, 1_180)],
)
def test_deadline_is_180_seconds_plus_10_per_10k_tokens(used, seconds):
    """The curator (and an ask) gets 180 s plus 10 s per 10,000 tokens in use."""
    assert deadline(used) == timedelta(seconds=seconds)


def test_deadline_override():
    """CONDENSATE_WINDOW_DEADLINE_MS replaces the formula."""
    assert deadline(500_000, timedelta(milliseconds=1_500)) == timedelta(milliseconds=1_500)


def test_receipts_name_tool_argument_size_and_seq():
    """A cleared result leaves a receipt with its tool, argument, size and seq."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    reads(b, 50)
    d = decide(b)
    take(b, d)
    entry = b.view.entries[b.view.position(d.cleared[0])]  # type: ignore[index]
    original = next(s for s in b.log if s.seq == d.cleared[0]).event
    assert isinstance(original, ToolResult)
    assert entry.receipt is not None
    for part in (original.tool, original.argument, "1500 tokens", f"seq {entry.seq}"):
        assert part in entry.receipt
