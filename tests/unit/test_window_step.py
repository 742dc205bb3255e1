"""The window step when a summary does not arrive: with room the cut waits and the turn goes
on uncut (the spec); past the ceiling the sliding window drops the same range instead, with
a one-line notice and no model call."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from condensate.core import window_step
from condensate.core.messages import Text
from condensate.core.meter import ContextUsage
from condensate.core.planner import Ask, Cut, PlannerSettings
from condensate.core.projector import SLIDE_NOTICE, Projection
from condensate.core.prompt import to_messages
from condensate.events import Window
from condensate.testing.threads import ThreadBuilder
from tests.unit.test_planner import usage


@dataclass
class MissingCurator:
    """A host whose curator never answers: a summary is a miss, anything else is taken."""

    b: ThreadBuilder
    said: list[tuple[str, str]] = field(default_factory=list)

    @property
    def view(self) -> Projection:
        return self.b.view

    def usage(self) -> ContextUsage:
        return usage(self.b)

    def now(self) -> datetime:
        return self.b.clock

    async def carry_out(self, cut: Cut) -> Window | str:
        if cut.needs_curator:
            return "curator: timeout (no answer within 1.0 s)"
        window = cut.window(self.b.seq, self.b.tick())
        self.b.add(window, 0)
        return window

    async def say(self, code: str, text: str) -> None:
        self.said.append((code, text))

    async def ask(self, decision: Ask) -> None:
        raise AssertionError(decision)


def over_the_line(replies: int = 200) -> ThreadBuilder:
    """A thread over its line (71,808) with nothing a cheap tier could clear; with 200
    replies of 400 tokens over its ceiling (80,000) too."""
    b = ThreadBuilder()
    b.turn("Build the parser.", 100)
    b.user("Keep the lexer.", 20)
    for _ in range(replies):
        b.reply("working", 400)
    b.user("Carry on.", 10)
    return b


async def test_a_missed_summary_with_room_waits_and_goes_on_uncut():
    """Under the ceiling a miss is a miss: no window, the turn goes on uncut."""
    b = over_the_line(180)
    assert usage(b).line < usage(b).used <= usage(b).limit
    host = MissingCurator(b)
    done = await window_step.step(host, PlannerSettings())
    assert done.missed is not None
    assert done.windows == ()
    assert [code for code, _ in host.said] == ["summary-missed"]


async def test_a_missed_summary_past_the_ceiling_slides_instead():
    """Past the ceiling the sliding window drops the range the summary would have replaced:
    a drop by the system, not forced, its notice one line naming where the view starts."""
    b = over_the_line()
    assert usage(b).used > usage(b).limit
    host = MissingCurator(b)
    done = await window_step.step(host, PlannerSettings())
    assert done.missed is None
    (window,) = done.windows
    assert (window.window_kind, window.author, window.forced) == ("drop", "system", False)
    assert "sliding window" in window.trigger.reason
    assert window.keep_from is not None
    notice = SLIDE_NOTICE.format(keep_from=window.keep_from)
    assert "\n" not in notice
    assert Text(notice) in to_messages(b.view)[0].content
    assert host.said[0][0] == "summary-missed"
    assert "sliding window" in host.said[0][1]


async def test_the_sliding_window_keeps_the_brief_the_task_and_pins():
    """What survives every tier survives the slide too."""
    b = over_the_line()
    pinned = b.user("Pinned: the API is frozen.", 20, pinned=True)
    for _ in range(20):
        b.reply("more", 400)
    current = b.user("Now the tests.", 10)
    host = MissingCurator(b)
    await window_step.step(host, PlannerSettings())
    seqs = [e.seq for e in b.view.entries]
    assert b.view.brief_seq in seqs
    assert pinned.seq in seqs
    assert current.seq in seqs
    assert usage(b).used < usage(b).line
