"""Working ceilings and lines: how much of a model's window a thread may fill. Pure.

A thread's working ceiling is a share of the model's window: 40 % capped at 120,000 tokens for
the native loop and Codex, 75 % capped at 200,000 for Claude Code, never below a floor of
48,000 (nor above the window). Operator caps lower it and never raise it. A window is due when
the next prompt passes the line: the ceiling less the output reserve, or for a head the model's
window less the output reserve and room for one more tool result.
"""

from __future__ import annotations

from dataclasses import dataclass

from condensate.events import Engine

FLOOR = 48_000
SHARES: dict[Engine, tuple[float, int]] = {
    "api": (0.40, 120_000),
    "codex": (0.40, 120_000),
    "claude": (0.75, 200_000),
}
BASELINE_SHARE = 0.75
"""The baseline may use at most three quarters of the ceiling..."""
MIN_FREE_SHARE = 0.25
"""... and windows cannot help once less than a quarter stays free."""


@dataclass(frozen=True)
class CeilingSettings:
    """Operator caps (``CONDENSATE_WINDOW_CEILING*``) and the room kept below the ceiling.

    >>> CeilingSettings(cap_all=100_000)           # every engine at most 100k
    >>> CeilingSettings(cap_claude=150_000)        # Claude Code at most 150k
    """

    cap_all: int | None = None
    cap_claude: int | None = None
    cap_pi: int | None = None
    """The native loop and Codex."""
    output_reserve: int = 8_192
    tool_room: int = 8_192


def working_ceiling(engine: Engine, window: int, settings: CeilingSettings) -> int:
    """The engine's share of ``window``, held between the floor and the window, then lowered
    by any operator cap. A cap is the operator's word and may go below the floor."""
    share, cap = SHARES[engine]
    ceiling = min(max(min(int(window * share), cap), FLOOR), window)
    engine_cap = settings.cap_claude if engine == "claude" else settings.cap_pi
    for operator_cap in (engine_cap, settings.cap_all):
        if operator_cap is not None:
            ceiling = min(ceiling, operator_cap)
    return ceiling


@dataclass(frozen=True)
class Ceiling:
    ceiling: int
    raised: bool
    helpless: bool
    """Even raised to the window, the baseline leaves under a quarter free."""


def fit_baseline(ceiling: int, baseline: int, window: int) -> Ceiling:
    """Raise the ceiling until the baseline uses at most three quarters of it, up to the
    window; say when even that leaves less than a quarter free."""
    if baseline <= ceiling * BASELINE_SHARE:
        return Ceiling(ceiling, raised=False, helpless=False)
    raised = min(window, max(ceiling, int(baseline / BASELINE_SHARE) + 1))
    helpless = raised - baseline < raised * MIN_FREE_SHARE
    return Ceiling(raised, raised=raised > ceiling, helpless=helpless)


def ordinary_line(ceiling: int, settings: CeilingSettings) -> int:
    return ceiling - settings.output_reserve


def head_line(window: int, settings: CeilingSettings) -> int:
    return window - settings.output_reserve - settings.tool_room


def hard_limit(window: int, settings: CeilingSettings) -> int:
    """Past this the provider would refuse the prompt: windows become forced."""
    return window - settings.output_reserve
