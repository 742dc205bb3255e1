"""Properties over random thread logs (design.md §4 and §10): a simulated runtime plays random
steps through ``ThreadBuilder``, plans before every model call and carries each decision out;
each test checks one rule that must hold whatever the log, at every step and around every
window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import example, given, note, settings

from condensate.core import projector
from condensate.core.meter import ContextUsage, ModelWindow, measure
from condensate.core.planner import Ask, Cut, Decision, HoldBack, PlannerSettings, Stop, plan
from condensate.core.projector import Projection, pinnable, snapshot
from condensate.core.render import render_window
from condensate.core.tiers import cheap_clearing, most_freed
from condensate.events import (
    AskOpened,
    AssistantMessage,
    CheapTier,
    Engine,
    Event,
    MessagePinned,
    Stored,
    ToolResult,
    TurnEnded,
    UserMessage,
)
from condensate.testing.threads import ThreadBuilder
from tests.profiles import shaped
from tests.unit.strategies import (
    DEPARTURES,
    Action,
    Answer,
    Calls,
    Human,
    Join,
    Pin,
    Refused,
    Reply,
    Request,
    Scenario,
    Spawn,
    Step,
    Usage,
    Wait,
    scenarios,
)

# Untraced by coverage (scripts/test): its tracer made these properties, a thousand random logs
# each, take 122 s instead of 48, and the other unit tests reach all but 41 of their branches.
pytestmark = pytest.mark.no_cover

PLANNER = PlannerSettings()
TIERS = PLANNER.tiers


def planner_of(scenario: Scenario) -> PlannerSettings:
    """The engine's planner settings, with the operator's departures when the scenario
    plays them."""
    planner = shaped(scenario.engine).planner
    if not scenario.departures:
        return planner
    chosen = DEPARTURES
    tiers = replace(
        planner.tiers,
        early_share=chosen.early_share,
        target_share=chosen.target_share,
        keep_pairs=chosen.keep_pairs,
    )
    return replace(planner, tiers=tiers)


CHEAP = ("microcompact", "collapse")
EXAMPLES = settings(max_examples=1000, deadline=None)


def scripted(engine: Engine, head: bool, window: int, *actions: Action) -> Scenario:
    """A hand-written scenario for ``@example``: a 100-token brief, a 2,000-token baseline."""
    steps = tuple(Step(action, 100, False) for action in actions)
    ceilings = shaped(engine).ceilings
    return Scenario(engine, head, window, True, 2_000, ceilings, 100, False, steps, 0)


def calls(tool: str, tokens: int) -> Calls:
    return Calls(((tool, tokens, False),))


# -- the simulated runtime -------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One view entry as it stood at a moment (entries are mutated in place by a clearing)."""

    seq: int
    role: str
    tokens: int
    full_tokens: int
    event: Event | None
    receipt: str | None
    category: str | None
    batch: int
    read_key: str | None = None


def freeze(view: Projection) -> tuple[Seen, ...]:
    return tuple(
        Seen(
            e.seq,
            e.role,
            e.tokens,
            e.full_tokens,
            e.event,
            e.receipt,
            e.category,
            e.batch,
            e.read_key,
        )
        for e in view.entries
    )


@dataclass(frozen=True)
class Taken:
    """A cut the runtime carried out: the decision, the view around it, the usage after it."""

    cut: Cut
    before: tuple[Seen, ...]
    after: tuple[Seen, ...]
    usage: ContextUsage
    unjoined: dict[str, int]
    """Unjoined child -> the seq of the assistant message that spawned it, before the cut."""
    ran: tuple[str, ...] = ()
    """The tiers taken since the last summary, before the cut."""


