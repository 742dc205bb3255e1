"""The windowing policies a replay compares: ``condensate``, ``unmanaged``, ``single-summary``.

Each decides, before every recorded model call and when the provider refuses one, which
windows a ``Run`` takes; ``make_policy`` builds one by name.
"""

# The policies, in full:
#
# - ``condensate``: the real core: ``Projection`` folds, ``meter.measure``, ``planner.plan``,
#   cheap cuts carried out in process, summaries written by ``Curator`` (against the fake, or a
#   real model);
# - ``unmanaged``: nothing until the provider refuses the prompt; then the oldest history is
#   dropped (the brief kept) down to half the window, as a naive agent truncates on overflow.
#   Where it would simply end instead is reported as ``first_overflow_call``;
# - ``single-summary``: Claude Code's default shape: at 83.5 % of the window the whole history
#   is summarized in one call (the view plus a summary request, so the prefix is a cache read)
#   and nothing is kept verbatim but the brief.

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from condensate.core import tiers, window_step
from condensate.core.meter import ContextUsage, ModelWindow, measure, next_prompt
from condensate.core.planner import Ask, Cut
from condensate.core.projector import Projection
from condensate.errors import CondensateError, ContextWindowExceeded
from condensate.events import Event, Stored, SystemLine, Window, WindowTrigger
from condensate.replay.config import POLICIES, SINGLE_SUMMARY_SHARE, ReplayConfig
from condensate.replay.recording import Recording


class Run(Protocol):
    """What a policy sees of a replay's run (``runner.Run``): the view, the window and
    settings, the time, and how windows and lines are taken."""

    view: Projection
    window: int
    config: ReplayConfig
    now: datetime
    holds: Counter[str]
    recording: Recording

    def append(self, event: Event) -> Stored: ...

    def take_window(self, window: Window) -> None: ...

    async def curator_summary(self, cut: Cut) -> Window | str: ...

    async def summary_call(self) -> str | None: ...


class Policy(Protocol):
    name: str

    def limit(self, run: Run) -> int: ...

    def clamp_tokens(self, run: Run) -> int | None:
        """The clamp the replayed thread is created with (None: nothing clamped)."""
        ...

    async def before_call(self, run: Run) -> str | None:
        """Take whatever windows are due; a reason when the call must not be sent."""
        ...

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None: ...


def _trigger(used: int, window: int, reason: str, freed: int = 0) -> WindowTrigger:
    return WindowTrigger(
        used=used, line=window, ceiling=window, window=window, freed=freed, reason=reason
    )


@dataclass(frozen=True)
class RunHost:
    """A replay's run, as the window step sees it: the daemon's own step over the replayed
    view."""

    run: Run

    @property
    def view(self) -> Projection:
        return self.run.view

    def usage(self) -> ContextUsage:
        run = self.run
        return measure(run.view, ModelWindow(run.window, True), run.config.ceilings)

    def now(self) -> datetime:
        return self.run.now

    async def carry_out(self, cut: Cut) -> Window | str:
        run = self.run
        if cut.needs_curator:
            taken = await run.curator_summary(cut)
        else:
            taken = cut.window(run.view.last_seq, run.now)
        if isinstance(taken, Window):
            run.take_window(taken)
        return taken

    async def say(self, code: str, text: str) -> None:
        self.run.append(SystemLine(at=self.run.now, code=code, text=text))

    async def ask(self, decision: Ask) -> None:
        self.run.holds["ask-pending"] += 1  # a replayed thread is no head: never asked


class CondensatePolicy:
    """The real core: the daemon's window step, as the runtime's checkpoint runs it before
    each native model call."""

    name = "condensate"

    def limit(self, run: Run) -> int:
        return measure(run.view, ModelWindow(run.window, True), run.config.ceilings).limit

    def clamp_tokens(self, run: Run) -> int | None:
        return run.config.planner.tiers.clamp_tokens

    async def before_call(self, run: Run) -> str | None:
        done = await window_step.step(RunHost(run), run.config.planner)
        if done.held is not None:
            run.holds[done.held.why] += 1
        return done.stop

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None:
        """The refusal is logged; the next check forces a window."""


class UnmanagedPolicy:
    """Sends everything; when the provider refuses, drops the oldest history down to half
    the window (the brief kept)."""

    name = "unmanaged"

    def limit(self, run: Run) -> int:
        return run.window

    def clamp_tokens(self, run: Run) -> int | None:
        return None

    async def before_call(self, run: Run) -> str | None:
        return None

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None:
        _drop(run, exc.tokens or run.window, "unmanaged: the provider refused the prompt")


def _drop(run: Run, used: int, reason: str) -> None:
    budget = max(run.window // 2 - run.recording.baseline, 0)
    cut = tiers.summary_cut(run.view, budget, None)
    keep_from = None if cut is None else cut.keep_from
    run.take_window(
        Window(
            at=run.now,
            window_kind="drop",
            cut=run.view.last_seq,
            keep_from=keep_from,
            author="system",
            forced=True,
            trigger=_trigger(used, run.window, reason),
        )
    )


class SingleSummaryPolicy:
    """At a share of the window (83.5 %), one summary of everything; nothing kept."""

    name = "single-summary"

    def __init__(self, share: float = SINGLE_SUMMARY_SHARE) -> None:
        self.share = share

    def limit(self, run: Run) -> int:
        return run.window

    def clamp_tokens(self, run: Run) -> int | None:
        return None

    async def before_call(self, run: Run) -> str | None:
        used, _ = next_prompt(run.view)
        if used > self.share * run.window:
            await self._summarize(run, used)
        return None

    async def on_refused(self, run: Run, exc: ContextWindowExceeded) -> None:
        await self._summarize(run, exc.tokens or run.window)

    async def _summarize(self, run: Run, used: int) -> None:
        text = await run.summary_call()
        if text is None:
            _drop(run, used, "single-summary: the summary call itself was refused")
            return
        run.take_window(
            Window(
                at=run.now,
                window_kind="summary",
                cut=run.view.last_seq,
                keep_from=None,
                summary=text,
                author="curator",
                trigger=_trigger(used, run.window, f"single summary at {self.share:.1%}"),
            )
        )


def make_policy(name: str, config: ReplayConfig) -> Policy:
    if name == "condensate":
        return CondensatePolicy()
    if name == "unmanaged":
        return UnmanagedPolicy()
    if name == "single-summary":
        return SingleSummaryPolicy(config.single_summary_share)
    msg = f"Unknown policy {name!r}; use one of {', '.join(POLICIES)}."
    raise CondensateError(msg)
