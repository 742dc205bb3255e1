"""The windowing planner: one pure function from (view, usage, settings, clock) to a decision.

It runs before every model call. Below the line it says ``Proceed``. Above it, it takes the
ladder (microcompact, collapse, summary: a cheap tier that frees under 10 % or leaves the prompt
over the line hands on; a tier that ran since the last summary is not repeated), unless a
hold-back applies (an unjoined child, a thrash pause, a baseline windows cannot help, an open
ask). A forced window (a refusal, or a prompt at the model's hard limit) clears the largest
kept results first and cuts through every hold-back; a head its engine asks is asked even at
the hard limit, and only a refusal or its unanswered ask forces it. When nothing can cut, the
turn stops with a reason if the prompt would pass the ceiling, and goes on uncut below it.
Pure: no I/O, no awaits; the clock comes in as ``now``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from condensate.core import tiers
from condensate.core.meter import ContextUsage
from condensate.core.projector import CANNOT_HELP_CODE, PAUSE_CODE, Projection
from condensate.core.tiers import TierSettings
from condensate.events import (
    Author,
    CheapTier,
    ProbeReport,
    Window,
    WindowKind,
    WindowTrigger,
)

CHEAP_SHARE = 0.10
"""A cheap tier must free at least this share of the context to be worth its cache miss."""
NOTHING_TO_CUT_CODE = "window-held"
"""The system line of a prompt over the line that no tier can cut, under the ceiling."""


@dataclass(frozen=True)
class PlannerSettings:
    tiers: TierSettings = field(default_factory=TierSettings)
    thrash_turns: int = 3
    """A turn here is one model call: an autonomous human turn holds hundreds of them, and
    a window on each of three calls in a row is what thrashing looks like."""
    thrash_windows: int = 3
    thrash_summaries: int = 3
    thrash_period: timedelta = timedelta(minutes=10)
    deadline_override: timedelta | None = None
    """``CONDENSATE_WINDOW_DEADLINE_MS``; else 180 s plus 10 s per 10,000 tokens in use."""
    heads: Literal["asked", "cut"] = "cut"
    """Whether the thread's engine asks a head to compact, or cuts it as any thread (its
    ``EngineInfo`` says)."""
    restarts: bool = False
    """The thread's engine applies a summary by restarting its session with the window
    rendered into one message (its ``EngineInfo`` says): a smaller kept tail."""


def deadline(used: int, override: timedelta | None = None) -> timedelta:
    """How long a summary (or an answer to an ask) may take."""
    if override is not None:
        return override
    return timedelta(seconds=180 + 10 * math.ceil(used / 10_000))


@dataclass(frozen=True)
class Proceed:
    """Send the view as it is."""

    usage: ContextUsage


@dataclass(frozen=True)
class HoldBack:
    """A window is due but would cost more than it saves; send the view uncut."""

    usage: ContextUsage
    why: Literal["child", "paused", "cannot-help", "ask-pending", "nothing-to-cut"]
    detail: str
    line: tuple[str, str] | None = None
    """(code, text) of a system line the runtime writes: once per pause, or once a turn."""


@dataclass(frozen=True)
class Cut:
    """Take a window. A summary without ``summary`` text goes to the curator first."""

    usage: ContextUsage
    kind: WindowKind
    reason: str
    freed: int
    cleared: tuple[int, ...] = ()
    keep_from: int | None = None
    forced: bool = False
    summary: str | None = None
    author: Author | None = None
    request: int | None = None
    ask: str | None = None
    held_back: bool = False
    """Cut only above an unjoined child's spawn; the prompt may stay over the line."""

    @property
    def needs_curator(self) -> bool:
        return self.kind == "summary" and self.summary is None

    def window(
        self,
        cut: int,
        at: datetime,
        summary: str | None = None,
        author: Author | None = None,
        probes: ProbeReport | None = None,
    ) -> Window:
        """The event that records this cut, once any summary is written (with what its
        probes found, for a curator's)."""
        text = summary if summary is not None else self.summary
        return Window(
            at=at,
            window_kind=self.kind,
            cut=cut,
            cleared=self.cleared,
            keep_from=self.keep_from,
            summary=text,
            author=author or self.author or ("system" if self.kind == "drop" else None),
            forced=self.forced,
            trigger=WindowTrigger(
                used=self.usage.used,
                line=self.usage.line,
                ceiling=self.usage.ceiling,
                window=self.usage.window,
                freed=self.freed,
                reason=self.reason,
            ),
            request=self.request,
            ask=self.ask,
            probes=probes,
        )

    def as_slide(self) -> Cut:
        """The summary did not arrive and the prompt would pass the ceiling: the sliding
        window drops the same range without one (no model call; a one-line notice)."""
        return Cut(
            self.usage,
            "drop",
            f"{self.reason}; sliding window: no summary arrived",
            self.freed,
            self.cleared,
            self.keep_from,
            author="system",
            request=self.request,
            ask=self.ask,
        )

    def as_drop(self) -> Cut:
        """The curator missed a forced summary: drop the same range without one."""
        return Cut(
            self.usage,
            "drop",
            f"{self.reason}; the curator missed its deadline",
            self.freed,
            self.cleared,
            self.keep_from,
            forced=True,
            author="system",
            request=self.request,
            ask=self.ask,
        )


