"""Hypothesis strategies for random thread logs.

A scenario is a thread's set-up (engine, head, model window, baseline, operator caps) and a
list of steps that a simulated runtime plays through ``ThreadBuilder``, planning a window after
each one. Each step is decoded from one large integer, so that drawing a long log costs few
draws (hypothesis spends far more time per draw than the core spends per step) while still
shrinking well: smaller integers decode to simpler steps (a single small read, no error).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hypothesis import strategies as st

from condensate.core.ceilings import CeilingSettings
from condensate.core.tiers import TierSettings
from condensate.events import Engine
from tests.profiles import shaped

REREAD = ("read", "search", "grep")
ACTION = ("shell", "edit", "write")
CONTROL = ("recall", "compact_context", "spawn")
TOOLS = REREAD + ACTION + CONTROL

WINDOWS = (60_000, 100_000, 128_000, 200_000, 272_000, 400_000)
SIZES: tuple[tuple[int, int], ...] = (
    (1, 199),
    (200, 2_000),
    (200, 2_000),
    (2_000, 10_000),
    (2_000, 10_000),
    (2_000, 10_000),
    (10_000, 30_000),
    (10_000, 30_000),
)
"""Token sizes from tiny (under 200) to huge (30k), weighted toward what fills a window."""
SUMMARY_BUDGET = TierSettings().summary_budget


@dataclass(frozen=True)
class Human:
    """A human message; ``turn`` starts a new turn first (as does any human after a stop)."""

    tokens: int
    pinned: bool
    turn: bool


@dataclass(frozen=True)
class Calls:
    """One assistant message with one or more parallel tool calls, then all their results."""

    calls: tuple[tuple[str, int, bool], ...]
    """(tool, result tokens, is_error) per call."""


@dataclass(frozen=True)
class Reply:
    tokens: int


@dataclass(frozen=True)
class Usage:
    """The provider counted the prompt: the local count plus ``jitter``."""

    jitter: int


@dataclass(frozen=True)
class Refused:
    """The provider refused the prompt, naming ``share`` of the prompt we estimated (or no
    number)."""

    share: float | None


@dataclass(frozen=True)
class Spawn:
    pass


@dataclass(frozen=True)
class Join:
    pick: int
    """Which unjoined child, modulo how many there are."""


@dataclass(frozen=True)
class Request:
    """A queued compaction, by the thread or an operator."""

    mode: Literal["summary", "microcompact"]
    by: Literal["thread", "operator"]
    summary_tokens: int | None
    """The requester's own summary and its size; None leaves it to the curator."""
    keep_from: float | None
    """Where the kept range should start, as a share of the log's seqs."""


@dataclass(frozen=True)
class Answer:
    """An answer to the pending ask, if any."""

    mode: Literal["summary", "microcompact", "decline"]
    by: Literal["thread", "operator"]
    summary_tokens: int | None


@dataclass(frozen=True)
class Wait:
    seconds: int


@dataclass(frozen=True)
class Pin:
    """Pin a message of the view after the fact (``message.pinned``)."""

    pick: int
    """Which pinnable message, modulo how many there are."""


Action = Human | Calls | Reply | Usage | Refused | Spawn | Join | Request | Answer | Wait | Pin


@dataclass(frozen=True)
class Step:
    action: Action
    summary_tokens: int
    """The size of any summary the curator writes while this step's windows are taken."""
    curator_misses: bool
    """A forced summary taken in this step misses its deadline and becomes a drop."""


@dataclass(frozen=True)
class Scenario:
    engine: Engine
    head: bool
    window: int
    resolved: bool
    baseline: int
    ceilings: CeilingSettings
    brief_tokens: int
    brief_pinned: bool
    steps: tuple[Step, ...]
    snapshot_at: int
    """How many steps are played before a snapshot of the projection is taken."""
    departures: bool = False
    """Played with the departures an operator may choose (``DEPARTURES``) instead of the
    spec's defaults."""


DEPARTURES = TierSettings(early_share=0.10, target_share=0.3, keep_pairs=1)
"""The tier settings that depart from the spec's rules: cheap windows before the line, a
target under it, one recent result kept."""