@dataclass
class Runtime:
    """Plays a scenario the way the runtime does: append, plan, carry the decision out."""

    scenario: Scenario
    on_cut: Callable[[Runtime, Taken], None] | None = None
    on_decision: Callable[[Runtime, Decision], None] | None = None
    on_step: Callable[[Runtime], None] | None = None
    b: ThreadBuilder = field(init=False)
    summaries: dict[str, int] = field(default_factory=dict, repr=False)
    unjoined: dict[str, int] = field(default_factory=dict)
    children: int = 0
    stopped: bool = False
    snapshot: tuple[int, str] | None = None
    script: list[str | tuple[Any, ...] | Decision] = field(default_factory=list, repr=False)
    """What happened, formatted only when a failure is reported (see ``transcript``)."""
    results: dict[str, int] = field(default_factory=dict, repr=False)
    """Call id -> the seq of its result."""

    def __post_init__(self) -> None:
        sc = self.scenario
        self.b = ThreadBuilder(engine=sc.engine, head=sc.head, baseline=sc.baseline)
        self.script += [
            f"b = ThreadBuilder(engine={sc.engine!r}, head={sc.head}, baseline={sc.baseline})",
            f"w = ModelWindow({sc.window}, {sc.resolved})",
            f"c = {sc.ceilings!r}",
        ]
        self.window = ModelWindow(sc.window, sc.resolved)

    def play(self) -> Runtime:
        sc, b = self.scenario, self.b
        self.call("turn", self.human_text(), sc.brief_tokens, pinned=sc.brief_pinned)
        steps = (None, *sc.steps)
        for i, step in enumerate(steps):
            if step is not None:
                self.do(step)
            self.decide(step)
            if self.on_step is not None:
                self.on_step(self)
            if i == sc.snapshot_at:
                self.snapshot = (b.seq, snapshot.dump(b.view))
        return self

    def human_text(self) -> str:
        return f"<<human at seq {self.b.seq + 2}: carry on with the task>>"

    def summary_text(self, tokens: int, by: str) -> str:
        text = f"[summary #{len(self.summaries)} by the {by}, {tokens} tokens]"
        self.summaries[text] = tokens
        return text

    def usage(self) -> ContextUsage:
        return measure(self.b.view, self.window, self.scenario.ceilings)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the builder, and write the call down so a failure prints a reproduction."""
        self.script.append((name, args, kwargs))
        return getattr(self.b, name)(*args, **kwargs)

    def do(self, step: Step) -> None:
        b, action = self.b, step.action
        if isinstance(action, Human):
            name = "turn" if action.turn or self.stopped else "user"
            self.call(name, self.human_text(), action.tokens, pinned=action.pinned)
            self.stopped = False
        elif isinstance(action, Wait):
            self.call("tick", action.seconds)
        elif isinstance(action, Pin):
            view = b.view
            choices = [
                e.seq
                for e in view.entries
                if e.seq not in view.protected_seqs and pinnable(view, e.seq) is None
            ]
            if choices:
                pinned = MessagePinned(at=b.tick(), pinned=choices[action.pick % len(choices)])
                self.call("add", pinned, 0)
        elif isinstance(action, Join):
            if self.unjoined:
                child = sorted(self.unjoined)[action.pick % len(self.unjoined)]
                del self.unjoined[child]
                self.call("join", child)
        elif isinstance(action, Request):
            summary = None
            if action.mode == "summary" and action.summary_tokens is not None:
                summary = self.summary_text(action.summary_tokens, action.by)
            keep_from = (
                None if action.keep_from is None else max(1, round(action.keep_from * b.seq))
            )
            self.call("request", action.mode, summary, keep_from, action.by)
        elif isinstance(action, Answer):
            if b.view.ask is not None:
                summary = None
                if action.mode == "summary" and action.summary_tokens is not None:
                    summary = self.summary_text(action.summary_tokens, action.by)
                self.call("answer", b.view.ask.ask_id, action.mode, action.by, summary)
        elif self.stopped:
            return  # the turn stopped: no model call, no tools, until a human steers
        elif isinstance(action, Calls):
            calls = [
                (tool, f"path/{b.seq}/{i}", tokens, error, None)
                for i, (tool, tokens, error) in enumerate(action.calls)
            ]
            for stored in self.call("batch", calls)[1:]:
                self.results[stored.event.call_id] = stored.seq
        elif isinstance(action, Reply):
            self.call("reply", "reply", action.tokens)
        elif isinstance(action, Usage):
            self.call("usage", max(10, b.baseline + b.view.view_tokens + action.jitter))
        elif isinstance(action, Refused):
            tokens = None if action.share is None else int(self.usage().used * action.share)
            self.call("refused", tokens, self.scenario.window)
        elif isinstance(action, Spawn):
            self.children += 1
            child = f"c{self.children}"
            spawned = self.call("spawn", child)
            result = b.log[spawned.seq - 2]  # seq n sits at log[n - 1]
            assert isinstance(result.event, ToolResult)
            self.results[result.event.call_id] = result.seq
            self.unjoined[child] = spawned.seq - 2  # the assistant message that called spawn

    def decide(self, step: Step | None) -> None:
        """Plan before the next model call and carry the decision out, re-planning after a
        cut as the runtime re-measures the view."""
        b = self.b
        for _ in range(3):
            usage = self.usage()
            decision = plan(b.view, usage, planner_of(self.scenario), b.clock)
            self.script.append(decision)
            if isinstance(decision, Cut):
                if (
                    step is not None
                    and step.curator_misses
                    and decision.forced
                    and decision.needs_curator
                ):
                    decision = decision.as_drop()
                    self.script.append("d = d.as_drop()  # the curator missed its deadline")
                before, unjoined = freeze(b.view), dict(self.unjoined)
                ran = tuple(b.view.tiers_since_summary)
                self.take(decision, 100 if step is None else step.summary_tokens)
                if self.on_decision is not None:
                    self.on_decision(self, decision)
                if self.on_cut is not None:
                    after = freeze(b.view)
                    taken = Taken(decision, before, after, self.usage(), unjoined, ran)
                    self.on_cut(self, taken)
                continue
            if self.on_decision is not None:
                self.on_decision(self, decision)
            if isinstance(decision, Ask):
                ask = AskOpened(
                    at=b.tick(),
                    ask_id=f"a{b.seq + 1}",
                    deadline=decision.deadline,
                    used=usage.used,
                    line=usage.line,
                )
                self.script.append(
                    f"b.add(AskOpened(at=b.tick(), ask_id={ask.ask_id!r}, deadline=d.deadline, "
                    "used=d.usage.used, line=d.usage.line), 0)"
                )
                b.add(ask, 0)
            elif isinstance(decision, HoldBack) and decision.line is not None:
                self.call("line", *decision.line)
            elif isinstance(decision, Stop):
                self.script.append(
                    'b.add(TurnEnded(at=b.tick(), outcome="stopped", reason=d.reason), 0)'
                )
                b.add(TurnEnded(at=b.tick(), outcome="stopped", reason=decision.reason), 0)
                self.stopped = True
            return

    def take(self, cut: Cut, summary_tokens: int) -> None:
        """Append the cut's window event; a curator's summary stays within the budget."""
        b = self.b
        if cut.needs_curator:
            tokens = min(summary_tokens, TIERS.summary_budget)
            text = self.summary_text(tokens, "curator")
            event = cut.window(b.seq, b.tick(), summary=text, author="curator")
            shown = f"summary={text!r}, author='curator'"
        else:
            event = cut.window(b.seq, b.tick())
            tokens = 0 if event.summary is None else self.summaries[event.summary]
            shown = ""
        self.script.append(
            f"b.add(d.window(b.seq, b.tick(), {shown}), {tokens})".replace(", )", ")")
        )
        b.add(event, tokens)


def transcript(script: list[str | tuple[Any, ...] | Decision]) -> str:
    """The builder calls and decisions of a run, as code to paste into a unit test (with the
    imports of this module)."""
    lines = []
    for item in script:
        if isinstance(item, str):
            lines.append(item)
        elif isinstance(item, tuple):
            name, args, kwargs = item
            shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
            lines.append(f"b.{name}({', '.join(shown)})")
        else:
            lines.append(
                "d = plan(b.view, measure(b.view, w, c), shaped(b.view.engine).planner, b.clock)"
                f"  # {describe(item)}"
            )
    return "\n".join(lines)


def describe(decision: Decision) -> str:
    if isinstance(decision, Cut):
        shown = {
            "kind": decision.kind,
            "reason": decision.reason,
            "cleared": decision.cleared,
            "keep_from": decision.keep_from,
            "forced": decision.forced,
            "held_back": decision.held_back,
            "request": decision.request,
        }
        return f"Cut({', '.join(f'{k}={v!r}' for k, v in shown.items() if v)})"
    usage = f"used={decision.usage.used}, line={decision.usage.line}"
    if isinstance(decision, HoldBack):
        return f"HoldBack({decision.why!r}, {usage})"
    if isinstance(decision, Stop):
        return f"Stop({decision.reason!r}, {usage})"
    return f"{type(decision).__name__}({usage})"


def run(scenario: Scenario, **hooks: Callable[..., None]) -> Runtime:
    """Play ``scenario``; on a failure, hypothesis prints the builder calls that led to it."""
    runtime = Runtime(scenario, **hooks)  # type: ignore[arg-type]
    try:
        return runtime.play()
    except BaseException:
        note(transcript(runtime.script))
        raise


# -- checks ------------------------------------------------------------------------------------


def user_messages(log: list[Stored]) -> list[Stored]:
    return [s for s in log if isinstance(s.event, UserMessage)]


def check_pairs(rt: Runtime) -> None:
    b, results = rt.b, rt.results
    entries = b.view.entries
    position = {e.seq: i for i, e in enumerate(entries)}
    for i, entry in enumerate(entries):
        if entry.role == "tool":
            result = b.log[entry.seq - 1].event
            assert isinstance(result, ToolResult)
            at = position.get(entry.batch)
            assert at is not None, f"result {entry.seq} lost its call {entry.batch}"
            assert at < i, f"result {entry.seq} comes before its call {entry.batch}"
            call = entries[at].event
            assert isinstance(call, AssistantMessage)
            assert result.call_id in {c.id for c in call.tool_calls}
        elif entry.role == "assistant":
            assert isinstance(entry.event, AssistantMessage)
            for tool_call in entry.event.tool_calls:
                if tool_call.id in results:
                    assert results[tool_call.id] in position, (
                        f"call {tool_call.id} at {entry.seq} kept without its result "
                        f"{results[tool_call.id]}"
                    )


def check_protected(b: ThreadBuilder) -> None:
    """The brief, every message pinned (when sent or after), and the current task (the
    latest human message) are in the view, unchanged."""
    messages = user_messages(b.log)
    pinned_after = {s.event.pinned for s in b.log if isinstance(s.event, MessagePinned)}
    humans = [s for s in messages if isinstance(s.event, UserMessage) and s.event.author == "human"]
    current = humans[-1].seq if humans else None
    by_seq = {s.seq: s for s in b.log}
    kept = {e.seq: e for e in b.view.entries}
    protected = [messages[0].seq, *pinned_after]
    protected += [s.seq for s in messages if isinstance(s.event, UserMessage) and s.event.pinned]
    if current is not None:
        protected.append(current)
    for seq in protected:
        stored = by_seq[seq]
        entry = kept.get(seq)
        assert entry is not None, f"protected message {seq} left the view"
        assert entry.event == stored.event
        assert entry.receipt is None
        assert entry.tokens == stored.tokens


def check_rendered(b: ThreadBuilder) -> None:
    text = render_window(b.view)
    brief = user_messages(b.log)[0].event
    assert isinstance(brief, UserMessage)
    assert brief.text in text
    for entry in b.view.entries:
        if entry.role == "user":
            assert isinstance(entry.event, UserMessage)
            assert entry.event.text in text, f"message {entry.seq} not rendered verbatim"


# -- properties --------------------------------------------------------------------------------


@EXAMPLES
@given(scenarios())
def test_a_tool_call_and_its_result_never_separate(scenario: Scenario) -> None:
    """Every view keeps each tool result after its call and each batch whole, or drops both."""
    run(
        scenario,
        on_step=check_pairs,
        on_cut=lambda rt, taken: check_pairs(rt),
    )


def check_cheap(rt: Runtime, taken: Taken) -> None:
    cut = taken.cut
    if cut.kind not in CHEAP:
        return
    before, after = taken.before, taken.after
    assert [x.seq for x in before] == [y.seq for y in after], "a cheap tier moved entries"
    recent = {x.seq for x in before if x.role == "tool"}
    tiers = planner_of(rt.scenario).tiers
    recent = set(sorted(recent)[-tiers.keep_pairs :])
    latest = max((x.batch for x in before if x.role == "tool"), default=None)
    recent |= {x.seq for x in before if x.role == "tool" and x.batch == latest}
    shown_after = {y.read_key: y.seq for y in after if y.read_key and y.receipt is None}
    for x, y in zip(before, after, strict=True):
        if x.role != "tool":
            assert x == y, f"{cut.kind} altered the {x.role} entry at seq {x.seq}"
            continue
        if x == y:
            continue
        assert x.receipt is None
        assert y.receipt is not None
        assert x.category != "control", f"{cut.kind} cleared control result {x.seq}"
        if cut.forced:
            continue  # a forced clearing takes the largest results, of any age and size
        if x.read_key is not None and shown_after.get(x.read_key, 0) > x.seq:
            # A read superseded by a later one of the same thing, which stays shown.
            assert y.receipt is not None
            assert f"superseded by the same read at seq {shown_after[x.read_key]}" in y.receipt
            continue
        assert x.full_tokens >= TIERS.small_result_tokens, f"cleared small result {x.seq}"
        assert x.seq not in recent, f"{cut.kind} cleared recent result {x.seq}"


@EXAMPLES
@given(scenarios())
def test_cheap_tiers_never_touch_humans_control_small_or_recent_results(
    scenario: Scenario,
) -> None:
    """Microcompact and collapse only turn older, larger, non-control results into receipts."""
    run(scenario, on_cut=check_cheap)


@EXAMPLES
@given(scenarios())
def test_the_prefix_stays_the_same_between_two_windows(scenario: Scenario) -> None:
    """Between two windows the view only grows at its end: what one request showed, the next
    shows again as it was, so the provider's cached prefix stays valid until a window."""
    last: dict[str, Any] = {}

    def same_prefix(rt: Runtime) -> None:
        view = rt.b.view
        now = freeze(view)
        if last.get("layout") == view.layout:
            before = last["entries"]
            assert now[: len(before)] == before, "the view changed between two windows"
        last.update(layout=view.layout, entries=now)

    run(scenario, on_step=same_prefix)


