"""Working ceilings and lines: how much of a model's window a thread may fill. Pure.

A thread's working ceiling is a share of the model's window, capped: its engine declares both
(``EngineInfo``; 40 % capped at 120,000 tokens unless it says otherwise), never below a floor of
48,000 (nor above the window). Operator caps lower it and never raise it; a large baseline
raises it up to the window, never past an operator's cap. A window is due when
the next prompt passes the line: the ceiling less the output reserve, or for a head the model's
window less the output reserve and room for one more tool result.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOOR = 48_000
BASELINE_SHARE = 0.75
"""The baseline may use at most three quarters of the ceiling..."""
MIN_FREE_SHARE = 0.25
"""... and windows cannot help once less than a quarter stays free."""


@dataclass(frozen=True)
class CeilingSettings:
    """A thread's engine's share and cap, the operator's caps (``CONDENSATE_WINDOW_CEILING``
    and the engine's own), and the room kept below the ceiling.

    >>> CeilingSettings(cap_all=100_000)                   # at most 100k
    >>> CeilingSettings(share=0.75, cap=200_000)           # an engine that may use more
    """

    share: float = 0.40
    cap: int = 120_000
    """The engine's own limits on its share of the window."""
    cap_all: int | None = None
    cap_engine: int | None = None
    """The operator's cap for this engine (the variable its package reads)."""
    output_reserve: int = 8_192
    tool_room: int = 8_192


def working_ceiling(window: int, settings: CeilingSettings) -> int:
    """The engine's share of ``window``, held between the floor and the window, then lowered
    by any operator cap. A cap is the operator's word and may go below the floor."""
    share = max(min(int(window * settings.share), settings.cap), FLOOR)
    return min(share, highest_ceiling(window, settings))


def highest_ceiling(window: int, settings: CeilingSettings) -> int:
    """The most any ceiling may be: the model's window, or an operator's cap below it. The
    baseline rule raises a ceiling up to this and no further: a cap "can lower it, never
    raise it"."""
    caps = [c for c in (settings.cap_engine, settings.cap_all) if c is not None]
    return min([window, *caps])


@dataclass(frozen=True)
class Ceiling:
    ceiling: int
    raised: bool
    helpless: bool
    """Even raised to the window, the baseline leaves under a quarter free."""


def fit_baseline(ceiling: int, baseline: int, most: int) -> Ceiling:
    """Raise the ceiling until the baseline uses at most three quarters of it, up to ``most``
    (``highest_ceiling``); say when even that leaves less than a quarter free."""
    if baseline <= ceiling * BASELINE_SHARE:
        return Ceiling(ceiling, raised=False, helpless=False)
    raised = min(most, max(ceiling, int(baseline / BASELINE_SHARE) + 1))
    helpless = raised - baseline < raised * MIN_FREE_SHARE
    return Ceiling(raised, raised=raised > ceiling, helpless=helpless)


def ordinary_line(ceiling: int, settings: CeilingSettings) -> int:
    return ceiling - settings.output_reserve


def head_line(window: int, settings: CeilingSettings) -> int:
    return window - settings.output_reserve - settings.tool_room


def hard_limit(window: int, settings: CeilingSettings) -> int:
    """Past this the provider would refuse the prompt: windows become forced."""
    return window - settings.output_reserve