class _Bits:
    """Reads bounded choices off one integer, least significant first."""

    def __init__(self, value: int) -> None:
        self.value = value

    def take(self, n: int) -> int:
        self.value, choice = divmod(self.value, n)
        return choice

    def flag(self, one_in: int = 2) -> bool:
        return self.take(one_in) == one_in - 1

    def between(self, lo: int, hi: int) -> int:
        return lo + self.take(1024) * (hi - lo) // 1023

    def size(self) -> int:
        return self.between(*SIZES[self.take(len(SIZES))])

    def summary(self) -> int | None:
        return None if self.flag() else self.between(1, SUMMARY_BUDGET)


def _call(bits: _Bits) -> tuple[str, int, bool]:
    return TOOLS[bits.take(len(TOOLS))], bits.size(), bits.flag(6)


def _action(bits: _Bits) -> Action:
    pick = bits.take(100)
    if pick < 40:
        return Calls((_call(bits),))
    if pick < 55:
        return Calls(tuple(_call(bits) for _ in range(2 + bits.take(4))))
    if pick < 63:
        return Human(bits.between(1, 3_000), bits.flag(3), not bits.flag(4))
    if pick < 66:
        return Reply(bits.between(1, 2_000))
    if pick < 76:
        return Usage(bits.between(-500, 3_000))
    if pick < 78:
        return Refused(None if bits.flag(3) else bits.between(80, 150) / 100)
    if pick < 82:
        return Spawn()
    if pick < 86:
        return Join(bits.take(4))
    if pick < 90:
        mode: Literal["summary", "microcompact"] = "microcompact" if bits.flag() else "summary"
        by: Literal["thread", "operator"] = "operator" if bits.flag() else "thread"
        keep_from = None if bits.flag() else bits.take(101) / 100
        return Request(mode, by, bits.summary(), keep_from)
    if pick < 94:
        answer = ("summary", "microcompact", "decline")[bits.take(3)]
        by = "operator" if bits.flag() else "thread"
        return Answer(answer, by, bits.summary())  # type: ignore[arg-type]
    if pick < 97:
        return Wait(bits.between(30, 3_600))
    return Pin(bits.take(64))


def decode_step(value: int) -> Step:
    bits = _Bits(value)
    summary_tokens = bits.between(1, SUMMARY_BUDGET)
    misses = bits.flag()
    return Step(_action(bits), summary_tokens, misses)


def decode_scenario(header: int, values: list[int]) -> Scenario:
    bits = _Bits(header)
    engine: Engine = ("api", "claude", "codex")[bits.take(3)]
    head = bits.flag(3)
    window = WINDOWS[bits.take(len(WINDOWS))] if bits.flag() else bits.between(60_000, 400_000)
    resolved = not bits.flag()
    baseline = (
        (0, 2_000, 12_000)[bits.take(3)],
        bits.between(0, 20_000),
        bits.between(0, 20_000),
        bits.between(0, window),
    )[bits.take(4)]
    caps = [None if bits.take(3) < 2 else bits.between(20_000, 250_000) for _ in range(3)]
    played = tuple(decode_step(value) for value in values)
    return Scenario(
        engine=engine,
        head=head,
        window=window,
        resolved=resolved,
        baseline=baseline,
        ceilings=shaped(
            engine,
            CeilingSettings(cap_all=caps[0]),
            window_ceiling_claude=caps[1],
            window_ceiling_pi=caps[2],
        ).ceilings,
        brief_tokens=bits.between(1, 3_000),
        brief_pinned=bits.flag(),
        steps=played,
        snapshot_at=bits.take(len(played) + 1),
        departures=bits.flag(3),
    )


def scenarios(min_steps: int = 20, max_steps: int = 60) -> st.SearchStrategy[Scenario]:
    """A thread's set-up and a random list of steps for the simulated runtime. Everything is
    decoded from plain integers: one for the set-up, one per step."""
    return st.builds(
        decode_scenario,
        st.integers(0, 2**96 - 1),
        st.lists(st.integers(0, 2**160 - 1), min_size=min_steps, max_size=max_steps),
    )