def check_target(rt: Runtime, taken: Taken) -> None:
    cut = taken.cut
    if cut.held_back or cut.request is not None or cut.forced:
        return
    line = taken.usage.line
    if "pays for itself" in cut.reason:
        early = planner_of(rt.scenario).tiers.early_share
        assert early is not None, f"a window before the line without the departure: {cut}"
        freed = sum(x.tokens for x in taken.before) - sum(y.tokens for y in taken.after)
        assert freed >= early * line - 1, f"an early {cut.kind} freed only {freed}"


@EXAMPLES
@given(scenarios())
def test_a_window_under_the_line_frees_what_it_promised(scenario: Scenario) -> None:
    """A cheap window taken before the line (it pays for itself) frees at least the share of
    the line it was taken for."""
    run(scenario, on_cut=check_target)


def check_bound(rt: Runtime) -> None:
    view = rt.b.view
    settings = planner_of(rt.scenario).tiers
    tiers: tuple[CheapTier, ...] = ("microcompact", "collapse")
    bounds = [most_freed(view, tier, settings) for tier in tiers]
    kept, view.tiers_memo = view.tiers_memo, None
    assert bounds == [most_freed(view, tier, settings) for tier in tiers], "memo != a recount"
    view.tiers_memo = kept
    for tier, bound in zip(tiers, bounds, strict=True):
        for protect in {None, view.protect_from}:
            freed = cheap_clearing(view, tier, settings, protect).freed
            assert freed <= bound, f"{tier} would free {freed}, over its bound of {bound}"


