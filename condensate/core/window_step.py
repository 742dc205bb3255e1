"""One windowing step: measure, plan and carry the decision out, up to three cuts. The
runtime's checkpoints, the admission of a request the gateway holds, and ``condensate
replay`` all run this one step, so a replay measures what the daemon does; each brings a
``Host``: where its view lives, how it carries a cut out and logs what the step says.

The step does no I/O of its own and decides nothing (the planner does); it awaits its host.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from condensate.core import planner as planning
from condensate.core.meter import ContextUsage
from condensate.core.planner import Ask, Cut, HoldBack, PlannerSettings, Proceed, Stop
from condensate.core.projector import Projection
from condensate.events import Window

MAX_CUTS = 3
"""Cuts one step takes at most: a cheap tier that frees too little is followed by the next."""
RESTARTS = frozenset({"summary", "drop"})
"""Windows after which a request's own size describes nothing any more."""


class Host(Protocol):
    @property
    def view(self) -> Projection: ...

    def usage(self) -> ContextUsage: ...

    def now(self) -> datetime: ...

    async def carry_out(self, cut: Cut) -> Window | str:
        """The window, logged and folded; or why there is none (the summary did not
        arrive)."""
        ...

    async def say(self, code: str, text: str) -> None:
        """A system line in the thread's log."""
        ...

    async def ask(self, decision: Ask) -> None:
        """Ask the head to compact (once: an ask already open stays the one)."""
        ...


@dataclass(frozen=True)
class Step:
    """What one step did: the usage it ended at, the windows it took, and why it stopped
    cutting (``stop``: the turn must end; ``missed``: a summary did not arrive; ``held``: a
    window is due and held back; ``asked``: the head was asked)."""

    usage: ContextUsage
    windows: tuple[Window, ...] = ()
    stop: str | None = None
    missed: str | None = None
    held: HoldBack | None = None
    asked: Ask | None = None

    @property
    def window(self) -> Window | None:
        return self.windows[-1] if self.windows else None

    @property
    def restarts(self) -> Window | None:
        """The summary or drop taken, if one was: the CLI session it cut must end."""
        kept = [w for w in self.windows if w.window_kind in RESTARTS]
        return kept[-1] if kept else None


def missed_text(reason: str) -> str:
    return (
        f"No summary arrived before the deadline ({reason}); the cut waits and the turn goes "
        "on uncut."
    )


def slid_text(reason: str) -> str:
    return (
        f"No summary arrived before the deadline ({reason}) and the prompt would pass its "
        "ceiling: the sliding window drops the earlier messages instead (no model call)."
    )


def _no_room(usage: ContextUsage) -> bool:
    """The prompt would pass the ceiling: going on uncut is no longer an option."""
    return usage.used > usage.limit


def on_request(usage: ContextUsage, size: int) -> ContextUsage:
    """The view's usage with a request's own size in place of the view's."""
    line = usage.line
    return replace(usage, used=size, measured=size, fraction=size / line if line else 1.0)


async def step(host: Host, settings: PlannerSettings, size: int | None = None) -> Step:
    """Measure (on ``size``, a request's own, when given), plan, and carry out until the
    planner proceeds, holds back, asks or stops, a summary misses, or ``MAX_CUTS`` cuts.
    After a summary or a drop a request's size says nothing more: the step ends there."""
    taken: list[Window] = []
    for _ in range(MAX_CUTS):
        usage = host.usage() if size is None else on_request(host.usage(), size)
        decision = planning.plan(host.view, usage, settings, host.now())
        match decision:
            case Proceed():
                return Step(usage, tuple(taken))
            case HoldBack(line=line):
                if line is not None:
                    await host.say(*line)
                return Step(usage, tuple(taken), held=decision)
            case Ask():
                await host.ask(decision)
                return Step(usage, tuple(taken), asked=decision)
            case Stop(reason=reason):
                await host.say("turn-stopped", f"The turn stopped: {reason}.")
                return Step(usage, tuple(taken), stop=reason)
            case Cut():
                window = await host.carry_out(decision)
                if isinstance(window, str) and decision.kind == "summary" and _no_room(usage):
                    # No summary, and going on uncut would pass the ceiling: slide instead.
                    await host.say("summary-missed", slid_text(window))
                    window = await host.carry_out(decision.as_slide())
                if isinstance(window, str):
                    await host.say("summary-missed", missed_text(window))
                    return Step(usage, tuple(taken), missed=window)
                taken.append(window)
                if size is not None:
                    if window.window_kind in RESTARTS:
                        return Step(usage, tuple(taken))
                    size = max(size - decision.freed, 0)
    final = host.usage() if size is None else on_request(host.usage(), size)
    return Step(final, tuple(taken))
