"""The installed engines as a daemon with default settings would run them (``Profile``), for
tests of the pure core that measure and plan a thread of a given engine."""

from __future__ import annotations

from typing import Any

from condensate.core.ceilings import CeilingSettings
from condensate.core.planner import PlannerSettings
from condensate.engine.registry import Profile, installed, profile


def shaped(
    engine: str,
    ceilings: CeilingSettings | None = None,
    planner: PlannerSettings | None = None,
    **own: Any,
) -> Profile:
    """``engine``'s profile over ``ceilings`` and ``planner`` (defaults: the daemon's), its own
    settings given by ``own`` (by field name) and nothing read from the environment's."""
    info = installed()[engine]
    return profile(
        info,
        CeilingSettings() if ceilings is None else ceilings,
        PlannerSettings() if planner is None else planner,
        info.settings.model_construct(**own),
    )
