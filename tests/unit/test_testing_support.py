"""The shipped test support keeps its word: a scripted turn answers its checkpoints as
scripted and refuses what it cannot answer, and the builders derive what follows from what a
test names."""

from __future__ import annotations

import pytest

from condensate.engine import Checkpoint
from condensate.events import SystemLine, now_utc
from condensate.testing.builders import RESERVE, usage, window
from condensate.testing.turns import ScriptedTurn


async def test_a_scripted_turn_answers_its_checks_in_order_then_goes_on() -> None:
    """Each checkpoint answers the next scripted one; once they run out, nothing is due."""
    stop = Checkpoint(usage(), stop="over")
    taken = Checkpoint(usage(), window=window())
    ctx = ScriptedTurn(checks=[taken, stop])
    assert await ctx.checkpoint() is taken
    assert await ctx.checkpoint() is stop
    last = await ctx.checkpoint()
    assert (last.window, last.stop, last.usage, ctx.checked) == (None, None, ctx.reading, 3)


async def test_a_scripted_turn_keeps_what_was_appended_and_names_its_lines() -> None:
    """One event or a batch, each is kept in order; its system lines are read by code."""
    ctx = ScriptedTurn()
    await ctx.append(SystemLine(at=now_utc(), code="first", text="x"))
    await ctx.append([SystemLine(at=now_utc(), code="second", text="y")])
    assert ctx.lines() == ["first", "second"]
    assert len(ctx.of_kind(SystemLine)) == 2


async def test_what_a_scripted_turn_cannot_answer_is_an_error_naming_the_call() -> None:
    """A model client, the log, children and approvals need a real runtime: asking a scripted
    turn for one fails at once, saying so."""
    with pytest.raises(NotImplementedError, match=r"no spawn\(\)"):
        await ScriptedTurn().spawn("brief", "call-1")


def test_a_usage_reading_follows_from_its_ceiling_and_what_is_used() -> None:
    """The line is the ceiling less the reserve, the hard limit the window less it."""
    reading = usage(used=7_000, ceiling=20_000 + RESERVE, window=100_000)
    assert (reading.line, reading.fraction, reading.hard_limit) == (20_000, 0.35, 91_808)
    assert reading.measured == 7_000