@EXAMPLES
@given(scenarios())
def test_no_cheap_tier_frees_more_than_its_bound(scenario: Scenario) -> None:
    """What the planner rules an early window out by, kept as the view grows and counted
    again after a window, is what a count from scratch gives, and no cheap tier would free
    more."""
    run(scenario, on_step=check_bound)


def check_spec_rules(rt: Runtime, taken: Taken) -> None:
    cut = taken.cut
    if rt.scenario.departures or cut.request is not None or cut.forced:
        return
    assert cut.usage.used > cut.usage.line, f"a {cut.kind} under the line: {cut.reason}"
    assert cut.kind not in taken.ran, f"{cut.kind} again since the last summary ({taken.ran})"
    if cut.kind == "microcompact":
        assert "collapse" not in taken.ran, "a microcompact after the collapse that covers it"


@EXAMPLES
@given(scenarios())
def test_by_default_a_window_only_over_the_line_and_no_tier_twice(scenario: Scenario) -> None:
    """With the spec's defaults a window (not asked for, not forced) is taken only when the
    next prompt would pass the line, and no cheap tier that ran since the last summary runs
    again: neither itself nor the microcompact a collapse covers."""
    run(scenario, on_cut=check_spec_rules)


def check_cut_under_the_line(rt: Runtime, taken: Taken) -> None:
    cut = taken.cut
    if cut.held_back or cut.request is not None:
        return
    assert taken.usage.used <= taken.usage.line, (
        f"{cut.kind} window ({cut.reason}) left {taken.usage.used} over the line {taken.usage.line}"
    )


