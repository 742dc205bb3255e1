"""The staged warnings of an agent-reset thread: advice that its context fills. Pure.

Each level (75, 80, 85 and 90 % of the input budget by default) is told once per reset cycle,
the highest one crossed (a jump from 74 % to 87 % is one 85 % warning), on the provider's
input count of the last successful request (before the first one of a cycle, an estimate of
the assembled prompt). The warning rides in the next request and is logged with its reply,
so a request that fails leaves it to the next one, and a committed reset rearms them all.
Warnings advise: nothing is cut.
"""

from __future__ import annotations

from datetime import datetime

from condensate.core.meter import ContextUsage
from condensate.core.projector import Projection
from condensate.events import ResetPolicy, ResetWarned

WARNING = (
    "[Condensate] Your context is at {percent}% of its {budget:,}-token budget ({used:,} "
    "tokens). Before it fills, save what you will need to continue (unfinished requests, "
    "decisions, file locations, next steps) with your tools, wait for the writes to succeed, "
    "then call condense alone, with a message to your future self if it helps. This is "
    "advice: nothing is cut for you, and you may go on working first."
)


def budget_of(policy: ResetPolicy, usage: ContextUsage) -> int | None:
    """The input budget warnings measure against: the policy's, else the model's window when
    it is known (not a fallback); None: no percentage can be told."""
    if policy.budget is not None:
        return policy.budget
    return usage.window if usage.resolved else None


def measured(view: Projection) -> int | None:
    """The input the warnings measure: the provider's count of the last successful request
    of this reset cycle, else an estimate of the assembled prompt; None when neither exists."""
    if view.anchor is not None:
        return view.anchor.count
    estimate = view.baseline_tokens + view.view_tokens
    return estimate if estimate > 0 else None


def due_warning(
    view: Projection, policy: ResetPolicy, usage: ContextUsage, at: datetime
) -> ResetWarned | None:
    """The warning the next request carries: the highest level crossed above the highest
    already told this cycle; None when none is due or no percentage can be told."""
    budget = budget_of(policy, usage)
    used = measured(view)
    if budget is None or used is None or budget <= 0:
        return None
    fraction = used / budget
    crossed = [level for level in policy.warnings if fraction >= level]
    if not crossed or max(crossed) <= view.warned_level:
        return None
    level = max(crossed)
    text = WARNING.format(percent=int(fraction * 100), budget=budget, used=used)
    return ResetWarned(at=at, level=level, used=used, budget=budget, text=text)