@dataclass(frozen=True)
class Ask:
    """Ask a head (on an engine whose heads are asked) to compact; wait until ``deadline``."""

    usage: ContextUsage
    deadline: datetime


@dataclass(frozen=True)
class Stop:
    """Nothing can cut and the prompt would still be over: stop the turn."""

    usage: ContextUsage
    reason: str


Decision = Proceed | HoldBack | Cut | Ask | Stop


def plan(
    view: Projection, usage: ContextUsage, settings: PlannerSettings, now: datetime
) -> Decision:
    """Decide what to do before the next model call."""
    if view.requested is not None:
        return _requested(view, usage, settings)
    if view.refusal is not None:
        return _forced(view, usage, settings)
    if usage.used <= usage.line:
        return _early(view, usage, settings) or Proceed(usage)
    over_limit = usage.used > usage.limit
    if usage.helpless:
        # Report rather than cut; a refusal from the provider still forces a window.
        text = _cannot_help_text(view, usage)
        if over_limit:
            return Stop(usage, text)
        return _hold(view, usage, "cannot-help", CANNOT_HELP_CODE, text, settings=settings)
    if view.head and settings.heads == "asked":
        # Asked even past the hard limit: such a head is never cut on Condensate's own
        # initiative, only once its ask goes unanswered (or on the provider's refusal).
        return _head_ask(view, usage, settings, now)
    if usage.used > usage.hard_limit:
        return _forced(view, usage, settings)
    # A pause holds windows back only while the prompt stays under the ceiling.
    pause = None if over_limit else _thrash(view, usage, settings, now)
    if pause is not None:
        return _hold(view, usage, "paused", PAUSE_CODE, pause, settings=settings)
    decision = _ladder(view, usage, settings)
    if isinstance(decision, Cut) and decision.kind == "summary" and _just_summarized(view):
        # Nothing was said since the last summary: another would summarize the same content
        # (a new session whose first prompt is still over the line), again and again.
        detail = "a summary was just taken and the prompt is still over the line"
        if over_limit:
            return Stop(usage, f"{detail}; it would pass the ceiling of {usage.limit}")
        return _hold(view, usage, "paused", PAUSE_CODE, detail, settings=settings)
    if over_limit and isinstance(decision, HoldBack):
        return Stop(
            usage,
            f"{decision.detail}, and the prompt ({usage.used} tokens) would pass "
            f"the ceiling of {usage.limit}",
        )
    return _stop_over_the_ceiling(view, usage, decision, settings)