@EXAMPLES
@given(scenarios())
def test_after_a_window_the_prompt_is_under_the_line(scenario: Scenario) -> None:
    """A window the planner chose (forced too) leaves the prompt under the line; else it stops."""
    run(scenario, on_cut=check_cut_under_the_line)


def check_stop(rt: Runtime, decision: Decision) -> None:
    if not isinstance(decision, Stop):
        return
    assert decision.reason.strip(), "a stop must state its reason"
    usage = decision.usage
    assert usage.used > usage.limit or rt.b.view.refusal is not None, (
        f"stopped the turn at {usage.used} tokens, under the ceiling {usage.limit}: "
        f"{decision.reason}"
    )


@EXAMPLES
@given(scenarios())
# A requested summary with nothing to summarize once stopped every turn, under the line.
@example(scripted("api", False, 60_000, Request("summary", "thread", None, 0.0)))
# A human message no tier can cut, over the line and under the ceiling, once stopped the turn.
@example(scripted("api", False, 200_000, Human(75_000, False, True)))
def test_a_turn_stops_only_over_the_ceiling_and_says_why(scenario: Scenario) -> None:
    """A turn stops only with a prompt over the ceiling (a head: its hard limit) or refused,
    and it says why: over the line and under the ceiling it goes on uncut."""
    run(scenario, on_decision=check_stop)


