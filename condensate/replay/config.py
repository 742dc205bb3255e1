"""``ReplayConfig``: what a replay runs (which policies, the window, ceilings, planner,
prices, the curator) and the defaults it starts from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from condensate.core.ceilings import CeilingSettings
from condensate.core.planner import PlannerSettings
from condensate.replay.billing import Prices, default_prices
from condensate.replay.stand_in import FAKE_CURATOR

POLICIES = ("condensate", "unmanaged", "single-summary")
SINGLE_SUMMARY_SHARE = 0.835
DEFAULT_WINDOW = 200_000


@dataclass(frozen=True)
class ReplayConfig:
    window: int | None = None
    """The model's window; default: the built-in table for the recording's model, else 200k."""
    ceilings: CeilingSettings = field(default_factory=CeilingSettings)
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    prices: Prices = field(default_factory=default_prices)
    policies: tuple[str, ...] = POLICIES
    curator: str = FAKE_CURATOR
    """``fake`` (the stand-in through the fake server) or a ``provider:model`` name."""
    single_summary_share: float = SINGLE_SUMMARY_SHARE