def _stop_over_the_ceiling(
    view: Projection, usage: ContextUsage, decision: Decision, settings: PlannerSettings
) -> Decision:
    """A turn stops only when the next prompt would pass the ceiling (a head: its hard limit).
    Over the line and under it, a prompt nothing can cut is sent uncut, the reason said once a
    turn."""
    if not isinstance(decision, Stop) or usage.used > usage.limit:
        return decision
    return _hold(
        view, usage, "nothing-to-cut", NOTHING_TO_CUT_CODE, decision.reason, settings=settings
    )


def _early(view: Projection, usage: ContextUsage, settings: PlannerSettings) -> Cut | None:
    """Under the line, a cheap window that pays for itself: above the target, when clearing
    frees at least ``early_share`` of the line, every later call reads that much less from
    the cache than the one rewrite of the tail costs."""
    tier_settings = settings.tiers
    if tier_settings.early_share is None or view.head or view.protect_from is not None:
        return None
    if usage.used <= int(usage.line * tier_settings.target_share):
        return None
    tier = tier_settings.early_tier
    enough = tier_settings.early_share * usage.line
    if tiers.most_freed(view, tier, tier_settings) < enough:
        # Ruled out without choosing what to clear: the choice reads the whole view, and
        # this check runs before every call under the line, where no window is due.
        return None
    clearing = tiers.cheap_clearing(view, tier, tier_settings, None)
    if clearing.freed < enough:
        return None
    return Cut(usage, tier, f"{tier}: pays for itself", clearing.freed, clearing.cleared)


def _ladder(view: Projection, usage: ContextUsage, settings: PlannerSettings) -> Decision:
    protect = view.protect_from
    ran = set(view.tiers_since_summary)
    cheap: list[CheapTier] = []
    if not ran & {"microcompact", "collapse"}:
        cheap.append("microcompact")
    if "collapse" not in ran:
        cheap.append("collapse")
    over = usage.used - usage.line
    target = int(usage.line * settings.tiers.target_share)
    best: Cut | None = None
    under: Cut | None = None
    """The cheapest tier that gets under the line, short of the target."""
    for tier in cheap:
        clearing = tiers.cheap_clearing(view, tier, settings.tiers, protect)
        worth = clearing.freed >= CHEAP_SHARE * usage.used
        if worth and usage.used - clearing.freed <= target:
            return Cut(usage, tier, f"{tier}: over the line", clearing.freed, clearing.cleared)
        if worth and clearing.freed >= over and under is None:
            under = Cut(usage, tier, f"{tier}: over the line", clearing.freed, clearing.cleared)
        if worth and best is None:
            best = Cut(
                usage,
                tier,
                f"{tier}: above an unjoined child",
                clearing.freed,
                clearing.cleared,
                held_back=True,
            )
    if under is not None and protect is None:
        return under
    summary = _summary(view, usage, settings, protect, forced=False)
    if isinstance(summary, Cut) and (protect is None or summary.freed >= over):
        return summary
    if protect is not None:
        if isinstance(summary, Cut) and summary.freed >= CHEAP_SHARE * usage.used:
            return replace(summary, held_back=True)
        if best is not None:
            return best
        return HoldBack(usage, "child", "an unjoined child's spawn keeps the rest verbatim")
    return summary if isinstance(summary, Stop) else Stop(usage, "no tier can cut")


def _summary(
    view: Projection,
    usage: ContextUsage,
    settings: PlannerSettings,
    protect: int | None,
    *,
    forced: bool,
    reason: str = "summary: over the line",
) -> Cut | Stop:
    budget = settings.tiers.summary_budget
    # A refusal's claim says the whole prompt is too long, not that its fixed part grew: a
    # claim far above the prompt must not make every summary look too large (a wedge).
    fixed = usage.measured - view.view_tokens
    room = usage.line - fixed - budget
    tail_budget = min(int(usage.line * settings.tiers.tail_share(settings.restarts)), room)
    to_target = int(usage.line * settings.tiers.target_share) - fixed - budget
    if to_target >= 0:
        # Down to the target, when the fixed part leaves any room under it.
        tail_budget = min(tail_budget, to_target)
    cut = tiers.summary_cut(view, max(tail_budget, 0), protect)
    if cut is None:
        return Stop(usage, "nothing before the kept range can be summarized")
    after = fixed + cut.after + budget + cut.verbatim
    if after > usage.line and protect is None:
        return Stop(
            usage,
            f"even a summary leaves {after} tokens over the line of {usage.line}: the "
            "baseline, the brief, pins and the latest exchange are too large",
        )
    return Cut(
        usage, "summary", reason, usage.measured - after, keep_from=cut.keep_from, forced=forced
    )


