"""Working ceilings, lines and the baseline rule (spec: "When a window is taken")."""

from __future__ import annotations

import pytest

from condensate.core.ceilings import (
    CeilingSettings,
    fit_baseline,
    hard_limit,
    head_line,
    ordinary_line,
    working_ceiling,
)
from condensate.core.meter import ModelWindow, measure
from condensate.core.planner import PlannerSettings
from condensate.engine.registry import installed, profile
from condensate.testing.threads import ThreadBuilder
from tests.profiles import shaped

DEFAULT = CeilingSettings()


@pytest.mark.parametrize(
    ("engine", "window", "expected"),
    [
        ("api", 200_000, 80_000),  # 40 % of the window
        ("codex", 272_000, 108_800),
        ("api", 1_000_000, 120_000),  # capped at 120,000
        ("codex", 1_000_000, 120_000),
        ("claude", 200_000, 150_000),  # 75 %
        ("claude", 1_000_000, 200_000),  # capped at 200,000
        ("api", 100_000, 48_000),  # 40 % would be 40k: the floor holds
        ("claude", 60_000, 48_000),
        ("api", 32_000, 32_000),  # the floor never exceeds the model's own window
    ],
)
def test_default_ceiling_is_a_capped_share_with_a_floor(engine, window, expected):
    """The ceiling is the share and cap the engine declares, 40 % (cap 120k) for api and
    Codex, 75 % (cap 200k) for Claude Code, never below 48,000 nor above the window."""
    assert working_ceiling(window, shaped(engine).ceilings) == expected


@pytest.mark.parametrize(
    ("engine", "cap_all", "own", "expected"),
    [
        ("claude", None, {"window_ceiling_claude": 100_000}, 100_000),
        ("claude", None, {"window_ceiling_claude": 500_000}, 150_000),  # never raises
        ("claude", None, {"window_ceiling_pi": 50_000}, 150_000),  # _PI is not for Claude Code
        ("api", None, {"window_ceiling_pi": 50_000}, 50_000),  # _PI covers the native loop
        ("codex", None, {"window_ceiling_pi": 50_000}, 50_000),  # ... and Codex
        ("api", None, {"window_ceiling_claude": 50_000}, 80_000),
        ("claude", 90_000, {}, 90_000),  # the general cap, every engine
        ("codex", 90_000, {}, 80_000),
        ("api", 70_000, {"window_ceiling_pi": 60_000}, 60_000),  # the lower one wins
        ("api", 20_000, {}, 20_000),  # an operator may go below the floor
    ],
)
def test_operator_caps_lower_and_never_raise(engine, cap_all, own, expected):
    """CONDENSATE_WINDOW_CEILING_CLAUDE, _PI (each read by the engines it covers) and
    CONDENSATE_WINDOW_CEILING lower the ceiling, never raise it (window 200k)."""
    ceilings = shaped(engine, CeilingSettings(cap_all=cap_all), **own).ceilings
    assert working_ceiling(200_000, ceilings) == expected


def test_an_engines_cap_variable_reaches_its_ceiling(monkeypatch):
    """The engines' own settings read their cap from the environment, as the daemon's do."""
    monkeypatch.setenv("CONDENSATE_WINDOW_CEILING_CLAUDE", "90000")
    info = installed()["claude"]
    shaped_ = profile(info, CeilingSettings(), PlannerSettings())
    assert working_ceiling(200_000, shaped_.ceilings) == 90_000


def test_lines_keep_an_output_reserve_and_heads_use_the_window():
    """An ordinary line is the ceiling less the output reserve; a head's line is the window
    less the reserve and room for one more tool result; the hard limit is window less reserve."""
    settings = CeilingSettings(output_reserve=8_000, tool_room=10_000)
    assert ordinary_line(80_000, settings) == 72_000
    assert head_line(200_000, settings) == 182_000
    assert hard_limit(200_000, settings) == 192_000


@pytest.mark.parametrize(
    ("ceiling", "baseline", "most", "expected", "raised", "helpless"),
    [
        (80_000, 20_000, 200_000, 80_000, False, False),  # small baseline: untouched
        (80_000, 60_000, 200_000, 80_000, False, False),  # exactly three quarters
        (80_000, 75_000, 200_000, 100_001, True, False),  # raised so the baseline is <= 3/4
        (80_000, 150_000, 180_000, 180_000, True, True),  # capped at the window: < 1/4 free
        (
            48_000,
            40_000,
            54_000,
            53_334,
            True,
            False,
        ),  # raised to baseline / 0.75, under the window
    ],
)
def test_baseline_rule(ceiling, baseline, most, expected, raised, helpless):
    """A baseline over three quarters of the ceiling raises it, up to the window (or an
    operator's cap below it); only when even that leaves under a quarter free do windows not
    help."""
    fitted = fit_baseline(ceiling, baseline, most)
    assert (fitted.ceiling, fitted.raised, fitted.helpless) == (expected, raised, helpless)
    if not helpless:
        assert baseline <= fitted.ceiling * 0.75


@pytest.mark.parametrize(
    ("engine", "cap_all", "own"),
    [
        ("api", 50_000, {}),  # CONDENSATE_WINDOW_CEILING
        ("claude", None, {"window_ceiling_claude": 50_000}),
        ("codex", None, {"window_ceiling_pi": 50_000}),
    ],
)
def test_the_baseline_rule_never_raises_a_ceiling_past_an_operator_cap(engine, cap_all, own):
    """A 45,000-token baseline would raise the ceiling to 60,001; an operator's cap of 50,000
    "can lower it, never raise it", so the ceiling stays at the cap and, with under a quarter
    of it free, windows cannot help."""
    b = ThreadBuilder(engine=engine, baseline=45_000)
    b.turn("brief", 100)
    ceilings = shaped(engine, CeilingSettings(cap_all=cap_all), **own).ceilings
    u = measure(b.view, ModelWindow(200_000, True), ceilings)
    assert (u.ceiling, u.helpless) == (50_000, True)
