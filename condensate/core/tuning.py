"""Settings given by name on the command line (``condensate replay --set keep_pairs=4``), so an
operator compares tier and trigger settings on a recorded thread before deploying them. Pure.

A name is a field of the tier settings (``keep_pairs``, ``target_share``, ``early_share``,
``early_tier``, ``exclude_tools``, ``small_result_tokens``, ...), of the planner's
(``thrash_turns``, ...) or of the ceilings' (``share``, ``cap``, ``cap_all``,
``output_reserve``, ``tool_room``); the value is read as the field's type: a number, ``none``
for an optional one, a comma-separated list of tool names for ``exclude_tools``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from condensate.core.ceilings import CeilingSettings
from condensate.core.planner import PlannerSettings
from condensate.core.receipts import bare_tool
from condensate.core.tiers import TierSettings

CHOICES: dict[str, tuple[str, ...]] = {
    "early_tier": ("microcompact", "collapse"),
    "heads": ("asked", "cut"),
}
"""Fields that take one of a few words."""


class TuningError(ValueError):
    """A ``--set`` that names no setting, or gives it a value it cannot take."""


def _names(kind: type[Any], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {f.name: f for f in dataclasses.fields(kind) if f.name not in skip}


TIER_FIELDS = _names(TierSettings)
PLANNER_FIELDS = _names(PlannerSettings, frozenset({"tiers"}))
CEILING_FIELDS = _names(CeilingSettings)


def known() -> list[str]:
    """Every name ``--set`` takes."""
    return sorted({*TIER_FIELDS, *PLANNER_FIELDS, *CEILING_FIELDS})


def tuned(
    planner: PlannerSettings, ceilings: CeilingSettings, assignments: Sequence[str]
) -> tuple[PlannerSettings, CeilingSettings]:
    """``planner`` and ``ceilings`` with each ``name=value`` of ``assignments`` applied."""
    tiers: dict[str, Any] = {}
    plan: dict[str, Any] = {}
    ceiling: dict[str, Any] = {}
    for assignment in assignments:
        name, sep, raw = assignment.partition("=")
        name = name.strip()
        if not sep:
            msg = f"--set takes name=value, not {assignment!r}."
            raise TuningError(msg)
        for fields, into, current in (
            (TIER_FIELDS, tiers, planner.tiers),
            (PLANNER_FIELDS, plan, planner),
            (CEILING_FIELDS, ceiling, ceilings),
        ):
            if name in fields:
                declared = str(fields[name].type)
                into[name] = _value(name, raw.strip(), getattr(current, name), declared)
                break
        else:
            msg = f"There is no setting {name!r}; the settings are: {', '.join(known())}."
            raise TuningError(msg)
    return (
        dataclasses.replace(planner, tiers=dataclasses.replace(planner.tiers, **tiers), **plan),
        dataclasses.replace(ceilings, **ceiling),
    )


def _value(name: str, raw: str, current: Any, declared: str) -> Any:
    """``raw`` as the field's type (its current value's, or as declared when unset)."""
    if raw.lower() == "none" and name not in CHOICES:
        return None
    if name in CHOICES:
        if raw not in CHOICES[name]:
            msg = f"{name} takes one of {', '.join(CHOICES[name])}, not {raw!r}."
            raise TuningError(msg)
        return raw
    if isinstance(current, frozenset):
        return frozenset(bare_tool(t) for t in raw.split(",") if t.strip())
    try:
        if isinstance(current, bool):
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw.lower() in ("true", "1")
        if isinstance(current, int) or (current is None and declared.startswith("int")):
            return int(raw)
        if isinstance(current, timedelta) or "timedelta" in declared:
            return timedelta(seconds=float(raw))
        return float(raw)
    except ValueError as exc:
        whole = isinstance(current, int) or declared.startswith("int")
        kind = "a whole number" if whole else "a number"
        msg = f"{name} takes {kind}, not {raw!r}."
        raise TuningError(msg) from exc