def summary_plan(view: Projection, usage: ContextUsage, settings: PlannerSettings) -> Cut | Stop:
    """The summary the ladder would take now, ignoring whether one is due."""
    return _summary(view, usage, settings, view.protect_from, forced=False)


def _forced(view: Projection, usage: ContextUsage, settings: PlannerSettings) -> Decision:
    why = "the provider refused the prompt" if view.refusal is not None else "at the hard limit"
    need = usage.used - usage.line
    if need <= 0:
        # Refused below our own line: the provider's window is smaller than we believe.
        need = usage.used // 4
    clearing = tiers.largest_clearing(view, need)
    if clearing.cleared and clearing.freed >= need:
        return Cut(
            usage, "collapse", f"forced: {why}", clearing.freed, clearing.cleared, forced=True
        )
    return _summary(view, usage, settings, None, forced=True, reason=f"forced: {why}")


def _requested(view: Projection, usage: ContextUsage, settings: PlannerSettings) -> Decision:
    """A compaction someone asked for, taken as asked, under the line or not, but never
    into an unjoined child's range: its spawn and what follows stay verbatim."""
    request = view.requested
    assert request is not None
    protect = view.protect_from
    if request.mode == "microcompact":
        clearing = tiers.cheap_clearing(view, "microcompact", settings.tiers, protect)
        return Cut(
            usage,
            "microcompact",
            f"requested by the {request.by}",
            clearing.freed,
            clearing.cleared,
            request=request.seq,
            ask=request.ask_id,
        )
    keep_from = _snap(view, request.keep_from)
    if protect is not None:
        spawn = view.entries[protect].seq
        keep_from = spawn if keep_from is None else min(_snap(view, spawn) or spawn, keep_from)
    if keep_from is None:
        # Asked for: the fit rules of an automatic cut do not apply; with nothing to keep,
        # the summary stands right after the brief and pins.
        tail = int(usage.line * settings.tiers.tail_share(settings.restarts))
        chosen = tiers.summary_cut(view, tail, None)
        keep_from = None if chosen is None else chosen.keep_from
    author: Author | None = None
    if request.summary is not None:
        author = "thread" if request.by == "thread" else "operator"
    return Cut(
        usage,
        "summary",
        f"requested by the {request.by}",
        0,
        keep_from=keep_from,
        summary=request.summary,
        author=author,
        request=request.seq,
        ask=request.ask_id,
    )


def _snap(view: Projection, keep_from: int | None) -> int | None:
    """A requested kept range starts at the last safe boundary at or before it."""
    if keep_from is None:
        return None
    boundaries = [view.entries[b].seq for b in tiers.safe_boundaries(view)]
    earlier = [seq for seq in boundaries if seq <= keep_from]
    return earlier[-1] if earlier else None


