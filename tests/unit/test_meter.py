"""The meter: the next prompt anchored on the provider's count (design.md §2 step 3)."""

from __future__ import annotations

from condensate.core.ceilings import CeilingSettings
from condensate.core.meter import ModelWindow, measure
from condensate.events import Window, WindowTrigger
from condensate.testing.threads import ThreadBuilder

W = ModelWindow(200_000, resolved=True)


def test_before_any_count_the_whole_prompt_is_estimated():
    """With no provider count yet, used is the baseline plus the whole view, not anchored."""
    b = ThreadBuilder(baseline=5_000)
    b.turn("brief", 100)
    u = measure(b.view, W, CeilingSettings())
    assert (u.used, u.anchored) == (5_100, False)


def test_used_is_the_provider_count_plus_what_was_appended_since():
    """After a count, used is that count plus the local estimate of later events."""
    b = ThreadBuilder(baseline=5_000)
    b.turn("brief", 100)
    b.usage(prompt=12_345)  # the provider disagrees with our estimate: it wins
    b.call("read", "a.py", 1_000)
    u = measure(b.view, W, CeilingSettings())
    assert u.used == 12_345 + 30 + 1_000
    assert u.anchored


def test_windows_since_the_count_are_subtracted():
    """What a window freed after the last count comes off the estimate."""
    b = ThreadBuilder(baseline=5_000)
    b.turn("brief", 100)
    _, r = b.call("read", "a.py", 10_000)
    b.usage(prompt=20_000)
    trigger = WindowTrigger(used=1, line=1, ceiling=1, window=1, freed=0, reason="t")
    b.add(
        Window(
            at=b.tick(), window_kind="microcompact", cut=b.seq, cleared=(r.seq,), trigger=trigger
        ),
        0,
    )
    u = measure(b.view, W, CeilingSettings())
    assert 10_000 < u.used < 10_100


def test_a_refusal_count_wins_when_higher():
    """A refusal's own token number raises the estimate to it."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.usage(prompt=50_000)
    b.refused(tokens=210_000, limit=200_000)
    assert measure(b.view, W, CeilingSettings()).used == 210_000


def test_usage_reports_window_ceiling_line_fraction_and_resolution():
    """ContextUsage carries the window, the ceiling, the line, the fraction of the line and
    whether the window was resolved."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.usage(prompt=35_904)
    u = measure(b.view, ModelWindow(200_000, resolved=False), CeilingSettings())
    assert (u.window, u.ceiling, u.line) == (200_000, 80_000, 71_808)
    assert u.fraction == 35_904 / 71_808
    assert not u.resolved
