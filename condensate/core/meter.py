"""The meter: the next prompt's size, anchored on the provider's own count. Pure.

used = the provider's last count (input + cache read + cache write) + what the view gained
locally since that count (appended less freed). Before any count it is the baseline plus the
whole view, estimated locally. A refusal's own number, when higher, wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condensate.core import ceilings
from condensate.core.ceilings import CeilingSettings
from condensate.core.projector import Projection


@dataclass(frozen=True)
class ModelWindow:
    tokens: int
    resolved: bool
    """False when the window is a fallback guess, not the model's known size."""


@dataclass(frozen=True)
class ContextUsage:
    """How full the next prompt is.

    ``used`` against ``line`` decides a window; ``fraction`` is ``used / line``.
    """

    used: int
    window: int
    ceiling: int
    line: int
    fraction: float
    anchored: bool
    resolved: bool
    hard_limit: int
    """Past this the provider would refuse: windows are forced through every hold-back."""
    limit: int
    """No prompt over this is sent: the working ceiling, or for a head the hard limit."""
    helpless: bool
    """The baseline leaves windows nothing to win."""
    measured: int
    """``used`` without a refusal's claim: what the count and the view say the prompt holds.
    A refusal may name any number; only this one says how much of the prompt is fixed."""

    def as_json(self) -> dict[str, Any]:
        """What the API, the usage stream and ``context_usage`` show of it."""
        return {
            "used": self.used,
            "window": self.window,
            "ceiling": self.ceiling,
            "line": self.line,
            "fraction": round(self.fraction, 4),
            "anchored": self.anchored,
            "resolved": self.resolved,
        }


def next_prompt(view: Projection) -> tuple[int, bool]:
    """The next prompt's estimated size and whether it stands on a provider count."""
    used, anchored = measured_prompt(view)
    if view.refusal:
        used = max(used, view.refusal)
    return used, anchored


def measured_prompt(view: Projection) -> tuple[int, bool]:
    """The next prompt's size from the last count and the view, a refusal's claim left out."""
    if view.anchor is None:
        used = view.baseline_tokens + view.view_tokens
        anchored = False
    else:
        used = view.anchor.count + view.view_tokens - view.anchor.view_tokens
        anchored = True
    return max(used, 0), anchored


def measure(view: Projection, window: ModelWindow, settings: CeilingSettings) -> ContextUsage:
    used, anchored = next_prompt(view)
    measured, _ = measured_prompt(view)
    base = ceilings.working_ceiling(window.tokens, settings)
    most = ceilings.highest_ceiling(window.tokens, settings)
    fitted = ceilings.fit_baseline(base, view.baseline_tokens, most)
    if view.head:
        line = ceilings.head_line(window.tokens, settings)
    else:
        line = ceilings.ordinary_line(fitted.ceiling, settings)
    hard = ceilings.hard_limit(window.tokens, settings)
    return ContextUsage(
        used=used,
        window=window.tokens,
        ceiling=fitted.ceiling,
        line=line,
        fraction=used / line if line > 0 else 1.0,
        anchored=anchored,
        resolved=window.resolved,
        hard_limit=hard,
        limit=hard if view.head else min(fitted.ceiling, hard),
        helpless=fitted.helpless,
        measured=measured,
    )