@EXAMPLES
@given(scenarios())
def test_replay_after_a_snapshot_equals_a_full_replay(scenario: Scenario) -> None:
    """A snapshot plus the events after it folds to the same view as a replay from seq 1."""
    rt = run(scenario)
    assert rt.snapshot is not None
    upto, state = rt.snapshot
    restored = snapshot.load(state).apply_all(rt.b.log[upto:])
    full = projector.project(rt.b.log)
    assert restored == full
    assert full == rt.b.view
    assert snapshot.dump(restored) == snapshot.dump(full)
    assert render_window(restored) == render_window(full)


@EXAMPLES
@given(scenarios())
def test_the_brief_pins_and_the_current_task_survive_every_tier(scenario: Scenario) -> None:
    """The first user message, every pinned one (pinned as it was sent or afterwards) and
    the latest human message stay in the view, unchanged, through every tier and drops."""
    run(
        scenario,
        on_step=lambda rt: check_protected(rt.b),
        on_cut=lambda rt, taken: check_protected(rt.b),
    )


@EXAMPLES
@given(scenarios())
def test_the_rendered_window_holds_the_brief_and_kept_humans_verbatim(
    scenario: Scenario,
) -> None:
    """render_window carries the brief and every human message still in the view, verbatim."""
    rt = run(scenario, on_cut=lambda rt, taken: check_rendered(rt.b))
    check_rendered(rt.b)


def check_child_kept(rt: Runtime, taken: Taken) -> None:
    cut = taken.cut
    if cut.forced or cut.request is not None:
        return  # a forced window cuts anyway; a request names its own range
    for child, spawn in taken.unjoined.items():
        # The kept range runs from the spawn call's place in the view (or, if a forced window
        # took the call, from the first message after it) to the end.
        start = next(
            (
                i
                for i, x in enumerate(taken.before)
                if x.seq >= spawn and x.role in ("user", "assistant", "tool")
            ),
            len(taken.before),
        )
        kept = taken.before[start:]
        assert taken.after[len(taken.after) - len(kept) :] == kept, (
            f"{cut.kind} window ({cut.reason}) changed the view at or after the spawn of "
            f"unjoined child {child} (seq {spawn})"
        )


@EXAMPLES
@given(scenarios())
# A head's ask runs out while a child is out: the summary must still stop above the spawn.
@example(
    scripted(
        "claude",
        True,
        100_000,
        calls("shell", 20_000),
        Spawn(),
        *[calls("read", 16_000)] * 4,
        Wait(3_600),
    )
)
def test_an_unjoined_child_keeps_its_spawn_and_after_verbatim(scenario: Scenario) -> None:
    """Until a child joins, no unforced window changes its spawn call or anything after it."""
    run(scenario, on_cut=check_child_kept)