def _head_ask(
    view: Projection, usage: ContextUsage, settings: PlannerSettings, now: datetime
) -> Decision:
    """A head on an engine whose heads are asked: ask it, wait for its answer, and cut on
    Condensate's own only once the deadline passes. Past its hard limit nothing is sent while
    it waits (the provider would refuse the prompt): the ask is repeated, or after a decline
    the turn stops."""
    past = usage.used > usage.hard_limit
    if view.ask is not None:
        if now >= view.ask.deadline:
            if past:
                forced = _forced(view, usage, settings)
                return replace(forced, ask=view.ask.ask_id) if isinstance(forced, Cut) else forced
            protect = view.protect_from
            chosen = _summary(
                view,
                usage,
                settings,
                protect,
                forced=False,
                reason="nobody answered the ask before its deadline",
            )
            if isinstance(chosen, Cut):
                return replace(chosen, ask=view.ask.ask_id, held_back=protect is not None)
            if protect is not None:
                return HoldBack(usage, "child", "an unjoined child's spawn keeps the rest verbatim")
            return _stop_over_the_ceiling(view, usage, chosen, settings)
        if past:
            return Ask(usage, view.ask.deadline)
        return HoldBack(usage, "ask-pending", f"waiting for an answer to ask {view.ask.ask_id}")
    if view.declined_turn == view.turn:
        detail = "the head declined to compact this turn"
        if past:
            return Stop(
                usage,
                f"{detail}, and the prompt ({usage.used} tokens) would pass its hard limit "
                f"of {usage.hard_limit}",
            )
        return HoldBack(usage, "ask-pending", detail)
    return Ask(usage, now + deadline(usage.measured, settings.deadline_override))


def _just_summarized(view: Projection) -> bool:
    """The last window is Condensate's own summary (or drop) and no model call was counted
    since."""
    last = view.windows[-1] if view.windows else None
    return (
        last is not None
        and not last.requested
        and last.kind in ("summary", "drop")
        and last.call >= view.calls
    )


def _thrash(
    view: Projection, usage: ContextUsage, settings: PlannerSettings, now: datetime
) -> str | None:
    """Why windowing is paused, or None. Only Condensate's own windows count (a compaction
    someone asked for is not thrashing); each condition decays as calls and minutes pass."""
    automatic = [w for w in view.windows if not w.requested]
    recent = [w for w in automatic if w.call >= view.calls - settings.thrash_turns]
    if len(recent) >= settings.thrash_windows:
        return f"{len(recent)} windows within {settings.thrash_turns} model calls"
    summaries = [
        w for w in automatic if w.kind == "summary" and now - w.at < settings.thrash_period
    ]
    if len(summaries) >= settings.thrash_summaries:
        minutes = int(settings.thrash_period.total_seconds() // 60)
        return f"{len(summaries)} summaries within {minutes} minutes"
    last = automatic[-1] if automatic else None
    if (
        last is not None
        and last.kind == "summary"
        and last.call >= view.calls - settings.thrash_turns
        and last.freed < CHEAP_SHARE * last.used
    ):
        return f"the last summary freed only {last.freed} of {last.used} tokens"
    return None


def _hold(
    view: Projection,
    usage: ContextUsage,
    why: Literal["paused", "cannot-help", "nothing-to-cut"],
    code: str,
    detail: str,
    *,
    settings: PlannerSettings,
) -> HoldBack:
    """A hold-back with its system line, written once per pause (a pause line not written
    within the last few calls) or once per human turn (windows cannot help, nothing to cut)."""
    written = view.lines_written.get(code)
    if why == "paused":
        text = f"Windowing paused: {detail}. The prompt stays uncut at {usage.used} tokens."
        fresh = written is None or written[1] < view.calls - settings.thrash_turns
    elif why == "nothing-to-cut":
        text = (
            f"No window can cut yet: {detail}. The prompt goes on uncut at {usage.used} tokens, "
            f"over the line of {usage.line} and under the ceiling of {usage.limit}."
        )
        fresh = written is None or written[0] != view.turn
    else:
        text = detail
        fresh = written is None or written[0] != view.turn
    return HoldBack(usage, why, detail, (code, text) if fresh else None)


def _cannot_help_text(view: Projection, usage: ContextUsage) -> str:
    return (
        f"Windows cannot help: the fixed baseline of {view.baseline_tokens} tokens leaves under "
        f"a quarter of the ceiling ({usage.ceiling}) free even raised to the model's window."
    )
